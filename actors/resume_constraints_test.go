package actors

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/script"
)

// startFullAndStop starts a session of scope at posture full (no scope
// constraints yet), with tools and no round budget, and stops it.
func startFullAndStop(t *testing.T, rt *Runtime, scope string) string {
	t.Helper()
	ctx := ctxT(t)
	st, err := rt.Start(ctx, scope, messages.Start{Brief: "the task", Cwd: t.TempDir(), MaxPosture: messages.PostureFull,
		InitialPosture: messages.PostureFull, AllowedTools: []string{"Read", "Edit", "Bash"}})
	require.NoError(t, err)
	readKind(t, rt, scope, st.SessionID)
	_, err = rt.Stop(ctx, scope, messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	return st.SessionID
}

// requireClamped checks that sid, resumed by scope under a plan ceiling,
// cannot go above plan, and that its record and log say so.
func requireClamped(t *testing.T, rt *Runtime, scope, sid string) {
	t.Helper()
	ctx := ctxT(t)
	_, err := rt.SetPosture(ctx, scope, messages.SetPosture{SessionID: sid, Posture: messages.PostureFull})
	require.Equal(t, messages.CodeCeilingExceeded, messages.ErrorCode(err), "full above the resuming scope's ceiling: %v", err)
	_, err = rt.SetPosture(ctx, scope, messages.SetPosture{SessionID: sid, Posture: messages.PostureAcceptEdits})
	require.Equal(t, messages.CodeCeilingExceeded, messages.ErrorCode(err), "%v", err)

	rec, err := rt.Store().GetMeta(ctx, sid)
	require.NoError(t, err)
	assert.Equal(t, messages.PosturePlan, rec.MaxPosture)
	assert.Equal(t, messages.PosturePlan, rec.Posture)
	assert.Equal(t, 5, rec.MaxRounds)
	assert.Equal(t, []string{"Read"}, rec.AllowedTools)

	evs, err := rt.Store().ReadEvents(ctx, sid, 0, 0)
	require.NoError(t, err)
	var warned bool
	for i, e := range evs {
		require.Equal(t, uint64(i+1), e.Seq)
		if e.Event.Type == messages.EvWarning && strings.Contains(e.Event.Text, "maxPosture full") && strings.Contains(e.Event.Text, "ceiling plan") {
			warned = true
		}
	}
	assert.True(t, warned, "a warning event says the record resumed clamped")
}

// Resume applies the resuming scope's constraints as start does: a scope
// capped at plan resumes an older full session clamped to plan, with a
// warning (on main it resumed at full and set posture full).
func TestResumeAppliesTheScopeCeiling(t *testing.T) {
	cfg := testConfig(t)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	rt := newRuntime(t, cfg, sc)
	ctx := ctxT(t)
	sid := startFullAndStop(t, rt, "owner")

	require.NoError(t, rt.SetScopeConstraints(ctx, "owner", messages.ScopeConstraints{MaxPosture: messages.PosturePlan, MaxRounds: 5,
		AllowedTools: []string{"Read", "Grep"}}))
	res, err := rt.Resume(ctx, "owner", messages.Resume{SessionID: sid})
	require.NoError(t, err)
	assert.Equal(t, sid, res.SessionID)
	requireClamped(t, rt, "owner", sid)
}

// Takeover too: another scope's session is driven under the taker's
// constraints, never at the owner's full posture.
func TestTakeoverAppliesTheTakersCeiling(t *testing.T) {
	cfg := testConfig(t)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	rt := newRuntime(t, cfg, sc)
	ctx := ctxT(t)
	sid := startFullAndStop(t, rt, "owner")

	require.NoError(t, rt.SetScopeConstraints(ctx, "operator", messages.ScopeConstraints{MaxPosture: messages.PosturePlan, MaxRounds: 5,
		AllowedTools: []string{"Read"}}))
	_, err := rt.Resume(ctx, "operator", messages.Resume{SessionID: sid, Takeover: true})
	require.NoError(t, err)
	requireClamped(t, rt, "operator", sid)

	// a scope pinned to another backend, or allowing none of its tools, is refused
	_, err = rt.Stop(ctx, "operator", messages.Stop{SessionID: sid})
	require.NoError(t, err)
	require.NoError(t, rt.SetScopeConstraints(ctx, "narrow", messages.ScopeConstraints{AllowedTools: []string{"WebFetch"}}))
	_, err = rt.Resume(ctx, "narrow", messages.Resume{SessionID: sid, Takeover: true})
	require.Equal(t, messages.CodeInvalid, messages.ErrorCode(err), "%v", err)
	require.NoError(t, rt.SetScopeConstraints(ctx, "pinned", messages.ScopeConstraints{Backend: "claude-code"}))
	_, err = rt.Resume(ctx, "pinned", messages.Resume{SessionID: sid, Takeover: true})
	require.Equal(t, messages.CodeInvalid, messages.ErrorCode(err), "%v", err)
}

// A resume that asks for a ceiling is held to the scope's as a start is:
// above it is ceiling_exceeded (not clamped in silence, nothing adopted);
// within it, the asked ceiling is the resumed run's.
func TestResumeAskingAboveTheCeilingIsRefused(t *testing.T) {
	cfg := testConfig(t)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	rt := newRuntime(t, cfg, sc)
	ctx := ctxT(t)
	sid := startFullAndStop(t, rt, "owner")
	require.NoError(t, rt.SetScopeConstraints(ctx, "owner", messages.ScopeConstraints{MaxPosture: messages.PostureAcceptEdits}))

	_, err := rt.Resume(ctx, "owner", messages.Resume{SessionID: sid, MaxPosture: messages.PostureFull})
	require.Equal(t, messages.CodeCeilingExceeded, messages.ErrorCode(err), "%v", err)
	rec, err := rt.Store().GetMeta(ctx, sid)
	require.NoError(t, err)
	assert.False(t, rec.Status.Live(), "a refused resume adopts nothing: %s", rec.Status)

	res, err := rt.Resume(ctx, "owner", messages.Resume{SessionID: sid, MaxPosture: messages.PostureDefault})
	require.NoError(t, err)
	assert.Equal(t, messages.PostureDefault, res.MaxPosture)
}
