package qwen

import (
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/subprocess"
)

// ID is the backend id.
const ID = "qwen"

// PinnedVersion is the @qwen-code/qwen-code version this backend was
// verified against; CI installs exactly this one.
const PinnedVersion = "0.24.4"

// EnvBinary names the qwen executable (CI sets it to the pinned install);
// else `qwen` is looked up on PATH.
const EnvBinary = "CODESESSION_QWEN_BIN"

var modes = map[messages.Posture]string{
	messages.PosturePlan:        "plan",
	messages.PostureDefault:     "default",
	messages.PostureAcceptEdits: "default",
	messages.PostureFull:        "default",
}

// New returns the qwen transport.
func New(opts ...acp.Option) *acp.Transport { return acp.New(Agent(), opts...) }

// Agent is qwen as the ACP client drives it.
func Agent() acp.Agent {
	return acp.Agent{
		Descriptor:   descriptor(),
		Command:      "qwen",
		EnvBinary:    EnvBinary,
		Package:      "@qwen-code/qwen-code",
		Install:      "npm install @qwen-code/qwen-code@" + PinnedVersion,
		ParseVersion: subprocess.LastField,
		Launch:       launch,
		// the OpenAI-compatible provider qwen is pointed at
		Documented: []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "QWEN_*"},
		Modes:      modes,
	}
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
	if spec.Effort != "" {
		return nil, nil, messages.Errorf(messages.CodeUnsupported, messages.OpStart,
			"qwen %s has no effort setting: start without effort", PinnedVersion)
	}
	// no telemetry, no update check: a session talks to its model only
	return Args(spec), []string{"QWEN_CODE_NO_TELEMETRY=1", "DISABLE_AUTOUPDATER=1"}, nil
}

func descriptor() messages.Descriptor {
	return messages.Descriptor{
		ID:             ID,
		DisplayName:    "Qwen Code",
		ProcessModel:   "one persistent `qwen --acp` process per session",
		Protocol:       "Agent Client Protocol (JSON-RPC 2.0 over stdio)",
		Granularity:    messages.GranularityStream,
		ClarifySupport: true,
		HonorsAllowed:  false,
		Resume:         messages.ResumeNative,
		ModelSelection: messages.ModelPerSession,
		EffortSupport:  messages.EffortNone,
		PostureMap: map[messages.Posture]string{
			messages.PosturePlan:        "mode plan (read-only)",
			messages.PostureDefault:     "mode default, asks",
			messages.PostureAcceptEdits: "mode default, edits allowed",
			messages.PostureFull:        "mode default, all allowed",
		},
		EditToolNames: acp.EditToolNames(),
		Live: messages.LiveControls{
			Interrupt:  true,
			SetPosture: true,
			GuideModes: []messages.GuideMode{messages.GuideQueue, messages.GuideInterrupt},
		},
		Cost: messages.CostMetered,
		Strengths: []string{
			"streams text, tool calls and results over ACP",
			"asks before edits and shell commands (clarifications answered mid-turn)",
			"any OpenAI-compatible server (OPENAI_BASE_URL, OPENAI_API_KEY)",
		},
		Weaknesses: []string{
			"no effort setting (an effort is rejected)",
			"a deny's reason reaches the agent with the next prompt (ACP has no field for it)",
			"allowedTools cannot be honoured: the posture is the boundary",
		},
		BriefingNotes: "Qwen Code runs as one persistent `qwen --acp --auth-type openai` process per session. " +
			"It is kept in its default mode (it asks; qwen's own start mode, auto, lets a classifier approve), " +
			"so each gated call passes the workspace gate and the posture: plan selects qwen's read-only plan " +
			"mode; acceptEdits allows edits inside the workspace; full allows every call inside it. The model " +
			"(-m) is set at start; there is no effort. Verified with qwen-code " + PinnedVersion + ".",
		ExternalAttach: &messages.ExternalAttach{CommandTemplate: "qwen --resume {sessionId}"},
		CLIVersion:     PinnedVersion,
		// the CLI's own state, writable inside the Landlock confinement
		Containment: &messages.Containment{ListsHome: true, StateDirs: []string{"~/.qwen"}},
	}
}
