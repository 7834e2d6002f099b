package curation

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// liveTurn is the live tests' one turn on a real CLI: it opens tr's
// session of spec, runs turn 1 with input, allows each clarification the
// turn raises once (ask, when set, checks it first), and returns the
// turn's events through the one that closed it, which must be its
// EvTurnEnd. The session is closed when the test ends; timeout only stops
// a hang.
func liveTurn(t *testing.T, tr transports.Transport, spec transports.SessionSpec, input string, timeout time.Duration, ask func(messages.Event)) []messages.Event {
	var mu sync.Mutex
	var evs []messages.Event
	more := make(chan struct{}, 1)
	sink := func(turn int, ev messages.Event) {
		mu.Lock()
		evs = append(evs, ev)
		mu.Unlock()
		select {
		case more <- struct{}{}:
		default:
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := tr.Open(ctx, spec, sink)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	require.NoError(t, s.StartTurn(ctx, 1, input))
	answered := map[string]bool{}
	for {
		mu.Lock()
		seen := append([]messages.Event(nil), evs...)
		mu.Unlock()
		for i, ev := range seen {
			switch ev.Type {
			case messages.EvTurnEnd, messages.EvEnded, messages.EvError:
				require.Equal(t, messages.EvTurnEnd, ev.Type, "%+v", ev)
				return seen[:i+1]
			case messages.EvClarification:
				if ev.Decision == "" && !answered[ev.ClarificationID] {
					if ask != nil {
						ask(ev)
					}
					require.NoError(t, s.Answer(ctx, ev.ClarificationID, messages.DecisionAllowOnce, ""))
					answered[ev.ClarificationID] = true
				}
			}
		}
		select {
		case <-more:
		case <-ctx.Done():
			t.Fatalf("the turn did not end: %+v", seen)
		}
	}
}
