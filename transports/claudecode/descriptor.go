package claudecode

import "github.com/codesession/codesession/messages"

// ID is the backend id.
const ID = "claude-code"

// PinnedVersion is the Claude Code version this transport was verified
// against; CI installs exactly this one.
const PinnedVersion = "2.1.328"

// PermissionMode returns the CLI permission mode a posture maps to (seed
// 003, "Posture mapping"), or "" for an invalid posture.
func PermissionMode(p messages.Posture) string { return postureMap[p] }

var postureMap = map[messages.Posture]string{
	messages.PosturePlan:        "plan",
	messages.PostureDefault:     "default",
	messages.PostureAcceptEdits: "acceptEdits",
	// never bypassPermissions, which asks nothing and so skips the gate:
	// the CLI asks and the transport allows what the gate admits
	messages.PostureFull: "default",
}

var effortMap = map[messages.Effort]string{
	messages.EffortLow: "low", messages.EffortMedium: "medium", messages.EffortHigh: "high", messages.EffortMax: "max",
}

// descriptor is the capability descriptor (seed 003, claude-code rows).
func descriptor() messages.Descriptor {
	pm := make(map[messages.Posture]string, len(postureMap))
	for k, v := range postureMap {
		pm[k] = v
	}
	pm[messages.PostureFull] = "default, every question the workspace gate admits allowed by the runtime"
	em := make(map[messages.Effort]string, len(effortMap))
	for k, v := range effortMap {
		em[k] = v
	}
	return messages.Descriptor{
		ID:             ID,
		DisplayName:    "Claude Code",
		ProcessModel:   "one persistent claude -p process per session",
		Protocol:       "stream-json on stdin/stdout with the control protocol (--permission-prompt-tool stdio)",
		Granularity:    messages.GranularityStream,
		ClarifySupport: true,
		HonorsAllowed:  true,
		Resume:         messages.ResumeNative,
		ModelSelection: messages.ModelPerTurn,
		EffortSupport:  messages.EffortAtStart,
		EffortMap:      em,
		ModelClassMap:  map[string]string{"cheap": "haiku", "standard": "sonnet", "frontier": "opus"},
		PostureMap:     pm,
		EditToolNames:  []string{"Write", "Edit", "MultiEdit", "NotebookEdit"},
		Live: messages.LiveControls{
			Interrupt:  true,
			SetPosture: true,
			GuideModes: []messages.GuideMode{messages.GuideSteer, messages.GuideQueue, messages.GuideInterrupt},
		},
		Cost: messages.CostSubscription,
		Strengths: []string{
			"streams every model step, tool call and tool result",
			"asks before gated tool calls (clarifications answered mid-turn)",
			"steering reaches the running turn at its next tool boundary",
			"native resume of its own transcript",
		},
		Weaknesses: []string{
			"effort is fixed at start (a per-turn effort switch is rejected)",
			"picks up the repository's .claude/skills, CLAUDE.md and .mcp.json on its own",
		},
		BriefingNotes: "Claude Code runs as one persistent `claude -p` process per session (stream-json and the " +
			"control protocol). Postures map to its permission modes: plan, default and acceptEdits; full runs in " +
			"default mode and codesession allows every permission question the workspace gate admits, so a file " +
			"path outside the working directory is refused (with the reason, as the tool's result) at every posture. " +
			"The process starts with an allowlisted environment, in its own process group under a watchdog. allowedTools follow the CLI's meaning: the " +
			"listed tools run without asking, and any other tool is denied without asking. Steering guidance " +
			"reaches the running turn at its next tool boundary, or runs right after the turn's answer. The " +
			"model may change between turns; effort is set at start only. It loads the repository's " +
			"CLAUDE.md, .claude/skills and .mcp.json by itself, so a brief may rely on conventions stated there. " +
			"With CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 (set by default) the plan-mode safety check is not " +
			"reachable, so plan posture refuses the tool calls that need it. Verified with Claude Code " + PinnedVersion + ".",
		ExternalAttach: &messages.ExternalAttach{
			CommandTemplate: "claude --resume {sessionId}",
			Note:            "run it in {cwd} with the session's HOME: Claude Code keeps transcripts per directory under $HOME/.claude/projects",
		},
		CLIVersion: PinnedVersion,
		// the CLI's own state, writable inside the Landlock confinement
		Containment: &messages.Containment{StateDirs: []string{"~/.claude", "~/.claude.json", "~/.claude.json.backup", "~/.cache/claude-cli-nodejs"}},
		Gate:        messages.GateQuestions,
	}
}
