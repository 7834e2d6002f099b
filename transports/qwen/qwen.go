package qwen

import (
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
)

// ID is the backend id.
const ID = "qwen"

// PinnedVersion is the @qwen-code/qwen-code version this backend was
// verified against; CI installs exactly this one.
const PinnedVersion = "0.24.4"

// EnvBinary names the qwen executable (CI sets it to the pinned install);
// else `qwen` is looked up on PATH.
const EnvBinary = "CODESESSION_QWEN_BIN"

// New returns the qwen transport.
func New(opts ...acp.Option) *acp.Transport { return acp.New(Agent(), opts...) }

// Agent is qwen as the ACP client drives it.
func Agent() acp.Agent {
	return acp.Profile{
		ID: ID, DisplayName: "Qwen Code",
		Command: "qwen", Invocation: "--acp", EnvBinary: EnvBinary,
		Package: "@qwen-code/qwen-code", Version: PinnedVersion,
		PlanMode: "plan", WorkMode: "default",
		Launch: launch,
		// the OpenAI-compatible provider qwen is pointed at
		Documented: []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "QWEN_*"},
		Strengths:  []string{"any OpenAI-compatible server (OPENAI_BASE_URL, OPENAI_API_KEY)"},
		Briefing: "Qwen Code runs as one persistent `qwen --acp --auth-type openai` process per session. " +
			"It is kept in its default mode (it asks; qwen's own start mode, auto, lets a classifier approve), " +
			"so each gated call passes the workspace gate and the posture: plan selects qwen's read-only plan " +
			"mode; acceptEdits allows edits inside the workspace; full allows every call inside it. The model " +
			"(-m) is set at start; there is no effort. Verified with qwen-code " + PinnedVersion + ".",
		Attach: "qwen --resume {sessionId}",
		// the CLI's own state, writable inside the Landlock confinement
		Containment: &messages.Containment{ListsHome: true, StateDirs: []string{"~/.qwen"}},
	}.Agent()
}

// Args is the argv after the binary for spec.
func Args(spec transports.SessionSpec) []string {
	args := []string{"--acp", "--auth-type", "openai"}
	if spec.Model != "" {
		args = append(args, "-m", spec.Model)
	}
	return args
}

func launch(spec transports.SessionSpec, scratch string) ([]string, []string, error) {
	// no telemetry, no update check: a session talks to its model only
	return Args(spec), []string{"QWEN_CODE_NO_TELEMETRY=1", "DISABLE_AUTOUPDATER=1"}, nil
}
