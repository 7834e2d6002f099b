package kilo

import (
	"encoding/json"
	"strings"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/opencode"
	"github.com/codesession/codesession/transports/subprocess"
)

// ID is the backend id.
const ID = "kilo"

// PinnedVersion is the @kilocode/cli version this backend was verified
// against; CI installs exactly this one (7.8.1, the newest, has no
// published linux-x64 binary package).
const PinnedVersion = "7.7.7"

// EnvBinary names the kilo executable (CI sets it to the pinned install);
// else `kilo` is looked up on PATH.
const EnvBinary = "CODESESSION_KILO_BIN"

// EnvConfig holds a JSON object of kilo configuration (such as a provider)
// that the session's config is built on.
const EnvConfig = "CODESESSION_KILO_CONFIG"

var modes = map[messages.Posture]string{
	messages.PosturePlan:        "plan",
	messages.PostureDefault:     "code",
	messages.PostureAcceptEdits: "code",
	messages.PostureFull:        "code",
}

// New returns the kilo transport.
func New(opts ...acp.Option) *acp.Transport { return acp.New(Agent(), opts...) }

// Agent is kilo as the ACP client drives it.
func Agent() acp.Agent {
	return acp.Agent{
		Descriptor:   descriptor(),
		Command:      "kilo",
		EnvBinary:    EnvBinary,
		Package:      "@kilocode/cli",
		Install:      "npm install @kilocode/cli@" + PinnedVersion,
		ParseVersion: func(out string) string { return strings.TrimPrefix(subprocess.LastField(out), "v") },
		Launch:       launch,
		Documented:   []string{"KILO_*"},
		Modes:        modes,
	}
}

func launch(spec transports.SessionSpec, scratch string) ([]string, []string, error) {
	if spec.Effort != "" {
		return nil, nil, messages.Errorf(messages.CodeUnsupported, messages.OpStart,
			"kilo %s offers no effort setting over ACP: start without effort", PinnedVersion)
	}
	cfg, err := opencode.Config(json.RawMessage(subprocess.EnvValue(spec.Env, EnvConfig)), spec.Model, opencode.SkillPaths(spec)...)
	if err != nil {
		return nil, nil, err
	}
	env := []string{
		"KILO_CONFIG_CONTENT=" + string(cfg),
		"KILO_DISABLE_AUTOUPDATE=1",
		"KILO_DISABLE_MODELS_FETCH=1",
		"KILO_DISABLE_LSP_DOWNLOAD=1",
		"KILO_DISABLE_SHARE=1",
		"KILO_DISABLE_SESSION_INGEST=1",
	}
	return []string{"acp", "--cwd", spec.Cwd}, env, nil
}

func descriptor() messages.Descriptor {
	return messages.Descriptor{
		ID:             ID,
		DisplayName:    "Kilo Code CLI",
		ProcessModel:   "one persistent `kilo acp` process per session",
		Protocol:       "Agent Client Protocol (JSON-RPC 2.0 over stdio)",
		Granularity:    messages.GranularityStream,
		ClarifySupport: true,
		HonorsAllowed:  false,
		Resume:         messages.ResumeNative,
		ModelSelection: messages.ModelPerSession,
		EffortSupport:  messages.EffortNone,
		PostureMap: map[messages.Posture]string{
			messages.PosturePlan:        "mode plan (read-only)",
			messages.PostureDefault:     "mode code, asks",
			messages.PostureAcceptEdits: "mode code, edits allowed",
			messages.PostureFull:        "mode code, all allowed",
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
			"any provider kilo supports, named provider/model",
		},
		Weaknesses: []string{
			"no effort setting over ACP (an effort is rejected)",
			"a deny's reason reaches the agent with the next prompt (ACP has no field for it)",
			"allowedTools cannot be honoured: the posture is the boundary",
		},
		BriefingNotes: "Kilo Code CLI (an opencode fork) runs as one persistent `kilo acp` process per session, " +
			"with --cwd set to the session's directory. Its per-session configuration sets edits, shell and " +
			"fetch to ask, so each call passes the workspace gate and the posture: plan selects the read-only " +
			"plan agent; acceptEdits allows edits inside the workspace; full allows every call inside it. The " +
			"model is provider/model, set at start. Verified with @kilocode/cli " + PinnedVersion + ".",
		// as opencode's: the project positional is required (refused without a cwd)
		ExternalAttach: &messages.ExternalAttach{CommandTemplate: "kilo {cwd} --session {sessionId}"},
		CLIVersion:     PinnedVersion,
		// the CLI's own state, writable inside the Landlock confinement
		Containment: &messages.Containment{StateDirs: []string{"~/.local/share/kilo", "~/.local/state/kilo", "~/.cache/kilo", "~/.config/kilo"}},
	}
}
