package kilo

import (
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/opencode"
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

// New returns the kilo transport.
func New(opts ...acp.Option) *acp.Transport { return acp.New(Agent(), opts...) }

// Agent is kilo as the ACP client drives it: opencode's launch under
// kilo's names.
func Agent() acp.Agent {
	return acp.Profile{
		ID: ID, DisplayName: "Kilo Code CLI",
		Command: "kilo", Invocation: "acp", EnvBinary: EnvBinary,
		Package: "@kilocode/cli", Version: PinnedVersion,
		PlanMode: "plan", WorkMode: "code",
		EffortNote: "no effort setting over ACP (an effort is rejected)",
		Launch:     opencode.LaunchAs("KILO", EnvConfig, "DISABLE_SHARE=1", "DISABLE_SESSION_INGEST=1"),
		Documented: []string{"KILO_*"},
		Strengths:  []string{"any provider kilo supports, named provider/model"},
		Briefing: "Kilo Code CLI (an opencode fork) runs as one persistent `kilo acp` process per session, " +
			"with --cwd set to the session's directory. Its per-session configuration sets edits, shell and " +
			"fetch to ask, so each call passes the workspace gate and the posture: plan selects the read-only " +
			"plan agent; acceptEdits allows edits inside the workspace; full allows every call inside it. The " +
			"model is provider/model, set at start. Verified with @kilocode/cli " + PinnedVersion + ".",
		// as opencode's: the project positional is required (refused without a cwd)
		Attach: "kilo {cwd} --session {sessionId}",
		// the CLI's own state, writable inside the Landlock confinement
		Containment: &messages.Containment{StateDirs: []string{"~/.local/share/kilo", "~/.local/state/kilo", "~/.cache/kilo", "~/.config/kilo"}},
	}.Agent()
}
