package droid

import (
	"maps"

	"github.com/codesession/codesession/messages"
)

// ID is the backend id.
const ID = "droid"

// EnvBinary names the droid executable when no WithBinary option is given
// (CI sets it to the pinned install); else `droid` is looked up on PATH.
const EnvBinary = "CODESESSION_DROID_BIN"

// PinnedVersion is the droid version this transport was verified against;
// CI installs exactly this one from npm.
const PinnedVersion = "0.215.0"

// AutonomyLevel returns droid's autonomy level for a posture, or "" for an
// invalid posture. Seed 003 maps default/acceptEdits/full to --auto
// low/medium/high for `droid exec -o json`, where nobody can answer a
// question and "off" means read-only. Over stream-jsonrpc droid asks the
// host instead, and at "low" it writes files WITHOUT asking, anywhere
// outside system directories (verified with 0.215.0: a Create of a file
// outside the workspace ran), which the workspace gate would never see.
// So every posture below full keeps droid at "off", where it asks about
// every change, and codesession decides: plan refuses every question,
// default asks the human, acceptEdits approves file edits that pass the
// gate by itself and asks about the rest. full is "high".
func AutonomyLevel(p messages.Posture) string { return autonomyMap[p] }

var autonomyMap = map[messages.Posture]string{
	messages.PosturePlan:        "off",
	messages.PostureDefault:     "off",
	messages.PostureAcceptEdits: "off",
	messages.PostureFull:        "high",
}

// postureLabels are the descriptor's posture map: droid's autonomy level,
// and what codesession does with droid's questions at it.
var postureLabels = map[messages.Posture]string{
	messages.PosturePlan:        "off+refuse-all",
	messages.PostureDefault:     "off+ask",
	messages.PostureAcceptEdits: "off+gated-edits-approved",
	messages.PostureFull:        "high",
}

// ReasoningEffort returns droid's reasoningEffort for an effort (seed 003:
// 1:1, max is droid's own top literal), or "" for none.
func ReasoningEffort(e messages.Effort) string { return effortMap[e] }

var effortMap = map[messages.Effort]string{
	messages.EffortLow: "low", messages.EffortMedium: "medium", messages.EffortHigh: "high", messages.EffortMax: "max",
}

// descriptor is the capability descriptor (seed 003, droid rows, moved to
// the stream-jsonrpc protocol).
func descriptor() messages.Descriptor {
	return messages.Descriptor{
		ID:             ID,
		DisplayName:    "Factory Droid",
		ProcessModel:   "one persistent droid exec process per session",
		Protocol:       "stream-jsonrpc on stdin/stdout (droid exec --input-format stream-jsonrpc --output-format stream-jsonrpc)",
		Granularity:    messages.GranularityStream,
		ClarifySupport: true,
		HonorsAllowed:  false,
		Resume:         messages.ResumeNative,
		ModelSelection: messages.ModelPerSession,
		EffortSupport:  messages.EffortAtStart,
		EffortMap:      maps.Clone(effortMap),
		PostureMap:     maps.Clone(postureLabels),
		EditToolNames:  []string{"Create", "Edit"},
		Live: messages.LiveControls{
			Interrupt:  true,
			SetPosture: true,
			GuideModes: []messages.GuideMode{messages.GuideQueue, messages.GuideInterrupt},
		},
		Cost: messages.CostMetered,
		Strengths: []string{
			"streams every message, tool call and tool result",
			"asks before gated tool calls (droid.request_permission answered mid-turn)",
			"posture changes live (droid.update_session_settings and codesession's own answers)",
			"works with a bring-your-own-key model (customModels in ~/.factory/settings.json), no Factory login",
		},
		Weaknesses: []string{
			"its Execute tool decides by the model's self-declared riskLevel: in full posture (autonomy high) a model that calls a risky command low-risk runs it",
			"no per-tool allow-list (the autonomy level is the boundary): an explicit allowedTools is rejected",
			"a denied call ends droid's own turn; the reason reaches the model as a follow-up message",
		},
		BriefingNotes: "Factory Droid runs as one persistent `droid exec` process per session speaking stream-jsonrpc. " +
			"Below full, droid runs at autonomy off and asks before every change; codesession answers: in plan it " +
			"refuses every question, in default it asks you, in acceptEdits it approves file edits inside the " +
			"workspace by itself and asks about commands. full = autonomy high (droid asks nothing). Droid's Execute tool decides by the risk level the model itself declares for each command " +
			"(riskLevel low/medium/high), so autonomy is only as strict as the model is honest. Effort is droid's " +
			"reasoningEffort (low/medium/high/max, 1:1), set at start; a model that does not support it reports " +
			"\"none\" and codesession warns. Every file path droid asks about passes the workspace gate first. " +
			"Resume loads the session with droid.load_session (`droid exec -s <id>` fails offline). " +
			"Verified with droid " + PinnedVersion + ".",
		ExternalAttach: &messages.ExternalAttach{
			CommandTemplate: "droid --resume {sessionId}",
			Note:            "run it in {cwd} with the session's HOME: droid keeps sessions under $HOME/.factory/sessions",
		},
		CLIVersion: PinnedVersion,
		// the CLI's own state, writable inside the Landlock confinement
		Containment: &messages.Containment{StateDirs: []string{"~/.factory"}},
	}
}
