package opencode

import (
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/acp/acptest"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc/confinetest"
)

// TestLiveContainedProcessTree: the real opencode CLI over ACP, contained as
// the runtime contains it, at posture full: see confinetest.
func TestLiveContainedProcessTree(t *testing.T) {
	b := backend(t)
	call := acptest.Call("bash", map[string]any{"command": "{{1}}", "description": "run it"})
	mock, err := modelmock.Start(t, &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Regex: "RUN-SHELL (.*)"}, Steps: []modelmock.Step{{Tool: &call}, {Text: "shell done"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	spec := b.Spec(t, mock)
	spec.Posture = messages.PostureFull
	confinetest.Run(t, confinetest.Case{Transport: b.New(acptest.Options(acp.WithBinary(b.Bin))...), Mock: mock, Spec: spec,
		ShellPrompt: func(cmd string) string { return "RUN-SHELL " + cmd }, Answer: true})
}
