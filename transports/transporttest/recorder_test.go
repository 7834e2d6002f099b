package transporttest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// step is one thing that happens to a recorder in a made-up stream.
type step struct {
	start   int // TurnStarting(start)
	refuse  int // TurnRefused(refuse)
	closing bool
	closed  bool
	turn    int
	ev      *messages.Event
}

func ev(turn int, e messages.Event) step { return step{turn: turn, ev: &e} }
func starting(n int) step                { return step{start: n} }

var (
	started = messages.Event{Type: messages.EvStarted, ExternalSessionID: "ext-1"}
	text    = messages.Event{Type: messages.EvText, Text: "hi"}
	done    = messages.Event{Type: messages.EvTurnEnd, State: messages.TurnCompleted}
	fatal   = messages.Event{Type: messages.EvError, Text: "gone", Fatal: true}
	warning = messages.Event{Type: messages.EvWarning, Text: "meh"}
	use1    = messages.Event{Type: messages.EvToolUse, ToolUseID: "u1", ToolName: "Write", Input: []byte(`{}`)}
	result1 = messages.Event{Type: messages.EvToolResult, ToolUseID: "u1", Output: "ok"}
)

func play(r *Recorder, steps []step) {
	for _, s := range steps {
		switch {
		case s.start > 0:
			r.TurnStarting(s.start)
		case s.refuse > 0:
			r.TurnRefused(s.refuse)
		case s.closing:
			r.Closing()
		case s.closed:
			r.MarkClosed()
		case s.ev != nil:
			r.Sink(s.turn, *s.ev)
		}
	}
}

// TestRecorderInvariants shows each invariant passing a good stream and
// catching a bad one.
func TestRecorderInvariants(t *testing.T) {
	tests := []struct {
		name   string
		faulty bool
		cap    int
		steps  []step
		want   []string // substrings of the violations, in order; none for a good stream
		end    bool     // want is what Check says at the end, not what Violations says meanwhile
	}{
		{name: "good stream", end: true, steps: []step{ev(0, started), starting(1), ev(1, text), ev(1, use1), ev(1, result1),
			ev(1, done), ev(0, warning), starting(2), ev(2, text), ev(2, done), ev(2, warning), {closed: true}}},
		{name: "started in the first turn", steps: []step{starting(1), ev(1, started), ev(1, done)}},
		{name: "started in a later turn", steps: []step{starting(1), ev(0, started), ev(1, done), starting(2), ev(2, started), ev(2, done)},
			want: []string{"a second EvStarted", "want 0, or the number of the first turn"}},
		{name: "started not first", steps: []step{ev(0, warning), ev(0, started)},
			want: []string{"arrived before EvStarted", "EvStarted is not the first event"}},
		{name: "faulty: errors before started", faulty: true, steps: []step{ev(0, warning),
			ev(0, messages.Event{Type: messages.EvError, Text: "garbage"}), ev(0, started)}},
		{name: "faulty: text before started", faulty: true, steps: []step{starting(1), ev(1, text), ev(1, started)},
			want: []string{"arrived before EvStarted", "EvStarted comes after"}},
		{name: "no external id", steps: []step{ev(0, messages.Event{Type: messages.EvStarted})},
			want: []string{"without the backend's ExternalSessionID"}},
		{name: "annotation type", steps: []step{ev(0, started), starting(1), ev(1, messages.Event{Type: messages.EvTurnStarted})},
			want: []string{"not an event a transport emits"}},
		{name: "turn never started", steps: []step{ev(0, started), ev(1, text)},
			want: []string{"turn 1 was never started"}},
		{name: "turn-level event at turn 0", steps: []step{ev(0, started), ev(0, text)},
			want: []string{"turn 0 is only for"}},
		{name: "closed twice", steps: []step{ev(0, started), starting(1), ev(1, done), ev(1, done)},
			want: []string{"turn 1 was already closed by #2"}},
		{name: "event after close of its turn", steps: []step{ev(0, started), starting(1), ev(1, done), ev(1, text)},
			want: []string{"already closed"}},
		{name: "stale turn", steps: []step{ev(0, started), starting(1), starting(2), ev(1, text)},
			want: []string{"turn 1 is not the running turn (2)"}},
		{name: "fatal at turn 0 while a turn runs", steps: []step{ev(0, started), starting(1), ev(0, fatal)},
			want: []string{"must carry that turn's number"}},
		{name: "fatal at turn 0 when idle", steps: []step{ev(0, started), starting(1), ev(1, done), ev(0, fatal)}},
		{name: "after death", steps: []step{ev(0, started), starting(1), ev(1, fatal), ev(0, warning), ev(0, messages.Event{Type: messages.EvError, Text: "x"})},
			want: []string{"after the session ended at event #2"}},
		{name: "turn end without state", steps: []step{ev(0, started), starting(1), ev(1, messages.Event{Type: messages.EvTurnEnd})},
			want: []string{"invalid State"}},
		{name: "result before use", steps: []step{ev(0, started), starting(1), ev(1, result1)},
			want: []string{"which no earlier EvToolUse announced"}},
		{name: "two results", steps: []step{ev(0, started), starting(1), ev(1, use1), ev(1, result1), ev(1, result1)},
			want: []string{"a second EvToolResult"}},
		{name: "tool use id reused", steps: []step{ev(0, started), starting(1), ev(1, use1), ev(1, use1)},
			want: []string{"used twice"}},
		{name: "truncated without original", steps: []step{ev(0, started), starting(1), ev(1, use1),
			ev(1, messages.Event{Type: messages.EvToolResult, ToolUseID: "u1", Truncated: true})},
			want: []string{"Truncated=true with OriginalBytes=0"}},
		{name: "over the cap", cap: 4, steps: []step{ev(0, started), starting(1), ev(1, use1),
			ev(1, messages.Event{Type: messages.EvToolResult, ToolUseID: "u1", Output: "12345"})},
			want: []string{"over the 4-byte cap is not Truncated"}},
		{name: "cut within the cap", cap: 4, steps: []step{ev(0, started), starting(1), ev(1, use1),
			ev(1, messages.Event{Type: messages.EvToolResult, ToolUseID: "u1", Output: "12", Truncated: true, OriginalBytes: 3})},
			want: []string{"within the cap"}},
		{name: "clarification with decision", steps: []step{ev(0, started), starting(1),
			ev(1, messages.Event{Type: messages.EvClarification, ClarificationID: "c", ToolName: "Write", Decision: messages.DecisionDeny})},
			want: []string{"the runtime annotates the decision"}},
		{name: "clarification without id", steps: []step{ev(0, started), starting(1),
			ev(1, messages.Event{Type: messages.EvClarification, ToolName: "Write"})},
			want: []string{"needs a ClarificationID"}},
		{name: "after close returned", steps: []step{ev(0, started), {closed: true}, ev(0, warning)},
			want: []string{"arrived after Close returned"}},
		{name: "event of a refused turn", steps: []step{ev(0, started), starting(1), {refuse: 1}, ev(1, text)},
			want: []string{"StartTurn(1) failed"}},
		{name: "never closed", end: true, steps: []step{ev(0, started), starting(1), ev(1, text)},
			want: []string{"turn 1 was started and never closed"}},
		{name: "superseded", end: true, steps: []step{ev(0, started), starting(1), starting(2), ev(2, done), {closed: true}},
			want: []string{"turn 1 was started and never closed"}},
		{name: "cut short by Close", end: true, steps: []step{ev(0, started), starting(1), ev(1, text), {closing: true}, {closed: true}}},
		{name: "refused turn need not close", end: true, steps: []step{ev(0, started), starting(1), {refuse: 1}}},
		{name: "closed by a fatal error", end: true, steps: []step{ev(0, started), starting(1), ev(1, fatal), {closed: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRecorder()
			r.Faulty, r.OutputCap = tt.faulty, tt.cap
			play(r, tt.steps)
			got := r.Violations()
			if tt.end {
				got = r.Check()
			}
			require.Len(t, got, len(tt.want), "violations: %q\n%s", got, r.Transcript())
			for i, w := range tt.want {
				assert.Contains(t, got[i], w)
			}
		})
	}
}

func TestRecorderWait(t *testing.T) {
	r := NewRecorder()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.Sink(0, started)
		r.TurnStarting(1)
		r.Sink(1, text)
		r.Sink(1, done)
	}()
	recs, ok := r.Wait(time.Minute, func(recs []Record) bool { return closingIn(turnEvents(recs, 1)) != nil })
	wg.Wait()
	require.True(t, ok)
	require.Len(t, recs, 3)
	assert.Equal(t, "#3 turn 1: turn_end completed \"\"", recs[2].String())

	_, ok = r.Wait(time.Millisecond, func([]Record) bool { return false })
	assert.False(t, ok, "a predicate that never holds times out")
}

func TestSawInEvents(t *testing.T) {
	recs := []Record{
		{Turn: 1, Event: messages.Event{Type: messages.EvText, Text: "[steer] go left"}},
		{Turn: 1, Event: messages.Event{Type: messages.EvToolResult, Output: "denied: no way"}},
		{Turn: 1, Event: messages.Event{Type: messages.EvToolUse, Input: []byte(`{"secret":"input"}`)}},
	}
	assert.True(t, SawInEvents(recs, "go left"))
	assert.True(t, SawInEvents(recs, "no way"))
	assert.False(t, SawInEvents(recs, "secret"), "what the agent sent is not what it was shown")
}

func TestCasesAreWellFormed(t *testing.T) {
	seen := map[string]bool{}
	inputs := map[string]bool{}
	for _, c := range Cases() {
		assert.False(t, seen[c.Name], "duplicate case %q", c.Name)
		seen[c.Name] = true
		assert.NotNil(t, checks[c.Name], "case %q has no check", c.Name)
		assert.NotEmpty(t, c.Doc, c.Name)
		assert.True(t, c.Posture.Valid(), c.Name)
		assert.True(t, c.Fault.Valid(), "case %q: fault %v", c.Name, c.Fault)
		require.NotEmpty(t, c.Turns, c.Name)
		for i, tn := range c.Turns {
			assert.Equal(t, i+1, tn.Number, c.Name)
			assert.False(t, inputs[tn.Input], "input %q is not unique", tn.Input)
			inputs[tn.Input] = true
			for j, other := range c.Turns {
				if j != i {
					assert.NotContains(t, other.Input, tn.Input, "a harness may match inputs by substring")
				}
			}
			for _, a := range tn.Actions {
				assert.True(t, a.Kind.Valid(), "case %q: action %v", c.Name, a.Kind)
			}
		}
	}
	assert.Len(t, checks, len(seen), "every check has a case")
	assert.Equal(t, "invalid", ActionKind(0).String())
	assert.Equal(t, "invalid", Fault(0).String())
	assert.False(t, Fault(0).Valid())
	for _, s := range []string{ActReply.String(), ActWrite.String(), ActSlow.String(), ActBigOutput.String(),
		FaultNone.String(), FaultBinaryMissing.String(), FaultImmediateExit.String(), FaultGarbageStdout.String(), FaultLongLine.String()} {
		assert.NotEqual(t, "invalid", s)
		assert.False(t, strings.Contains(s, " "))
	}
}
