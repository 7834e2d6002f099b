package copilot

import (
	"maps"
	"strings"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
)

// ID is the backend id.
const ID = "copilot"

// PinnedVersion is the @github/copilot version this backend was verified
// against; CI installs exactly this one.
const PinnedVersion = "1.0.102"

// EnvBinary names the copilot executable (CI sets it to the pinned
// install); else `copilot` is looked up on PATH.
const EnvBinary = "CODESESSION_COPILOT_BIN"

const modeURL = "https://agentclientprotocol.com/protocol/session-modes#"

var modes = map[messages.Posture]string{
	messages.PosturePlan:        modeURL + "plan",
	messages.PostureDefault:     modeURL + "agent",
	messages.PostureAcceptEdits: modeURL + "agent",
	messages.PostureFull:        modeURL + "agent",
}

// effortMap is seed 003's copilot row: --reasoning-effort, 1:1.
var effortMap = map[messages.Effort]string{
	messages.EffortLow: "low", messages.EffortMedium: "medium", messages.EffortHigh: "high", messages.EffortMax: "max",
}

// New returns the copilot transport.
func New(opts ...acp.Option) *acp.Transport { return acp.New(Agent(), opts...) }

// Agent is copilot as the ACP client drives it.
func Agent() acp.Agent {
	return acp.Agent{
		Descriptor: descriptor(),
		Command:    "copilot",
		EnvBinary:  EnvBinary,
		Package:    "@github/copilot",
		Install:    "npm install @github/copilot@" + PinnedVersion,
		ParseVersion: func(out string) string {
			// "GitHub Copilot CLI 1.0.102." and an update hint
			for _, f := range strings.Fields(out) {
				if v := strings.TrimSuffix(f, "."); len(v) > 0 && v[0] >= '0' && v[0] <= '9' && strings.Count(v, ".") >= 1 {
					return v
				}
			}
			return ""
		},
		Launch: launch,
		Modes:  modes,
	}
}

// Args is the argv after the binary for spec.
func Args(spec transports.SessionSpec) ([]string, error) {
	args := []string{"--acp"}
	if spec.Model != "" {
		args = append(args, "--model", spec.Model)
	}
	if spec.Effort != "" {
		e, ok := effortMap[spec.Effort]
		if !ok {
			return nil, messages.FieldError(messages.OpStart, "effort", "copilot has no effort %q", spec.Effort)
		}
		args = append(args, "--reasoning-effort", e)
	}
	return args, nil
}

func launch(spec transports.SessionSpec, scratch string) ([]string, []string, error) {
	args, err := Args(spec)
	if err != nil {
		return nil, nil, err
	}
	return args, []string{"COPILOT_AUTO_UPDATE=false"}, nil
}

func descriptor() messages.Descriptor {
	return messages.Descriptor{
		ID:             ID,
		DisplayName:    "GitHub Copilot CLI",
		ProcessModel:   "one persistent `copilot --acp` process per session",
		Protocol:       "Agent Client Protocol (JSON-RPC 2.0 over stdio)",
		Granularity:    messages.GranularityStream,
		ClarifySupport: true,
		HonorsAllowed:  false,
		Resume:         messages.ResumeNative,
		ModelSelection: messages.ModelPerSession,
		EffortSupport:  messages.EffortAtStart,
		EffortMap:      maps.Clone(effortMap),
		PostureMap: map[messages.Posture]string{
			messages.PosturePlan:        "mode plan",
			messages.PostureDefault:     "mode agent, asks",
			messages.PostureAcceptEdits: "mode agent, edits allowed",
			messages.PostureFull:        "mode agent, all allowed",
		},
		EditToolNames: acp.EditToolNames(),
		Live: messages.LiveControls{
			Interrupt:  true,
			SetPosture: true,
			GuideModes: []messages.GuideMode{messages.GuideQueue, messages.GuideInterrupt},
		},
		Cost: messages.CostSubscription,
		Strengths: []string{
			"streams text, tool calls and results over ACP",
			"asks before shell commands and edits (clarifications answered mid-turn)",
			"runs offline against any OpenAI-compatible server (BYOK)",
		},
		Weaknesses: []string{
			"effort and model are set at start only",
			"a deny's reason reaches the agent with the next prompt (ACP has no field for it)",
			"allowedTools cannot be honoured: the posture is the boundary",
		},
		BriefingNotes: "GitHub Copilot CLI runs as one persistent `copilot --acp` process per session. Allow-all " +
			"stays off, so each gated call passes the workspace gate and the posture: plan selects Copilot's " +
			"plan mode; acceptEdits allows edits inside the workspace; full allows every call inside it. " +
			"Model (--model) and effort (--reasoning-effort) are set at start. Verified with Copilot CLI " + PinnedVersion + ".",
		ExternalAttach: &messages.ExternalAttach{CommandTemplate: "copilot --resume {sessionId}"},
		CLIVersion:     PinnedVersion,
		// the CLI's own state, writable inside the Landlock confinement
		Containment: &messages.Containment{ListsHome: true, StateDirs: []string{"~/.copilot", "~/.cache/copilot", "~/.config/github-copilot"}},
	}
}
