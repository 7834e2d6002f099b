package script

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// recorded is one sink call.
type recorded struct {
	turn int
	ev   messages.Event
}

// recorder is a Sink that keeps every event and counts calls made after
// the session's Close returned.
type recorder struct {
	mu     sync.Mutex
	evs    []recorded
	closed bool
	late   int
	// onEvent, when set, is called (outside the lock) for every event.
	onEvent func(turn int, ev messages.Event)
}

func (r *recorder) sink(turn int, ev messages.Event) {
	r.mu.Lock()
	if r.closed {
		r.late++
	}
	r.evs = append(r.evs, recorded{turn, ev})
	f := r.onEvent
	r.mu.Unlock()
	if f != nil {
		f(turn, ev)
	}
}

func (r *recorder) markClosed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
}

func (r *recorder) lateCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.late
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.evs...)
}

// turn returns the events of one turn, checking that events of a turn are
// contiguous (no event of another turn in between).
func (r *recorder) turn(t *testing.T, n int) []messages.Event {
	t.Helper()
	var out []messages.Event
	seen, ended := false, false
	for _, e := range r.all() {
		if e.turn == n {
			require.False(t, ended, "turn %d has events after another turn's", n)
			seen = true
			out = append(out, e.ev)
		} else if seen {
			ended = true
		}
	}
	return out
}

// briefs renders a turn's events with brief.
func (r *recorder) briefs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for _, ev := range r.turn(t, n) {
		out = append(out, brief(ev))
	}
	return out
}

// brief renders an event as one short line with the fields its type uses.
func brief(ev messages.Event) string {
	switch ev.Type {
	case messages.EvStarted:
		return fmt.Sprintf("started ext=%s model=%s", ev.ExternalSessionID, ev.Model)
	case messages.EvText:
		if ev.Delta {
			return fmt.Sprintf("text~ %q", ev.Text)
		}
		return fmt.Sprintf("text %q", ev.Text)
	case messages.EvThinking:
		return fmt.Sprintf("thinking %q", ev.Text)
	case messages.EvToolUse:
		return fmt.Sprintf("tool_use %s %s %s", ev.ToolUseID, ev.ToolName, ev.Input)
	case messages.EvToolResult:
		s := fmt.Sprintf("tool_result %s", ev.ToolUseID)
		if ev.IsError {
			s += " ERROR"
		}
		if ev.Truncated {
			s += fmt.Sprintf(" truncated(%d)", ev.OriginalBytes)
		}
		return s + fmt.Sprintf(" %q", ev.Output)
	case messages.EvClarification:
		return fmt.Sprintf("clarification %s %s %s", ev.ClarificationID, ev.ToolName, ev.Input)
	case messages.EvTurnEnd:
		s := fmt.Sprintf("turn_end %s %q turns=%d cost=%g total=%g", ev.State, ev.Text, ev.NumTurns, ev.CostUSD, ev.TotalCostUSD)
		if ev.Usage != nil {
			s += fmt.Sprintf(" tokens=%d/%d", ev.Usage.InputTokens, ev.Usage.OutputTokens)
		}
		return s
	case messages.EvError:
		if ev.Fatal {
			return fmt.Sprintf("error FATAL %q", ev.Text)
		}
		return fmt.Sprintf("error %q", ev.Text)
	case messages.EvEnded:
		return fmt.Sprintf("ended %q", ev.Text)
	case messages.EvWarning:
		return fmt.Sprintf("warning %q", ev.Text)
	}
	return fmt.Sprintf("%s %+v", ev.Type, ev)
}

// types lists the event types, deltas marked with "~".
func types(evs []messages.Event) []string {
	var out []string
	for _, ev := range evs {
		s := string(ev.Type)
		if ev.Delta {
			s += "~"
		}
		out = append(out, s)
	}
	return out
}

// find returns the first event of type typ, failing the test without one.
func find(t *testing.T, evs []messages.Event, typ messages.EventType) messages.Event {
	t.Helper()
	for _, ev := range evs {
		if ev.Type == typ {
			return ev
		}
	}
	require.Failf(t, "missing event", "no %s event in %v", typ, types(evs))
	return messages.Event{}
}

// last returns the last event, failing the test without one.
func last(t *testing.T, evs []messages.Event) messages.Event {
	t.Helper()
	require.NotEmpty(t, evs)
	return evs[len(evs)-1]
}

func mustParse(t *testing.T, js string) *Scenario {
	t.Helper()
	sc, err := ParseScenario([]byte(js))
	require.NoError(t, err)
	return sc
}

// openSession opens a session whose Close runs at cleanup (inside the
// bubble for bubbled tests) and marks the recorder closed after it.
func openSession(t *testing.T, tr *Transport, spec transports.SessionSpec) (transports.Session, *recorder) {
	t.Helper()
	rec := &recorder{}
	return openRecorded(t, tr, spec, rec), rec
}

// openRecorded opens a session whose events go to rec, which the caller
// may have given an onEvent first: the session emits from its first moment.
func openRecorded(t *testing.T, tr *Transport, spec transports.SessionSpec, rec *recorder) transports.Session {
	t.Helper()
	s, err := tr.Open(context.Background(), spec, rec.sink)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, s.Close(context.Background()))
		rec.markClosed()
	})
	return s
}

// bubble runs f in a synctest bubble: delays take no real time, and
// synctest.Wait returns once every session goroutine is blocked.
func bubble(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	synctest.Test(t, f)
}

// play starts a turn and waits until the session is blocked again (the
// turn ended, or waits on a clarification or a delay).
func play(t *testing.T, s transports.Session, turn int, input string) {
	t.Helper()
	require.NoError(t, s.StartTurn(context.Background(), turn, input))
	synctest.Wait()
}

// settle lets virtual time pass until turn n waits on a clarification or
// is closed (turn end, ended, fatal error).
func settle(t *testing.T, rec *recorder, n int) {
	t.Helper()
	for range 100000 {
		synctest.Wait()
		if evs := rec.turn(t, n); len(evs) > 0 {
			switch ev := evs[len(evs)-1]; {
			case ev.Type == messages.EvClarification, ev.Type == messages.EvTurnEnd, ev.Type == messages.EvEnded,
				ev.Type == messages.EvError && ev.Fatal:
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("turn %d never settled: %v", n, rec.briefs(t, n))
}

func requireCode(t *testing.T, err error, code messages.Code, contains ...string) {
	t.Helper()
	require.Error(t, err)
	var e *messages.Error
	require.ErrorAs(t, err, &e, "want a *messages.Error, got %T: %v", err, err)
	require.Equal(t, code, e.Code, "error: %v", err)
	for _, c := range contains {
		require.Contains(t, err.Error(), c)
	}
}

// clarificationID returns the id of the turn's last clarification.
func clarificationID(t *testing.T, evs []messages.Event) string {
	t.Helper()
	id := ""
	for _, ev := range evs {
		if ev.Type == messages.EvClarification {
			id = ev.ClarificationID
		}
	}
	require.NotEmpty(t, id, "no clarification in %v", types(evs))
	return id
}

func countType(evs []messages.Event, typ messages.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func hasPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
