package curation

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/droid"
	"github.com/codesession/codesession/transports/droid/droidtest"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// droidMCPTool is the name droid gives the probe server's tool.
const droidMCPTool = "probe___magic_word"

// TestLiveDroidSeesAndCallsAProvisionedMCPServer runs the real droid CLI
// (CODESESSION_DROID_BIN) with the pipeline's droid plan: its MCP config
// is in the session's provisioned HOME (never the repository, never the
// user's ~/.factory), droid offers the model the provisioned server's
// tool, and a turn against modelmock calls it; the user's own droid
// settings (the BYOK model) are still the ones droid runs with.
func TestLiveDroidSeesAndCallsAProvisionedMCPServer(t *testing.T) {
	bin := subprocesstest.Find(t, droid.EnvBinary, "npm install droid@"+droid.PinnedVersion, "droid")
	probe := buildProbe(t)
	res, repo := probePlan(t, probe, droid.ID)
	require.NotNil(t, res.Plan)
	plan := res.Plan
	require.Equal(t, filepath.Join(plan.Dir, "droid-home"), plan.Home)
	require.Equal(t, filepath.Join(plan.Home, ".factory", "mcp.json"), plan.ConfigFile)
	require.FileExists(t, filepath.Join(plan.Home, ".factory", "skills", "probe-skill", "SKILL.md"), "droid's native skills directory")
	require.True(t, strings.HasPrefix(plan.Dir, res.Dir))

	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{ToolResultRegex: "xyzzy"}, Steps: []modelmock.Step{{Text: "the tool said {{result}}"}}},
		{Match: modelmock.Match{Text: "CALL MAGIC"}, Steps: []modelmock.Step{{Tool: &modelmock.ToolCall{Name: droidMCPTool, Input: json.RawMessage(`{}`)}}}},
	}}
	mock, err := modelmock.Start(t, sc)
	require.NoError(t, err)
	user := droidtest.Home(t, mock.URL()) // the user's HOME: droid's BYOK settings point at the mock

	tr := droid.New(droid.WithBinary(bin))
	spec := transports.SessionSpec{SessionID: "cs_live2", Cwd: repo, Home: user, Model: droidtest.MockModelID,
		Posture: messages.PostureDefault, Provision: plan}.WithProvision()
	liveTurn(t, tr, spec, "CALL MAGIC", 3*time.Minute, nil)
	// droid's first request, before the model's call could name the tool
	// itself: the provisioned server's tool among its deferred tools
	// (reached through ToolSearch or by name), the provisioned skill among
	// its available skills
	reqs := mock.MainRequests()
	require.NotEmpty(t, reqs)
	first := string(reqs[0].Body)
	deferred, _, ok := strings.Cut(first[strings.Index(first, "Deferred tools:")+1:], "</system-reminder>")
	require.True(t, ok && strings.Contains(first, "Deferred tools:"), "droid lists no deferred tools")
	assert.Contains(t, deferred, `\n`+droidMCPTool+`\n`, "droid knows the provisioned server's tool")
	assert.Contains(t, first, "probe-skill: Knows the probe project's conventions.", "droid lists the provisioned skill natively")
	called := false
	for _, r := range reqs {
		called = called || strings.Contains(string(r.Body), "xyzzy-provisioned")
	}
	assert.True(t, called, "the tool's answer reached the model")
	// nothing of it went into the repository or the user's ~/.factory
	assert.NoDirExists(t, filepath.Join(repo, ".factory"))
	assert.NoFileExists(t, filepath.Join(user, ".factory", "mcp.json"))
	link, err := os.Readlink(filepath.Join(plan.Home, ".factory", "settings.json"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(user, ".factory", "settings.json"), link, "droid runs with the user's own settings")
}
