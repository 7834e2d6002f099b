package curation

import (
	"strings"
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
	liveTurn(t, tr, spec, "hello", 3*time.Minute, nil)
	reqs := mock.MainRequests()
	require.NotEmpty(t, reqs)
	require.Contains(t, string(reqs[0].Body), "probe-skill", "codex lists the provisioned skill")
	require.Contains(t, string(reqs[0].Body), "Knows the probe project", "with its description")
	require.False(t, strings.Contains(string(reqs[0].Body), "Skills for this project are in"), "natively, not through an instruction")
}
