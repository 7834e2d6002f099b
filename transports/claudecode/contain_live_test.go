package claudecode

import (
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc/confinetest"
)

// TestLiveContainedProcessTree: the real claude CLI, contained as the
// runtime contains it, at posture full (no questions, inside the
// confinement): see confinetest. Fails on the code before Landlock
// covered every backend (the outside touch succeeded). At network:
// model-only: the shell cannot reach a loopback listener on another port
// than the model's, and the session still talks to modelmock.
func TestLiveContainedProcessTree(t *testing.T) {
	c := containedCase(t)
	c.Network = true
	confinetest.Run(t, c)
}

// TestLiveLoopbackProcessTree: the same check at network: loopback. The
// session's tree runs in a network namespace of its own, the real claude
// CLI reaches modelmock only through the runtime's relay, and the shell
// reaches neither another loopback port nor the model's port on another
// loopback address (which model-only's per-port rules let through).
func TestLiveLoopbackProcessTree(t *testing.T) {
	c := containedCase(t)
	c.Loopback = true
	confinetest.Run(t, c)
}

// containedCase is the real claude CLI at posture full against a mock,
// its shell run by the reference scenario's TOOL:BASH.
func containedCase(t *testing.T) confinetest.Case {
	mock, err := modelmock.Start(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	return confinetest.Case{Transport: New(WithBinary(claudeBinary(t))), Mock: mock,
		Spec: transports.SessionSpec{Model: "claude-mock-1", Posture: messages.PostureFull,
			Env: []string{"ANTHROPIC_BASE_URL=" + mock.URL(), "ANTHROPIC_API_KEY=sk-ant-test"}},
		ShellPrompt: func(cmd string) string { return "TOOL:BASH " + cmd }}
}
