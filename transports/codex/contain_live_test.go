package codex

import (
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc/confinetest"
)

// TestLiveContainedProcessTree: the real codex app-server, contained as
// the runtime contains it, at posture full (codex's own sandbox off, so
// only the runtime's Landlock holds): see confinetest.
func TestLiveContainedProcessTree(t *testing.T) {
	bin := codexBinary(t)
	const prompt = "RUN-SHELL"
	m := startMock(t, &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Regex: prompt + " (.*)"}, Steps: []modelmock.Step{shellStep("{{1}}", false), {Text: "shell done"}}},
	}})
	confinetest.Run(t, confinetest.Case{Transport: New(WithBinary(bin)), Mock: m,
		Spec:        transports.SessionSpec{Model: mockModel, Posture: messages.PostureFull, Env: mockEnv(m)},
		ShellPrompt: func(cmd string) string { return prompt + " " + cmd }})
}
