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

// New returns the gemini transport.
func New(opts ...acp.Option) *acp.Transport { return acp.New(Agent(), opts...) }

// Agent is gemini as the ACP client drives it.
func Agent() acp.Agent {
	return acp.Profile{
		ID: ID, DisplayName: "Gemini CLI",
		Command: "gemini", Invocation: "--acp", EnvBinary: EnvBinary,
		Package: "@google/gemini-cli", Version: PinnedVersion,
		PlanMode: "plan", WorkMode: "default",
		Launch: launch,
		// session/load, after beforeLoad (resume.go) in the session's first minute
		BeforeLoad: beforeLoad,
		Briefing: "Gemini CLI runs as one persistent `gemini --acp` process per session, its workspace trusted. " +
			"It stays in its default mode (it asks), so each gated call passes the workspace gate and the posture: " +
			"plan selects gemini's read-only plan mode; acceptEdits allows edits inside the workspace; full allows " +
			"every call inside it. The model (-m) is set at start; there is no effort. A resume loads gemini's own session " +
			"(ACP session/load), so the model sees the earlier turns. Verified with gemini-cli " + PinnedVersion + ".",
		// `gemini --resume <id>` finds the session among the chats of the
		// project of the directory it runs in (the command cds there)
		Attach: "gemini --resume {sessionId}",
		// the CLI's own state, writable inside the Landlock confinement
		Containment: &messages.Containment{ListsHome: true, StateDirs: []string{"~/.gemini"}},
	}.Agent()
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
