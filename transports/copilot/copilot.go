package copilot

import (
	"fmt"
	"slices"
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

// modeURL starts copilot's mode ids.
const modeURL = "https://agentclientprotocol.com/protocol/session-modes#"

// effortMap is seed 003's copilot row: --reasoning-effort, 1:1.
var effortMap = map[messages.Effort]string{
	messages.EffortLow: "low", messages.EffortMedium: "medium", messages.EffortHigh: "high", messages.EffortMax: "max",
}

// toolNames maps an allowedTools name (Claude Code's, the native
// backend's, any case) to the copilot 1.0.102 tools it stands for, as its
// ACP mode offers them to the model (seen in the model request's tools).
// The shell brings its companions (reading, stopping and listing its
// background commands); the subagent tool its own.
var toolNames = map[string][]string{
	"read": {"view"}, "ls": {"view"}, "write": {"create"}, "edit": {"edit"}, "multiedit": {"edit"},
	"glob": {"glob"}, "grep": {"grep"},
	"bash": {"bash", "read_bash", "stop_bash", "list_bash"},
	"task": {"task", "read_agent", "list_agents", "write_agent"},
}

// copilotTools are copilot's own tool names, taken as they are.
var copilotTools = []string{"view", "create", "edit", "glob", "grep", "bash", "read_bash", "stop_bash", "list_bash",
	"task", "read_agent", "list_agents", "write_agent", "sql"}

// AvailableTools is the --available-tools list for allowed (a session's
// allowedTools): each name mapped to copilot's tools, in order, without
// repeats. A name with no copilot equivalent (a pattern such as
// "Bash(git *)", whose narrowing copilot's list cannot keep, an MCP tool,
// a tool copilot lacks) and an empty list (copilot reads an empty
// --available-tools as every tool) are refused: unsupported, naming the
// tool.
func AvailableTools(allowed []string) ([]string, error) {
	if len(allowed) == 0 {
		return nil, unsupportedTool(
			"copilot cannot run with no tools: an empty --available-tools offers every tool")
	}
	var out []string
	for _, name := range allowed {
		mapped, ok := toolNames[strings.ToLower(name)]
		if !ok && slices.Contains(copilotTools, name) {
			mapped, ok = []string{name}, true
		}
		if !ok {
			return nil, unsupportedTool(
				"copilot has no tool for %q (it takes Read, Write, Edit, Glob, Grep, LS, Bash, Task or its own names: %s)",
				name, strings.Join(copilotTools, ", "))
		}
		for _, m := range mapped {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

func unsupportedTool(format string, args ...any) *messages.Error {
	return &messages.Error{Code: messages.CodeUnsupported, Op: messages.OpStart, Field: "allowedTools", Message: fmt.Sprintf(format, args...)}
}

// New returns the copilot transport.
func New(opts ...acp.Option) *acp.Transport { return acp.New(Agent(), opts...) }

// Agent is copilot as the ACP client drives it.
func Agent() acp.Agent {
	return acp.Profile{
		ID: ID, DisplayName: "GitHub Copilot CLI",
		Command: "copilot", Invocation: "--acp", EnvBinary: EnvBinary,
		Package: "@github/copilot", Version: PinnedVersion,
		PlanMode: "plan", WorkMode: "agent", ModePrefix: modeURL, PlanLabel: "mode plan",
		Efforts:       effortMap,
		EffortNote:    "effort and model are set at start only",
		HonorsAllowed: true,
		AllowedNote:   "allowedTools is set at start only (--available-tools), by tool: a pattern such as Bash(git *), an MCP tool and an empty list are refused",
		Cost:          messages.CostSubscription,
		ParseVersion: func(out string) string {
			// "GitHub Copilot CLI 1.0.102." and an update hint
			for _, f := range strings.Fields(out) {
				if v := strings.TrimSuffix(f, "."); len(v) > 0 && v[0] >= '0' && v[0] <= '9' && strings.Count(v, ".") >= 1 {
					return v
				}
			}
			return ""
		},
		Launch:    launch,
		Strengths: []string{"runs offline against any OpenAI-compatible server (BYOK)"},
		Briefing: "GitHub Copilot CLI runs as one persistent `copilot --acp` process per session. Allow-all " +
			"stays off, so each gated call passes the workspace gate and the posture: plan selects Copilot's " +
			"plan mode; acceptEdits allows edits inside the workspace; full allows every call inside it. " +
			"Model (--model), effort (--reasoning-effort) and allowedTools (--available-tools: Read→view, Write→create, " +
			"Edit→edit, Glob, Grep, LS→view, Bash→bash, Task→task, or copilot's own names) are set at start. Verified with Copilot CLI " + PinnedVersion + ".",
		Attach: "copilot --resume {sessionId}",
		// the CLI's own state, writable inside the Landlock confinement
		Containment: &messages.Containment{ListsHome: true, StateDirs: []string{"~/.copilot", "~/.cache/copilot", "~/.config/github-copilot"}},
	}.Agent()
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
	if spec.AllowedTools != nil {
		tools, err := AvailableTools(spec.AllowedTools)
		if err != nil {
			return nil, err
		}
		args = append(args, "--available-tools="+strings.Join(tools, ","))
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
