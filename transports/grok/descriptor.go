package grok

import (
	"maps"

	"github.com/codesession/codesession/messages"
)

// ID is the backend id.
const ID = "grok"

// DocumentedVersion is the grok version seed 003 documents (argv surface
// and JSON shapes live-verified there). The CLI cannot be installed here
// (it ships only from x.ai's own installer, not a registry this build can
// reach), so this transport is tested against a replay of those shapes,
// never against the real CLI.
const DocumentedVersion = "0.2.93"

// PermissionMode returns grok's --permission-mode for a posture (seed 003,
// "Posture mapping"), or "" for an invalid posture. acceptEdits maps to
// auto, not grok's own acceptEdits: headless, grok's acceptEdits (and
// dontAsk) CANCEL every call that needs approval.
func PermissionMode(p messages.Posture) string { return postureMap[p] }

var postureMap = map[messages.Posture]string{
	messages.PosturePlan:        "plan",
	messages.PostureDefault:     "default",
	messages.PostureAcceptEdits: "auto",
	messages.PostureFull:        "bypassPermissions",
}

// ReasoningEffort returns grok's --reasoning-effort for an effort (1:1,
// max is grok's own top literal), or "".
func ReasoningEffort(e messages.Effort) string { return effortMap[e] }

var effortMap = map[messages.Effort]string{
	messages.EffortLow: "low", messages.EffortMedium: "medium", messages.EffortHigh: "high", messages.EffortMax: "max",
}

func descriptor() messages.Descriptor {
	return messages.Descriptor{
		ID:             ID,
		DisplayName:    "xAI Grok Build (replay-tested)",
		ProcessModel:   "one grok -p process per turn",
		Protocol:       "grok -p --output-format json: one pretty-printed JSON object per turn, buffered and parsed after exit",
		Granularity:    messages.GranularityPerTurn,
		ClarifySupport: false,
		HonorsAllowed:  false,
		Resume:         messages.ResumeNative,
		ModelSelection: messages.ModelPerSession,
		EffortSupport:  messages.EffortAtStart,
		EffortMap:      maps.Clone(effortMap),
		ModelClassMap:  map[string]string{"frontier": "grok-4.5"},
		PostureMap:     maps.Clone(postureMap),
		// Grok's json mode reports no tool events (seed 003: git path only),
		// so these names never match one; they are here because diff capture
		// and the conformance suite want the field, and they are NOT
		// verified against grok: replace them once a capture shows its tools.
		EditToolNames: []string{"edit_file", "write_file"},
		Live: messages.LiveControls{
			Interrupt:  true,
			SetPosture: true,
			GuideModes: []messages.GuideMode{messages.GuideQueue, messages.GuideInterrupt},
		},
		Cost: messages.CostMetered,
		Strengths: []string{
			"native sessions pinned by a UUID (-s on the first turn, --resume after)",
		},
		Weaknesses: []string{
			"REPLAY-TESTED ONLY: the grok CLI cannot be installed on the build machines; tests run a fake grok that replays the shapes seed 003 documents",
			"one terminal object per turn: no streaming, no tool events (diff capture relies on git)",
			"headless mode cannot ask: in plan and default posture a gated call is cancelled and the turn ends with no change",
			"--tools crashes session creation in grok 0.2.93, so allowedTools is rejected",
		},
		BriefingNotes: "REPLAY-TESTED, NOT TESTED LIVE: the grok CLI cannot be installed where codesession is built, so " +
			"this backend is tested against a fake grok replaying exactly the shapes seed 003 documents for grok " +
			DocumentedVersion + " (the success object, the error envelope, -s/--resume, the permission modes). " +
			"Each turn runs `grok -p <input> --output-format json` with --permission-mode from the posture: plan, " +
			"default, acceptEdits = auto (grok's own acceptEdits cancels gated calls headless), full = " +
			"bypassPermissions. Under plan and default a call that needs approval is cancelled, not asked: the turn " +
			"completes with stopReason Cancelled and nothing changed. Effort is --reasoning-effort " +
			"(low/medium/high/max). --tools is never passed (it crashes session creation).",
		ExternalAttach: &messages.ExternalAttach{
			CommandTemplate: "grok --resume {sessionId}",
			Note:            "run it in {cwd} with the session's HOME",
		},
		CLIVersion: DocumentedVersion,
		// the CLI's own state, writable inside the Landlock confinement
		Containment: &messages.Containment{StateDirs: []string{"~/.grok"}},
	}
}
