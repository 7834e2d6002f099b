package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

func TestTurnBookkeeping(t *testing.T) {
	var tr Turn
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(tr.Begin(0)))
	assert.False(t, tr.Interrupt(), "no turn runs")
	require.NoError(t, tr.Begin(3))
	assert.Equal(t, 3, tr.EvTurn())
	assert.Equal(t, messages.CodeConflict, messages.ErrorCode(tr.Begin(4)))
	assert.True(t, tr.Interrupt())
	assert.False(t, tr.Interrupt(), "already interrupting")
	var e Effects
	tr.End(&e)
	assert.True(t, e.Closed)
	assert.False(t, tr.Running || tr.Interrupting)
	assert.Equal(t, 0, tr.EvTurn(), "between turns events are the session's")
}

func TestTurnExit(t *testing.T) {
	ended := 0
	end := func(e *Effects) { ended++; e.Closed = true }
	interrupted := messages.Event{Type: messages.EvTurnEnd, State: messages.TurnInterrupted}

	tr := Turn{Number: 2, Running: true, Interrupting: true}
	var e Effects
	tr.Exit(&e, "x", ExitInterrupt, "signal: killed", "", "", interrupted, end)
	assert.Equal(t, []TurnEvent{{2, interrupted}}, e.Events)
	assert.True(t, tr.Dead)
	assert.False(t, tr.Fatal, "an interrupt's kill is no death of the session")

	tr = Turn{Number: 5, Running: true}
	e = Effects{}
	tr.Exit(&e, "x", ExitOwn, "exit status 1", "boom", "", interrupted, end)
	require.Len(t, e.Events, 1)
	assert.Equal(t, messages.Event{Type: messages.EvError, Fatal: true, Text: "x exited mid-turn (exit status 1): boom"}, e.Events[0].Ev)
	assert.True(t, tr.Fatal)

	tr = Turn{Number: 5}
	e = Effects{}
	tr.Exit(&e, "x", ExitOwn, "exit status 0", "", " with y", interrupted, end)
	assert.Equal(t, []TurnEvent{{0, messages.Event{Type: messages.EvWarning,
		Text: "x exited between turns (exit status 0); the next turn starts it again with y"}}}, e.Events)
	assert.False(t, tr.Fatal)
	assert.Equal(t, 2, ended, "the core's turn is closed only when one ran")
}

func TestAsked(t *testing.T) {
	var a Asked[string]
	_, err := a.Take("q1", messages.DecisionAllowOnce, "")
	assert.Equal(t, messages.CodeNotFound, messages.ErrorCode(err))
	a.Ask("q1", "first")
	_, err = a.Take("q1", messages.Decision("maybe"), "")
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
	q, err := a.Take("q1", messages.DecisionDeny, "")
	require.NoError(t, err)
	assert.Equal(t, "first", q)
	_, err = a.Take("q1", messages.DecisionDeny, "answered")
	assert.Equal(t, messages.CodeConflict, messages.ErrorCode(err))
	assert.Contains(t, err.Error(), "answered")
	a.Ask("q2", "second")
	a.Clear()
	_, err = a.Take("q2", messages.DecisionDeny, "its turn ended")
	assert.Equal(t, messages.CodeConflict, messages.ErrorCode(err), "cleared at the turn's end, still known")
	_, ok := a.Withdraw("q2")
	assert.False(t, ok)
}

func TestExitKindString(t *testing.T) {
	assert.Equal(t, "invalid", ExitKind(0).String())
	assert.Equal(t, "own", ExitOwn.String())
	assert.Equal(t, "interrupt", ExitInterrupt.String())
}

func TestAskedPending(t *testing.T) {
	var a Asked[int]
	assert.Empty(t, a.Pending())
	a.Ask("b", 2)
	a.Ask("a", 1)
	assert.Equal(t, []string{"a", "b"}, a.Pending(), "sorted")
	_, err := a.Take("a", messages.DecisionAllowOnce, "answered")
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, a.Pending())
	a.Clear()
	assert.Empty(t, a.Pending())
}
