package learning

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/codesession/codesession/messages"
)

func TestInfer(t *testing.T) {
	changed := Work{ChangedFiles: 2, Captured: 1, Answered: true}
	done := func(w Work) Facts {
		return Facts{LastKind: messages.KindTurnComplete, LastState: messages.TurnCompleted, CompletedTurns: 2, Work: w}
	}
	cases := []struct {
		name   string
		f      Facts
		want   messages.Outcome
		reason string
	}{
		{"completed with changes", done(changed), messages.OutcomeSuccess, "2 file(s) changed"},
		{"no diff captured but edits applied", done(Work{EditsApplied: 1}), messages.OutcomeSuccess, "applied edit"},
		{"captured diffs outrank claimed edits", done(Work{EditsApplied: 1, Captured: 2}), messages.OutcomeFailed, "no file changed"},
		{"every write denied", done(Work{Denied: 2, Captured: 1, Answered: true}), messages.OutcomeFailed, "denied or refused"},
		{"every write refused", done(Work{EditsRefused: 1, Answered: true}), messages.OutcomeFailed, "denied or refused"},
		{"empty diff on a change brief", done(Work{Captured: 1, Answered: true}), messages.OutcomeFailed, "no file changed"},
		{"read-only brief answered", Facts{ReadOnly: true, LastKind: messages.KindTurnComplete, CompletedTurns: 1, Work: Work{Answered: true}}, messages.OutcomeSuccess, ""},
		{"read-only brief unanswered", Facts{ReadOnly: true, LastKind: messages.KindTurnComplete, CompletedTurns: 1}, messages.OutcomeFailed, "no answer"},
		{"max rounds, guidance unsent", Facts{Capped: true, LastKind: messages.KindMaxRounds, CompletedTurns: 3, Work: Work{ChangedFiles: 1, Captured: 1, GuidanceUnsent: 1}}, messages.OutcomeFailed, "unsent"},
		{"max rounds, nothing changed", Facts{LastKind: messages.KindMaxRounds, CompletedTurns: 3, Work: Work{Captured: 3}}, messages.OutcomeFailed, "maxRounds"},
		{"max rounds with changes and nothing left", Facts{Capped: true, LastKind: messages.KindMaxRounds, CompletedTurns: 3, Work: changed}, messages.OutcomeSuccess, ""},
		{"agent ended with changes", Facts{LastKind: messages.KindEnded, CompletedTurns: 1, Work: changed}, messages.OutcomeSuccess, ""},
		{"last turn errored", Facts{LastKind: messages.KindError, CompletedTurns: 2, Work: changed}, messages.OutcomeFailed, "error"},
		{"supervision gave up", Facts{Failed: true, CompletedTurns: 5, Work: changed}, messages.OutcomeFailed, "supervision"},
		{"stopped mid-turn", Facts{TurnRunning: true, CompletedTurns: 1, LastKind: messages.KindTurnComplete, Work: changed}, messages.OutcomeAborted, "running"},
		{"never finished a turn", Facts{}, messages.OutcomeAborted, "no turn"},
		{"interrupted last", Facts{LastKind: messages.KindTurnComplete, LastState: messages.TurnInterrupted, CompletedTurns: 1, Work: changed}, messages.OutcomeAborted, "interrupted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Infer(c.f)
			assert.Equal(t, c.want, got.Outcome)
			assert.Contains(t, got.Reason, c.reason)
			if got.Outcome != messages.OutcomeSuccess {
				assert.NotEmpty(t, got.Reason, "a verdict other than success says why")
			}
			assert.NotEqual(t, messages.OutcomePartial, got.Outcome, "inference never yields partial")
			assert.Equal(t, got.Outcome, InferOutcome(c.f))
		})
	}
}

func TestReadOnlyBrief(t *testing.T) {
	for _, c := range []struct {
		brief string
		max   messages.Posture
		tags  []string
		want  bool
	}{
		{"explain how the cache works", messages.PostureAcceptEdits, nil, true},
		{"What does main.go do?", messages.PostureAcceptEdits, nil, true},
		{"fix the failing test", messages.PostureAcceptEdits, nil, false},
		{"explain and then fix the bug", messages.PostureAcceptEdits, nil, false},
		{"do the thing", messages.PostureAcceptEdits, nil, false},
		{"fix the failing test", messages.PosturePlan, nil, true},
		{"look at the repo", messages.PostureAcceptEdits, []string{"Review"}, true},
	} {
		assert.Equal(t, c.want, ReadOnlyBrief(c.brief, c.max, c.tags), c.brief)
	}
}

func ev(t messages.EventType) messages.Event { return messages.Event{Type: t} }

func TestTallyFoldsEvents(t *testing.T) {
	ta := NewTally([]string{"Write", "Edit"}, messages.PostureDefault)
	for _, e := range []messages.Event{
		{Type: messages.EvStarted, Model: "claude-haiku-4-5"},
		ev(messages.EvTurnStarted),
		{Type: messages.EvText, Text: "working"},
		{Type: messages.EvToolUse, ToolUseID: "1", ToolName: "Write"},
		{Type: messages.EvClarification, ClarificationID: "c1", ToolName: "Write"},
		{Type: messages.EvClarification, ClarificationID: "c1", Decision: messages.DecisionDeny},
		{Type: messages.EvToolResult, ToolUseID: "1", IsError: true},
		{Type: messages.EvToolUse, ToolUseID: "2", ToolName: "Read"},
		{Type: messages.EvToolResult, ToolUseID: "2", IsError: true},
		{Type: messages.EvTurnEnd, State: messages.TurnCompleted, TotalCostUSD: 0.5},
		{Type: messages.EvTurnDiff, Diff: &messages.TurnDiff{Source: messages.DiffGit, Files: []messages.FileChange{}}},
		{Type: messages.EvGuidance, Source: messages.SourceUser, Mode: messages.GuideQueue, Text: "try again"},
		{Type: messages.EvPosture, Posture: messages.PostureAcceptEdits},
		{Type: messages.EvPosture, Posture: messages.PosturePlan},
		ev(messages.EvTurnStarted),
		{Type: messages.EvToolUse, ToolUseID: "3", ToolName: "Edit"},
		{Type: messages.EvToolResult, ToolUseID: "3"},
		{Type: messages.EvTurnEnd, State: messages.TurnCompleted, TotalCostUSD: 0.75},
		{Type: messages.EvTurnDiff, Diff: &messages.TurnDiff{Source: messages.DiffGit, Files: []messages.FileChange{{Path: "a"}}, FilesOmitted: 2}},
		ev(messages.EvInterrupt),
		{Type: messages.EvGuidance, Source: messages.SourceDriver, Mode: messages.GuideQueue, Text: "one more"},
	} {
		ta.Observe(e)
	}
	assert.Equal(t, Work{ChangedFiles: 3, Captured: 2, EditsApplied: 1, EditsRefused: 1, Denied: 1, Answered: true}, ta.Work)
	assert.Equal(t, Interventions{UserGuidance: 1, Clarifications: 1, Escalations: 1, Interrupts: 1}, ta.Interventions)
	assert.Equal(t, 4, ta.Interventions.Total())
	assert.Equal(t, "claude-haiku-4-5", ta.Model)
	assert.InDelta(t, 0.75, ta.CostUSD, 1e-9, "cumulative totals become deltas")
	assert.Equal(t, 2, ta.CompletedTurns)
	assert.Equal(t, 1, ta.GuidanceUnsent())
	f := ta.Facts(false, true, false)
	assert.Equal(t, messages.KindMaxRounds, f.LastKind, "a capped last turn is max_rounds")
	assert.Equal(t, messages.OutcomeFailed, InferOutcome(f), "capped with guidance unsent")
	assert.Equal(t, messages.OutcomeSuccess, InferOutcome(ta.Facts(false, false, false)))
}

func TestTallyTurnKinds(t *testing.T) {
	ta := NewTally(nil, "")
	ta.Observe(ev(messages.EvTurnStarted))
	ta.Observe(messages.Event{Type: messages.EvError, Text: "backend exited", Fatal: true})
	ta.Observe(messages.Event{Type: messages.EvTurnDiff})
	assert.Equal(t, messages.KindError, ta.LastKind)
	assert.Equal(t, 0, ta.CompletedTurns)
	ta.Observe(ev(messages.EvTurnStarted))
	assert.True(t, ta.TurnOpen())
	ta.Observe(messages.Event{Type: messages.EvEnded, Text: "bye"})
	ta.Observe(messages.Event{Type: messages.EvTurnDiff})
	assert.Equal(t, messages.KindEnded, ta.LastKind)
	assert.True(t, ta.Work.Answered)
	ta.Observe(messages.Event{Type: messages.EvPosture, Posture: messages.PosturePlan})
	assert.Equal(t, 1, ta.Interventions.Escalations, "unknown initial posture: the first change counts")
	ta.Observe(messages.Event{Type: messages.EvReleased, Outcome: messages.OutcomeFailed})
	if assert.NotNil(t, ta.Released) {
		assert.Equal(t, messages.OutcomeFailed, ta.Released.Outcome)
	}
}

// TestBriefReadOnlyOnRealBriefs: briefs from the README, the demo, the
// tests and users' first sessions. A chat or question brief answered
// without a change is a success; a brief that asks for work and changes
// nothing stays a failure.
func TestBriefReadOnlyOnRealBriefs(t *testing.T) {
	for _, c := range []struct {
		brief    string
		readOnly bool
	}{
		{"hello", true},
		{"say hello", true},
		{"hi there, are you working?", true},
		{"What does this repository do?", true},
		{"summarise README.md in three lines", true},
		{"go vet the repo and tell me what is wrong", true},
		{"look at the repo", true},
		{"TOOL:WRITE /tmp/x/hello.txt hello", false},
		{"TOOL:PATCH hello.txt hello", false},
		{"write hello", false},
		{"fix the typo in hello.go", false},
		{"Add a greeting function and a test for it", false},
		{"make the tests pass", false},
		{"do it", false},
		{"do the thing", false},
		{"build it", false},
		{"please finish the task", false},
		{"check the workspace and continue the task", false},
		{"the greeting should say hello, world", false},
		{"resolve the merge conflict", false},
	} {
		got, why := BriefReadOnly(c.brief, messages.PostureAcceptEdits, nil)
		assert.Equal(t, c.readOnly, got, c.brief)
		if got {
			assert.Equal(t, ReadOnlyByWording, why, c.brief)
		}
		// and the verdict when the agent answered and changed nothing
		v := Infer(Facts{ReadOnly: got, ReadOnlyWhy: why, LastKind: messages.KindTurnComplete, LastState: messages.TurnCompleted,
			CompletedTurns: 1, Work: Work{Captured: 1, Answered: true}})
		if c.readOnly {
			assert.Equal(t, messages.OutcomeSuccess, v.Outcome, c.brief)
			assert.Contains(t, v.Reason, "asks for no change", "the reason says how it was inferred: %s", c.brief)
		} else {
			assert.Equal(t, messages.OutcomeFailed, v.Outcome, c.brief)
			assert.Contains(t, v.Reason, "no file changed", c.brief)
		}
	}
}
