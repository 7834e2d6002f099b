package droid

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/droid/droidtest"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc/confinetest"
)

// TestLiveContainedProcessTree: the real droid CLI, contained as the
// runtime contains it, at posture full: see confinetest.
func TestLiveContainedProcessTree(t *testing.T) {
	bin := droidBinary(t)
	mock, err := modelmock.Start(t, &modelmock.Scenario{Rules: []modelmock.Rule{{
		Match: modelmock.Match{Regex: `RUN-SHELL (.*)`},
		Steps: []modelmock.Step{{Tool: &modelmock.ToolCall{Name: "Execute",
			Input: json.RawMessage(`{"command":"{{1}}","riskLevel":"low","riskLevelReason":"the mock says so"}`)}}, {Text: "shell done"}},
	}}})
	require.NoError(t, err)
	home := droidtest.Home(t, mock.URL())
	confinetest.Run(t, confinetest.Case{Transport: New(WithBinary(bin)), Mock: mock,
		Spec:        transports.SessionSpec{Home: home, Model: mockModelID, Posture: messages.PostureFull},
		ShellPrompt: func(cmd string) string { return "RUN-SHELL " + cmd }, Answer: true})
}
