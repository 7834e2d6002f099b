package curation

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/kilo"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/opencode"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// The ACP agents with a native skill location the session's own config can
// name (ACP's session/new has no skills field): opencode and kilo scan
// their config's skills.paths. Each runs for real against modelmock with the pipeline's
// plan, and its first model request describes the provisioned skill (its
// description, which only the skill's SKILL.md holds: the instruction
// that points at skills names them only), with no pointer instruction.

func mockProvider(mock *modelmock.Server) string {
	return `{"provider":{"mock":{"npm":"@ai-sdk/openai-compatible","name":"Loopback Mock",` +
		`"options":{"baseURL":"` + mock.URL() + `/v1","apiKey":"sk-mock"},` +
		`"models":{"mock-model":{"name":"Mock Model","tool_call":true,"limit":{"context":128000,"output":8192}}}}}}`
}

func TestLiveOpencodeSeesAProvisionedSkillNatively(t *testing.T) {
	bin := subprocesstest.Find(t, opencode.EnvBinary, opencode.Agent().Install, "opencode")
	liveACPSkill(t, opencode.ID, opencode.New(acp.WithBinary(bin)), func(mock *modelmock.Server) transports.SessionSpec {
		return transports.SessionSpec{Model: "mock/mock-model", Env: []string{opencode.EnvConfig + "=" + mockProvider(mock)}}
	})
}

func TestLiveKiloSeesAProvisionedSkillNatively(t *testing.T) {
	bin := subprocesstest.Find(t, kilo.EnvBinary, kilo.Agent().Install, "kilo")
	liveACPSkill(t, kilo.ID, kilo.New(acp.WithBinary(bin)), func(mock *modelmock.Server) transports.SessionSpec {
		return transports.SessionSpec{Model: "mock/mock-model", Env: []string{kilo.EnvConfig + "=" + mockProvider(mock)}}
	})
}

func liveACPSkill(t *testing.T, backend string, tr transports.Transport, specFor func(*modelmock.Server) transports.SessionSpec) {
	res, repo := probePlan(t, buildProbe(t), backend)
	require.NotNil(t, res.Plan)
	require.NotEmpty(t, res.Plan.SkillsDir)
	require.NotContains(t, res.Plan.Instructions, "Skills for this project are in")
	mock, err := modelmock.Start(t, nil)
	require.NoError(t, err)
	spec := specFor(mock)
	spec.SessionID, spec.Cwd, spec.Home, spec.Posture, spec.Provision = "cs_live2", repo, t.TempDir(), messages.PostureDefault, res.Plan
	spec = spec.WithProvision()
	ended := make(chan messages.Event, 1)
	sink := func(turn int, ev messages.Event) {
		if ev.Type == messages.EvTurnEnd || ev.Type == messages.EvEnded || ev.Type == messages.EvError {
			select {
			case ended <- ev:
			default:
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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
	body := string(reqs[0].Body)
	require.Contains(t, body, "probe-skill", backend+" lists the provisioned skill")
	require.Contains(t, body, "Knows the probe project", "with its description, read from its SKILL.md")
	require.False(t, strings.Contains(body, "Skills for this project are in"), "natively, not through an instruction")
}
