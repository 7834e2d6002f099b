package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// The session's reported cost reaching maxCostUsd ends it cleanly: the turn
// that crossed it reads as max_budget with the session's total, no further
// turn starts, and the inferred verdict is judged on the work as for
// max_rounds (never a failure for the budget itself).
func TestMaxBudgetStopsCleanly(t *testing.T) {
	h := newHarness(t, func(s *Spec) { s.MaxCostUSD = 1.0 })
	h.startTurn1()
	h.agent(1, messages.Event{Type: messages.EvTurnEnd, State: messages.TurnCompleted, Text: "one", TotalCostUSD: 0.6})
	h.c.DiffReady(h.tick(), 1, nil)
	h.persistAll()
	r := h.readNow(1, false)
	assert.Equal(t, messages.KindTurnComplete, r.Result.Kind, "under the budget the turn is an ordinary one")
	assert.InDelta(t, 1.0, h.c.Record().MaxCostUSD, 1e-9, "the budget is on the record")

	require.NoError(t, h.c.Guide(h.tick(), messages.Guide{Text: "two"}))
	h.c.BaselineReady(h.tick(), 2)
	h.agent(2, messages.Event{Type: messages.EvTurnEnd, State: messages.TurnCompleted, Text: "two done", TotalCostUSD: 1.2})
	h.c.DiffReady(h.tick(), 2, sampleDiff())
	h.persistAll()
	r = h.readNow(2, false)
	require.NoError(t, r.Result.Validate())
	assert.Equal(t, messages.KindMaxBudget, r.Result.Kind)
	assert.True(t, r.Result.OK)
	assert.Equal(t, 2, r.Result.Rounds)
	assert.InDelta(t, 1.2, r.Result.CostUSD, 1e-9, "max_budget carries the session's total")
	assert.Equal(t, "two done", r.Result.Text)

	requireCode(t, h.c.ReadTurn(3, false), messages.CodeNotLive)
	err := h.c.Guide(h.tick(), messages.Guide{Text: "three"})
	requireCode(t, err, messages.CodeConflict)
	assert.Contains(t, err.Error(), "maxCostUsd")
	assert.Equal(t, messages.OutcomeSuccess, h.c.BeginRelease(h.tick(), messages.ReleaseExplicit, "", "", ""),
		"max_budget is a clean stop: the turn's diff decides the verdict")
}

// A backend that reports no cost never stops on the budget.
func TestMaxBudgetIgnoresUnreportedCost(t *testing.T) {
	h := newHarness(t, func(s *Spec) { s.MaxCostUSD = 0.01 })
	h.startTurn1()
	h.agent(1, messages.Event{Type: messages.EvTurnEnd, State: messages.TurnCompleted, Text: "one"})
	h.c.DiffReady(h.tick(), 1, nil)
	h.persistAll()
	assert.Equal(t, messages.KindTurnComplete, h.readNow(1, false).Result.Kind)
	require.NoError(t, h.c.Guide(h.tick(), messages.Guide{Text: "two"}))
}

func TestMaxBudgetValidation(t *testing.T) {
	for _, v := range []float64{-1} {
		requireCode(t, (&messages.Start{Brief: "x", MaxCostUSD: v}).Validate(), messages.CodeInvalid)
		requireCode(t, (&messages.ScopeConstraints{MaxCostUSD: v}).Validate(), messages.CodeInvalid)
	}
	require.NoError(t, (&messages.Start{Brief: "x", MaxCostUSD: 2.5}).Validate())
	require.Error(t, (&messages.TurnResult{Kind: messages.KindMaxBudget, Rounds: 1}).Validate(), "max_budget needs the cost")
}
