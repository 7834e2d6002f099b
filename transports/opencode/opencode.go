package opencode

import (
	"encoding/json"
	"maps"
	"strings"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/subprocess"
)

// ID is the backend id.
const ID = "opencode"

// PinnedVersion is the opencode-ai version this backend was verified
// against; CI installs exactly this one.
const PinnedVersion = "1.18.33"

// EnvBinary names the opencode executable (CI sets it to the pinned
// install); else `opencode` is looked up on PATH.
const EnvBinary = "CODESESSION_OPENCODE_BIN"

// EnvConfig holds a JSON object of opencode configuration (such as a
// provider) that the session's config is built on.
const EnvConfig = "CODESESSION_OPENCODE_CONFIG"

// modes: opencode offers its agents as the "mode" config option.
var modes = map[messages.Posture]string{
	messages.PosturePlan:        "plan",
	messages.PostureDefault:     "build",
	messages.PostureAcceptEdits: "build",
	messages.PostureFull:        "build",
}

// New returns the opencode transport.
func New(opts ...acp.Option) *acp.Transport { return acp.New(Agent(), opts...) }

// Agent is opencode as the ACP client drives it.
func Agent() acp.Agent {
	return acp.Agent{
		Descriptor:   descriptor(),
		Command:      "opencode",
		EnvBinary:    EnvBinary,
		Package:      "opencode-ai",
		Install:      "npm install opencode-ai@" + PinnedVersion,
		ParseVersion: func(out string) string { return strings.TrimPrefix(subprocess.LastField(out), "v") },
		Launch:       launch,
		Documented:   []string{"OPENCODE_*"},
		Modes:        modes,
	}
}

// Config returns the session's opencode configuration: base (the caller's
// CODESESSION_OPENCODE_CONFIG) with every gated tool set to ask, no
// autoupdate, no sharing, the model, and skillPaths added to skills.paths
// (opencode scans each for <name>/SKILL.md: its native skills, from the
// session's own config rather than the user's config dir).
func Config(base json.RawMessage, model string, skillPaths ...string) (json.RawMessage, error) {
	cfg := map[string]any{}
	if len(strings.TrimSpace(string(base))) > 0 {
		if err := json.Unmarshal(base, &cfg); err != nil || cfg == nil {
			return nil, messages.FieldError(messages.OpStart, "env", "%s is not a JSON object: %v", EnvConfig, err)
		}
	}
	cfg["permission"] = map[string]any{"edit": "ask", "bash": "ask", "webfetch": "ask", "external_directory": "ask"}
	cfg["autoupdate"] = false
	cfg["share"] = "disabled"
	if model != "" {
		if !strings.Contains(model, "/") {
			return nil, messages.FieldError(messages.OpStart, "model", "opencode names a model provider/model, got %q", model)
		}
		cfg["model"] = model
	}
	if len(skillPaths) > 0 {
		skills, _ := cfg["skills"].(map[string]any)
		if skills == nil {
			skills = map[string]any{}
		}
		paths, _ := skills["paths"].([]any)
		for _, p := range skillPaths {
			paths = append(paths, p)
		}
		skills["paths"] = paths
		cfg["skills"] = skills
	}
	return json.Marshal(cfg)
}

// effortMap: opencode's reasoningEffort model option (OpenAI's levels;
// max is OpenAI's top, xhigh, as for codex).
var effortMap = map[messages.Effort]string{
	messages.EffortLow: "low", messages.EffortMedium: "medium", messages.EffortHigh: "high", messages.EffortMax: "xhigh",
}

// effortAgents are the opencode agents a session's effort applies to: the
// two modes a posture selects and the built-in subagents.
var effortAgents = []string{"build", "plan", "general", "explore"}

// WithEffort sets effort in cfg (a session's configuration, from Config)
// as each agent's reasoningEffort option, which opencode merges into the
// model's provider options for every request of that agent (Chat
// Completions: reasoning_effort). `opencode acp` has no --variant, and a
// model's variants (its ACP "effort" option) exist only for models opencode
// knows to reason; the agents' options reach any model. An agent's own
// options in cfg are kept beside it.
func WithEffort(cfg json.RawMessage, effort messages.Effort) (json.RawMessage, error) {
	if effort == "" {
		return cfg, nil
	}
	e, ok := effortMap[effort]
	if !ok {
		return nil, messages.FieldError(messages.OpStart, "effort", "opencode has no effort %q", effort)
	}
	m := map[string]any{}
	if err := json.Unmarshal(cfg, &m); err != nil {
		return nil, messages.FieldError(messages.OpStart, "env", "%s is not a JSON object: %v", EnvConfig, err)
	}
	agents, _ := m["agent"].(map[string]any)
	if agents == nil {
		agents = map[string]any{}
	}
	for _, name := range effortAgents {
		a, _ := agents[name].(map[string]any)
		if a == nil {
			a = map[string]any{}
		}
		opts, _ := a["options"].(map[string]any)
		if opts == nil {
			opts = map[string]any{}
		}
		opts["reasoningEffort"] = e
		a["options"] = opts
		agents[name] = a
	}
	m["agent"] = agents
	return json.Marshal(m)
}

func launch(spec transports.SessionSpec, scratch string) ([]string, []string, error) {
	cfg, err := Config(json.RawMessage(subprocess.EnvValue(spec.Env, EnvConfig)), spec.Model, SkillPaths(spec)...)
	if err != nil {
		return nil, nil, err
	}
	if cfg, err = WithEffort(cfg, spec.Effort); err != nil {
		return nil, nil, err
	}
	env := []string{
		"OPENCODE_CONFIG_CONTENT=" + string(cfg),
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
	}
	return []string{"acp", "--cwd", spec.Cwd}, env, nil
}

func descriptor() messages.Descriptor {
	return messages.Descriptor{
		ID:             ID,
		DisplayName:    "OpenCode",
		ProcessModel:   "one persistent `opencode acp` process per session",
		Protocol:       "Agent Client Protocol (JSON-RPC 2.0 over stdio)",
		Granularity:    messages.GranularityStream,
		ClarifySupport: true,
		HonorsAllowed:  false,
		Resume:         messages.ResumeNative,
		ModelSelection: messages.ModelPerSession,
		EffortSupport:  messages.EffortAtStart,
		EffortMap:      maps.Clone(effortMap),
		PostureMap: map[messages.Posture]string{
			messages.PosturePlan:        "mode plan (read-only)",
			messages.PostureDefault:     "mode build, asks",
			messages.PostureAcceptEdits: "mode build, edits allowed",
			messages.PostureFull:        "mode build, all allowed",
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
			"any provider opencode supports, named provider/model",
		},
		Weaknesses: []string{
			"effort and model are set at start only; the effort is the agents' reasoningEffort option, which OpenAI-style providers take (reasoning_effort)",
			"a deny's reason reaches the agent with the next prompt (ACP has no field for it)",
			"allowedTools cannot be honoured: the posture is the boundary",
		},
		BriefingNotes: "OpenCode runs as one persistent `opencode acp` process per session, with --cwd set to the " +
			"session's directory. Its per-session configuration sets edits, shell and fetch to ask, so each " +
			"call passes the workspace gate and the posture: plan selects opencode's read-only plan agent; " +
			"acceptEdits allows edits inside the workspace; full allows every call inside it. The model is " +
			"provider/model, set at start; an effort is set at start as the agents' reasoningEffort option " +
			"(low, medium, high; max is xhigh). Verified with opencode " + PinnedVersion + ".",
		// the project positional is required: without it opencode opens
		// the session in whatever directory the shell is in (a template
		// with {cwd} is refused for a record without a cwd)
		ExternalAttach: &messages.ExternalAttach{CommandTemplate: "opencode {cwd} --session {sessionId}"},
		CLIVersion:     PinnedVersion,
		// the CLI's own state, writable inside the Landlock confinement
		Containment: &messages.Containment{StateDirs: []string{"~/.local/share/opencode", "~/.local/state/opencode", "~/.cache/opencode", "~/.config/opencode"}},
	}
}

// SkillPaths are the skill directories of spec's provisioning plan, for
// Config (none without skills).
func SkillPaths(spec transports.SessionSpec) []string {
	if spec.Provision == nil || spec.Provision.SkillsDir == "" {
		return nil
	}
	return []string{spec.Provision.SkillsDir}
}
