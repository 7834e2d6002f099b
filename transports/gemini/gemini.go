package gemini

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/subprocess"
)

// ID is the backend id.
const ID = "gemini"

// PinnedVersion is the @google/gemini-cli version this backend was
// verified against; CI installs exactly this one.
const PinnedVersion = "0.61.0"

// EnvBinary names the gemini executable (CI sets it to the pinned
// install); else `gemini` is looked up on PATH.
const EnvBinary = "CODESESSION_GEMINI_BIN"

var modes = map[messages.Posture]string{
	messages.PosturePlan:        "plan",
	messages.PostureDefault:     "default",
	messages.PostureAcceptEdits: "default",
	messages.PostureFull:        "default",
}

// New returns the gemini transport.
func New(opts ...acp.Option) *acp.Transport { return acp.New(Agent(), opts...) }

// Agent is gemini as the ACP client drives it.
func Agent() acp.Agent {
	return acp.Agent{
		Descriptor:   descriptor(),
		Command:      "gemini",
		EnvBinary:    EnvBinary,
		Package:      "@google/gemini-cli",
		Install:      "npm install @google/gemini-cli@" + PinnedVersion,
		ParseVersion: subprocess.LastField,
		Launch:       launch,
		Modes:        modes,
		BeforeLoad:   beforeLoad,
	}
}

// Args is the argv after the binary for spec.
func Args(spec transports.SessionSpec) []string {
	args := []string{"--acp"}
	if spec.Model != "" {
		args = append(args, "-m", spec.Model)
	}
	return args
}

func launch(spec transports.SessionSpec, scratch string) ([]string, []string, error) {
	if spec.Effort != "" {
		return nil, nil, messages.Errorf(messages.CodeUnsupported, messages.OpStart,
			"gemini %s has no effort setting: start without effort", PinnedVersion)
	}
	env := []string{"GEMINI_CLI_TRUST_WORKSPACE=true"}
	if subprocess.EnvValue(spec.Env, "GEMINI_API_KEY") != "" {
		path := filepath.Join(scratch, "system-settings.json")
		b, _ := json.Marshal(map[string]any{"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}})
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, nil, messages.Wrap(messages.CodeInternal, messages.OpStart, err, "cannot write gemini's settings")
		}
		env = append(env, "GEMINI_CLI_SYSTEM_SETTINGS_PATH="+path)
	}
	return Args(spec), env, nil
}

func descriptor() messages.Descriptor {
	return messages.Descriptor{
		ID:             ID,
		DisplayName:    "Gemini CLI",
		ProcessModel:   "one persistent `gemini --acp` process per session",
		Protocol:       "Agent Client Protocol (JSON-RPC 2.0 over stdio)",
		Granularity:    messages.GranularityStream,
		ClarifySupport: true,
		HonorsAllowed:  false,
		// session/load, after beforeLoad (resume.go) in the session's first minute
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
		},
		Weaknesses: []string{
			"no effort setting (an effort is rejected)",
			"a deny's reason reaches the agent with the next prompt (ACP has no field for it)",
			"allowedTools cannot be honoured: the posture is the boundary",
		},
		BriefingNotes: "Gemini CLI runs as one persistent `gemini --acp` process per session, its workspace trusted. " +
			"It stays in its default mode (it asks), so each gated call passes the workspace gate and the posture: " +
			"plan selects gemini's read-only plan mode; acceptEdits allows edits inside the workspace; full allows " +
			"every call inside it. The model (-m) is set at start; there is no effort. A resume loads gemini's own session " +
			"(ACP session/load), so the model sees the earlier turns. Verified with gemini-cli " + PinnedVersion + ".",
		// `gemini --resume <id>` finds the session among the chats of the
		// project of the directory it runs in (the command cds there)
		ExternalAttach: &messages.ExternalAttach{CommandTemplate: "gemini --resume {sessionId}"},
		CLIVersion:     PinnedVersion,
		// the CLI's own state, writable inside the Landlock confinement
		Containment: &messages.Containment{ListsHome: true, StateDirs: []string{"~/.gemini"}},
	}
}
