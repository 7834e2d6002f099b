package actors

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// fakeTransport is a descriptor-only backend for the rule table.
type fakeTransport struct{ d messages.Descriptor }

func (f fakeTransport) Descriptor() messages.Descriptor { return f.d }
func (f fakeTransport) Probe(context.Context) messages.Availability {
	return messages.Availability{Available: true}
}
func (f fakeTransport) Open(context.Context, transports.SessionSpec, transports.Sink) (transports.Session, error) {
	return nil, messages.Errorf(messages.CodeUnsupported, "open", "descriptor-only fake")
}

func ruleBackends() *transports.Registry {
	pm := map[messages.Posture]string{messages.PosturePlan: "plan", messages.PostureDefault: "default",
		messages.PostureAcceptEdits: "acceptEdits", messages.PostureFull: "bypass"}
	return transports.NewRegistry(
		fakeTransport{messages.Descriptor{ID: "gated", HonorsAllowed: true, EffortSupport: messages.EffortAtStart, PostureMap: pm,
			ModelClassMap: map[string]string{"cheap": "model-small", "frontier": "model-big", "standard": ""}}},
		fakeTransport{messages.Descriptor{ID: "sandboxed", HonorsAllowed: false, EffortSupport: messages.EffortNone, PostureMap: pm}},
	)
}

func TestResolveStartRules(t *testing.T) {
	cfg := config.Default()
	cfg.DefaultBackend = "gated"
	cfg.DefaultMaxRounds = 20
	type want struct {
		code       messages.Code
		field      string
		backend    string
		maxPosture messages.Posture
		posture    messages.Posture
		maxRounds  int
		tools      []string
		model      string
	}
	cases := []struct {
		name string
		op   messages.Start
		cons messages.ScopeConstraints
		want want
	}{
		{"defaults", messages.Start{}, messages.ScopeConstraints{},
			want{backend: "gated", maxPosture: messages.PostureAcceptEdits, posture: messages.PostureDefault, maxRounds: 20}},
		{"explicit maxPosture above ceiling rejected", messages.Start{MaxPosture: messages.PostureFull}, messages.ScopeConstraints{MaxPosture: messages.PostureDefault},
			want{code: messages.CodeCeilingExceeded, field: "maxPosture"}},
		{"explicit maxPosture at ceiling ok", messages.Start{MaxPosture: messages.PostureDefault}, messages.ScopeConstraints{MaxPosture: messages.PostureDefault},
			want{backend: "gated", maxPosture: messages.PostureDefault, posture: messages.PostureDefault, maxRounds: 20}},
		{"omitted maxPosture clamped to ceiling", messages.Start{}, messages.ScopeConstraints{MaxPosture: messages.PosturePlan},
			want{backend: "gated", maxPosture: messages.PosturePlan, posture: messages.PosturePlan, maxRounds: 20}},
		{"initial posture above max rejected", messages.Start{MaxPosture: messages.PosturePlan, InitialPosture: messages.PostureFull}, messages.ScopeConstraints{},
			want{code: messages.CodeCeilingExceeded, field: "initialPosture"}},
		{"initial posture above a clamped max rejected", messages.Start{InitialPosture: messages.PostureAcceptEdits}, messages.ScopeConstraints{MaxPosture: messages.PostureDefault},
			want{code: messages.CodeCeilingExceeded, field: "initialPosture"}},
		{"backend contradicting pin rejected", messages.Start{Backend: "sandboxed"}, messages.ScopeConstraints{Backend: "gated"},
			want{code: messages.CodeInvalid, field: "backend"}},
		{"omitted backend resolves to pin", messages.Start{}, messages.ScopeConstraints{Backend: "sandboxed"},
			want{backend: "sandboxed", maxPosture: messages.PostureAcceptEdits, posture: messages.PostureDefault, maxRounds: 20}},
		{"unknown backend", messages.Start{Backend: "nope"}, messages.ScopeConstraints{},
			want{code: messages.CodeNotFound}},
		{"maxRounds clamped to scope budget", messages.Start{MaxRounds: 50}, messages.ScopeConstraints{MaxRounds: 5},
			want{backend: "gated", maxPosture: messages.PostureAcceptEdits, posture: messages.PostureDefault, maxRounds: 5}},
		{"maxRounds below budget kept", messages.Start{MaxRounds: 3}, messages.ScopeConstraints{MaxRounds: 5},
			want{backend: "gated", maxPosture: messages.PostureAcceptEdits, posture: messages.PostureDefault, maxRounds: 3}},
		{"omitted maxRounds clamped too", messages.Start{}, messages.ScopeConstraints{MaxRounds: 4},
			want{backend: "gated", maxPosture: messages.PostureAcceptEdits, posture: messages.PostureDefault, maxRounds: 4}},
		{"omitted tools take the scope list", messages.Start{}, messages.ScopeConstraints{AllowedTools: []string{"Read", "Grep"}},
			want{backend: "gated", maxPosture: messages.PostureAcceptEdits, posture: messages.PostureDefault, maxRounds: 20, tools: []string{"Read", "Grep"}}},
		{"explicit tools intersected", messages.Start{AllowedTools: []string{"Bash", "Read", "Write"}}, messages.ScopeConstraints{AllowedTools: []string{"Read", "Write", "Grep"}},
			want{backend: "gated", maxPosture: messages.PostureAcceptEdits, posture: messages.PostureDefault, maxRounds: 20, tools: []string{"Read", "Write"}}},
		{"empty intersection rejected", messages.Start{AllowedTools: []string{"Bash"}}, messages.ScopeConstraints{AllowedTools: []string{"Read"}},
			want{code: messages.CodeInvalid, field: "allowedTools"}},
		{"explicit tools for a backend that cannot honour them rejected", messages.Start{Backend: "sandboxed", AllowedTools: []string{"Read"}}, messages.ScopeConstraints{},
			want{code: messages.CodeUnsupported, field: "allowedTools"}},
		{"explicit tools without scope list kept", messages.Start{AllowedTools: []string{"Read"}}, messages.ScopeConstraints{},
			want{backend: "gated", maxPosture: messages.PostureAcceptEdits, posture: messages.PostureDefault, maxRounds: 20, tools: []string{"Read"}}},
		{"effort on a backend without effort rejected", messages.Start{Backend: "sandboxed", Effort: messages.EffortHigh}, messages.ScopeConstraints{},
			want{code: messages.CodeUnsupported, field: "effort"}},
		{"model class resolves", messages.Start{Model: "cheap"}, messages.ScopeConstraints{},
			want{backend: "gated", maxPosture: messages.PostureAcceptEdits, posture: messages.PostureDefault, maxRounds: 20, model: "model-small"}},
		{"model class without mapping lets the backend pick", messages.Start{Model: "standard"}, messages.ScopeConstraints{},
			want{backend: "gated", maxPosture: messages.PostureAcceptEdits, posture: messages.PostureDefault, maxRounds: 20, model: ""}},
		{"concrete model passes through", messages.Start{Model: "m-1"}, messages.ScopeConstraints{},
			want{backend: "gated", maxPosture: messages.PostureAcceptEdits, posture: messages.PostureDefault, maxRounds: 20, model: "m-1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.op.Brief = "b"
			spec, _, err := resolveStart(c.op, c.cons, &cfg, ruleBackends())
			if c.want.code != "" {
				require.Error(t, err)
				var e *messages.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, c.want.code, e.Code, e.Error())
				if c.want.field != "" {
					assert.Equal(t, c.want.field, e.Field)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want.backend, spec.Descriptor.ID)
			assert.Equal(t, c.want.maxPosture, spec.MaxPosture)
			assert.Equal(t, c.want.posture, spec.Posture)
			assert.Equal(t, c.want.maxRounds, spec.MaxRounds)
			assert.Equal(t, c.want.tools, spec.AllowedTools)
			assert.Equal(t, c.want.model, spec.Model)
		})
	}
}

// TestScopeConstraintsThroughRuntime checks the rules are enforced by the
// registry on real starts, and that ReleaseScope sweeps and clears them.
func TestScopeConstraintsThroughRuntime(t *testing.T) {
	rt := newRuntime(t, testConfig(t), nil)
	ctx := ctxT(t)
	const scope = "persona-7"
	require.NoError(t, rt.SetScopeConstraints(ctx, scope, messages.ScopeConstraints{MaxPosture: messages.PostureDefault, MaxRounds: 2}))
	_, err := rt.Start(ctx, scope, messages.Start{Brief: "x", Cwd: t.TempDir(), MaxPosture: messages.PostureFull})
	assert.Equal(t, messages.CodeCeilingExceeded, messages.ErrorCode(err))
	st, err := rt.Start(ctx, scope, messages.Start{Brief: "x", Cwd: t.TempDir()})
	require.NoError(t, err)
	assert.Equal(t, messages.PostureDefault, st.MaxPosture)
	assert.Equal(t, 2, st.MaxRounds)
	_, err = rt.SetPosture(ctx, scope, messages.SetPosture{SessionID: st.SessionID, Posture: messages.PostureAcceptEdits})
	assert.Equal(t, messages.CodeCeilingExceeded, messages.ErrorCode(err))
	// another scope is unconstrained and cannot see the first scope's session
	other, err := rt.Start(ctx, "owner", messages.Start{Brief: "x", Cwd: t.TempDir(), MaxPosture: messages.PostureFull})
	require.NoError(t, err)
	_, err = rt.ReadTurn(ctx, "owner", messages.ReadTurn{SessionID: st.SessionID})
	assert.Equal(t, messages.CodeNotFound, messages.ErrorCode(err))

	n, err := rt.ReleaseScope(ctx, scope)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	rec, err := rt.Store().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusEnded, rec.Status)
	evs, err := rt.Store().ReadEvents(ctx, st.SessionID, 0, 0)
	require.NoError(t, err)
	last := evs[len(evs)-1].Event
	assert.Equal(t, messages.EvReleased, last.Type)
	assert.Equal(t, messages.ReleaseSweep, last.ReleaseReason)
	// constraints were cleared with the sweep
	st2, err := rt.Start(ctx, scope, messages.Start{Brief: "x", Cwd: t.TempDir(), MaxPosture: messages.PostureFull})
	require.NoError(t, err)
	assert.Equal(t, messages.PostureFull, st2.MaxPosture)
	// the other scope's session is untouched
	live, err := rt.LiveSessions(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{other.SessionID, st2.SessionID}, live)
}

// TestReleasedAnswersAreBounded: the registry remembers released sessions
// for quick answers, but only the newest maxRemembered; older ones fall back
// to the store (TestEndToEndWithScriptBackend covers that path).
func TestReleasedAnswersAreBounded(t *testing.T) {
	r := &registry{released: map[string]releasedEntry{}}
	var first, last string
	for i := 0; i < maxRemembered+5; i++ {
		sid := messages.NewSessionID()
		if i == 0 {
			first = sid
		}
		last = sid
		r.remember(sid, releasedEntry{scope: "s"})
	}
	assert.Len(t, r.released, maxRemembered)
	assert.NotContains(t, r.released, first)
	assert.Contains(t, r.released, last)
}
