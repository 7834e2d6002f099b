// Package clitest is what the tests of the kit's backends share: a
// recorder of a session's sink calls that waits for the event a test
// expects (failing with every event seen so far), a readable dump of
// events, and the opening of a session whose Close the test's cleanup
// checks. Everything is safe for concurrent use.
package clitest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
)

// RememberWord is the scenario of a resume test: turn 1 asks the model to
// remember word ("Noted."), a later "what was the word" is answered with
// it, so a model request that carries turn 1 shows the session resumed.
func RememberWord(word string) *modelmock.Scenario {
	return &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: word}, Steps: []modelmock.Step{{Text: "Noted."}}},
		{Match: modelmock.Match{Text: "what was the word"}, Steps: []modelmock.Step{{Text: "It was " + word + "."}}},
	}}
}

// Record is one sink call.
type Record struct {
	Turn int
	Ev   messages.Event
}

// Recorder collects a session's events as T (a test package's own record
// type, made by mk).
type Recorder[T any] struct {
	mk   func(turn int, ev messages.Event) T
	mu   sync.Mutex
	recs []Record
	more chan struct{}
}

// NewRecorder returns an empty recorder that hands out records made by mk.
func NewRecorder[T any](mk func(turn int, ev messages.Event) T) *Recorder[T] {
	return &Recorder[T]{mk: mk, more: make(chan struct{}, 1)}
}

// Sink is the session's transports.Sink.
func (r *Recorder[T]) Sink(turn int, ev messages.Event) {
	r.mu.Lock()
	r.recs = append(r.recs, Record{turn, ev})
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
}

// Records is every sink call so far.
func (r *Recorder[T]) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.recs...)
}

// All is every sink call so far, as T.
func (r *Recorder[T]) All() []T {
	recs := r.Records()
	out := make([]T, len(recs))
	for i, rec := range recs {
		out[i] = r.mk(rec.Turn, rec.Ev)
	}
	return out
}

// Wait returns the first record from index from on that matches, and its
// index, failing the test after d with every event seen.
func (r *Recorder[T]) Wait(t testing.TB, d time.Duration, from int, match func(T) bool) (T, int) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	find := func(recs []Record) (T, int, bool) {
		for i := from; i < len(recs); i++ {
			if v := r.mk(recs[i].Turn, recs[i].Ev); match(v) {
				return v, i, true
			}
		}
		var zero T
		return zero, 0, false
	}
	for {
		if v, i, ok := find(r.Records()); ok {
			return v, i
		}
		select {
		case <-r.more:
		case <-deadline.C:
			// an event that came with the deadline may have lost select's
			// random pick: look once more before failing
			recs := r.Records()
			if v, i, ok := find(recs); ok {
				return v, i
			}
			t.Fatalf("no matching event within %s; events:\n%s", d, Dump(recs))
		}
	}
}

// TurnEnd waits up to d for the event that closes turn: EvTurnEnd, or a
// fatal EvError.
func (r *Recorder[T]) TurnEnd(t testing.TB, turn int, d time.Duration) messages.Event {
	t.Helper()
	recs := r.Records()
	for {
		for _, rec := range recs {
			if rec.Turn == turn && (rec.Ev.Type == messages.EvTurnEnd || (rec.Ev.Type == messages.EvError && rec.Ev.Fatal)) {
				return rec.Ev
			}
		}
		r.Wait(t, d, len(recs), func(T) bool { return true })
		recs = r.Records()
	}
}

// OfType returns the events of a type in turn.
func (r *Recorder[T]) OfType(turn int, typ messages.EventType) []messages.Event {
	var out []messages.Event
	for _, rec := range r.Records() {
		if rec.Turn == turn && rec.Ev.Type == typ {
			out = append(out, rec.Ev)
		}
	}
	return out
}

// Dump renders records one a line with the fields their types use.
func Dump(recs []Record) string {
	var b strings.Builder
	for _, rec := range recs {
		ev := rec.Ev
		fmt.Fprintf(&b, "  turn %d %s", rec.Turn, ev.Type)
		for _, f := range []struct{ k, v string }{{"text", ev.Text}, {"tool", ev.ToolName}, {"id", ev.ClarificationID},
			{"state", string(ev.State)}, {"input", string(ev.Input)}, {"output", ev.Output}, {"ext", ev.ExternalSessionID}} {
			if f.v != "" {
				v := f.v
				if len(v) > 160 {
					v = v[:160] + "..."
				}
				fmt.Fprintf(&b, " %s=%q", f.k, v)
			}
		}
		if ev.Fatal {
			b.WriteString(" fatal")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Open opens a session of tr within d and has the test's cleanup close it
// within closeIn, failing the test on either error.
func Open(t testing.TB, tr transports.Transport, spec transports.SessionSpec, sink transports.Sink, d, closeIn time.Duration) transports.Session {
	t.Helper()
	s, err := tr.Open(Ctx(t, d), spec, sink)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeIn)
		defer cancel()
		require.NoError(t, s.Close(ctx))
	})
	return s
}

// Close closes s within d now, failing the test on an error (a cleanup's
// Close after it is a no-op).
func Close(t testing.TB, s transports.Session, d time.Duration) {
	t.Helper()
	require.NoError(t, s.Close(Ctx(t, d)))
}

// Ctx is a context that ends after d or with the test.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
