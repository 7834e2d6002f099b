package curation

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/codex"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// TestLiveCodexSeesAProvisionedSkillNatively runs the real codex CLI
// (CODESESSION_CODEX_BIN) with the pipeline's codex plan: the provisioned
// skill, linked into the session's $CODEX_HOME/skills, is among the
// skills codex tells the model about.
func TestLiveCodexSeesAProvisionedSkillNatively(t *testing.T) {
	bin := subprocesstest.Find(t, codex.EnvBinary, "npm install @openai/codex@"+codex.PinnedVersion, "codex")
	res, repo := probePlan(t, buildProbe(t), codex.ID)
	require.NotNil(t, res.Plan)
	require.NotEmpty(t, res.Plan.SkillsDir)
	mock, err := modelmock.Start(t, nil)
	require.NoError(t, err)
	tr := codex.New(codex.WithBinary(bin))
	spec := transports.SessionSpec{SessionID: "cs_live2", Cwd: repo, Model: "gpt-5.5", Posture: messages.PostureDefault,
		Provision: res.Plan, Env: []string{codex.EnvBaseURL + "=" + mock.URL() + "/v1", codex.EnvAPIKey + "=sk-mock"}}.WithProvision()
	var mu sync.Mutex
	ended := make(chan messages.Event, 1)
	sink := func(turn int, ev messages.Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Type == messages.EvTurnEnd || ev.Type == messages.EvEnded || ev.Type == messages.EvError {
			select {
			case ended <- ev:
			default:
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := tr.Open(ctx, spec, sink)
	require.NoError(t, err)
	defer func() { _ = s.Close(context.Background()) }()
	require.NoError(t, s.StartTurn(ctx, 1, "hello"))
	select {
	case ev := <-ended:
		require.Equal(t, messages.EvTurnEnd, ev.Type, "%+v", ev)
	case <-ctx.Done():
		t.Fatal("the turn did not end")
	}
	reqs := mock.MainRequests()
	require.NotEmpty(t, reqs)
	require.Contains(t, string(reqs[0].Body), "probe-skill", "codex lists the provisioned skill")
	require.Contains(t, string(reqs[0].Body), "Knows the probe project", "with its description")
	require.False(t, strings.Contains(string(reqs[0].Body), "Skills for this project are in"), "natively, not through an instruction")
}
