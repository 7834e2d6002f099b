package codex

import (
	"maps"

	"github.com/codesession/codesession/messages"
)

// ID is the backend id.
const ID = "codex"

// PinnedVersion is the Codex CLI version this transport was verified
// against; CI installs exactly this one.
const PinnedVersion = "0.169.0"

// Posture is how a codesession posture maps onto Codex: the sandbox
// (thread/start's sandbox mode, turn/start's sandboxPolicy type), the
// approval policy, and whether the transport itself accepts file-change
// approvals (after the workspace gate) instead of asking.
type Posture struct {
	Sandbox         string // read-only | workspace-write | danger-full-access
	SandboxPolicy   string // the same as turn/start spells it: readOnly | workspaceWrite | dangerFullAccess
	ApprovalPolicy  string // untrusted | on-request | never
	AutoAcceptEdits bool
}

// String is the posture as the descriptor's posture map shows it.
func (p Posture) String() string {
	s := p.Sandbox + " + approval " + p.ApprovalPolicy
	if p.AutoAcceptEdits {
		s += " (file changes auto-approved after the workspace gate)"
	}
	return s
}

// PostureOf returns the Codex settings of a posture, and false for an
// invalid one.
//
// Under on-request Codex never asks about a patch inside its writable
// roots (it only asks when the model requests an escalation), so default
// and acceptEdits both use untrusted, which asks for every patch and every
// command not on Codex's list of safe read-only commands: default passes
// those questions on, acceptEdits accepts the file changes itself (each
// path through the workspace gate) and passes on the commands. plan keeps
// on-request in a read-only sandbox, so a model may still ask to escalate.
func PostureOf(p messages.Posture) (Posture, bool) {
	c, ok := postureMap[p]
	return c, ok
}

var postureMap = map[messages.Posture]Posture{
	messages.PosturePlan:        {Sandbox: "read-only", SandboxPolicy: "readOnly", ApprovalPolicy: "on-request"},
	messages.PostureDefault:     {Sandbox: "workspace-write", SandboxPolicy: "workspaceWrite", ApprovalPolicy: "untrusted"},
	messages.PostureAcceptEdits: {Sandbox: "workspace-write", SandboxPolicy: "workspaceWrite", ApprovalPolicy: "untrusted", AutoAcceptEdits: true},
	messages.PostureFull:        {Sandbox: "danger-full-access", SandboxPolicy: "dangerFullAccess", ApprovalPolicy: "never"},
}

// effortMap is Codex's reasoning effort per codesession effort (seed 003:
// max is Codex's xhigh).
var effortMap = map[messages.Effort]string{
	messages.EffortLow: "low", messages.EffortMedium: "medium", messages.EffortHigh: "high", messages.EffortMax: "xhigh",
}

// Tool names the transport gives Codex's items in EvToolUse and
// EvClarification.
const (
	ToolShell      = "exec_command" // commandExecution items and their approvals
	ToolApplyPatch = "apply_patch"  // fileChange items and their approvals
)

// descriptor is the capability descriptor: seed 003's codex row, updated
// for app-server (clarify, steer and interrupt work there).
func descriptor() messages.Descriptor {
	pm := make(map[messages.Posture]string, len(postureMap))
	for k, v := range postureMap {
		pm[k] = v.String()
	}
	return messages.Descriptor{
		ID:             ID,
		DisplayName:    "OpenAI Codex",
		ProcessModel:   "one persistent codex app-server process per session",
		Protocol:       "JSON-RPC over stdio (codex app-server): thread/start, turn/start, turn/steer, turn/interrupt, approval requests",
		Granularity:    messages.GranularityStream,
		ClarifySupport: true,
		HonorsAllowed:  false,
		Resume:         messages.ResumeThreadID,
		ModelSelection: messages.ModelPerTurn,
		EffortSupport:  messages.EffortPerTurn,
		EffortMap:      maps.Clone(effortMap),
		ModelClassMap:  map[string]string{"standard": "gpt-5.5", "frontier": "gpt-5.5"},
		PostureMap:     pm,
		EditToolNames:  []string{ToolApplyPatch},
		Live: messages.LiveControls{
			Interrupt:  true,
			SetPosture: true,
			GuideModes: []messages.GuideMode{messages.GuideSteer, messages.GuideQueue, messages.GuideInterrupt},
		},
		Cost: messages.CostSubscription,
		Strengths: []string{
			"streams messages, reasoning summaries, commands and file changes as they happen",
			"asks before commands and file changes (clarifications answered mid-turn)",
			"steering reaches the running turn (turn/steer); interrupts end it cleanly (turn/interrupt)",
			"model and effort switch per turn; reports its own per-turn diff",
		},
		Weaknesses: []string{
			"allowedTools cannot be honoured: the sandbox and the approval policy are the only boundary",
			"token usage only: no USD cost is reported (subscription billing)",
			"reads the repository's AGENTS.md on its own",
			"without bubblewrap (bwrap) on PATH Codex sandboxes with its bundled copy; it warns at every start, which sessions do not repeat",
		},
		BriefingNotes: "Codex runs as one persistent `codex app-server` process per session, with its own CODEX_HOME " +
			"written by codesession. Postures map to a sandbox plus an approval policy: plan = read-only sandbox " +
			"(approvals on request), default = workspace-write asking before file changes and non-trivial commands, " +
			"acceptEdits = the same with file changes accepted automatically once every path passes the workspace " +
			"gate, full = danger-full-access with approvals never. A denial's reason is sent to the running turn as " +
			"steering, since Codex's decline carries no message. The model and effort may change between turns " +
			"(max = xhigh). Codex reads the repository's AGENTS.md by itself. Verified with Codex CLI " + PinnedVersion + ".",
		ExternalAttach: &messages.ExternalAttach{
			CommandTemplate: "codex resume {sessionId}",
			Note:            "the command sets the session's own CODEX_HOME: Codex keeps its threads under $CODEX_HOME/sessions",
		},
		CLIVersion: PinnedVersion,
		// the CLI's own state, writable inside the Landlock confinement
		Containment: &messages.Containment{StateDirs: []string{"~/.codex"}},
	}
}
