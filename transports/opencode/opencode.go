package opencode

import (
	"encoding/json"
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

// New returns the opencode transport.
func New(opts ...acp.Option) *acp.Transport { return acp.New(Agent(), opts...) }

// Agent is opencode as the ACP client drives it: its agents, offered as
// the "mode" config option, are the modes.
func Agent() acp.Agent {
	return acp.Profile{
		ID: ID, DisplayName: "OpenCode",
		Command: "opencode", Invocation: "acp", EnvBinary: EnvBinary,
		Package: "opencode-ai", Version: PinnedVersion,
		PlanMode: "plan", WorkMode: "build",
		Efforts:    effortMap,
		EffortNote: "effort and model are set at start only; the effort is the agents' reasoningEffort option, which OpenAI-style providers take (reasoning_effort)",
		Launch:     LaunchAs("OPENCODE", EnvConfig),
		Documented: []string{"OPENCODE_*"},
		Strengths:  []string{"any provider opencode supports, named provider/model"},
		Briefing: "OpenCode runs as one persistent `opencode acp` process per session, with --cwd set to the " +
			"session's directory. Its per-session configuration sets edits, shell and fetch to ask, so each " +
			"call passes the workspace gate and the posture: plan selects opencode's read-only plan agent; " +
			"acceptEdits allows edits inside the workspace; full allows every call inside it. The model is " +
			"provider/model, set at start; an effort is set at start as the agents' reasoningEffort option " +
			"(low, medium, high; max is xhigh). Verified with opencode " + PinnedVersion + ".",
		// the project positional is required: without it opencode opens
		// the session in whatever directory the shell is in (a template
		// with {cwd} is refused for a record without a cwd)
		Attach: "opencode {cwd} --session {sessionId}",
		// the CLI's own state, writable inside the Landlock confinement
		Containment: &messages.Containment{StateDirs: []string{"~/.local/share/opencode", "~/.local/state/opencode", "~/.cache/opencode", "~/.config/opencode"}},
	}.Agent()
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

// LaunchAs is the launch of opencode or a CLI built from it (kilo) whose
// variables are named prefix_*: the session's configuration (Config from
// the JSON in envConfig, the model, the skills, the effort) in
// prefix_CONFIG_CONTENT, no autoupdate, no models fetch, no LSP download,
// plus prefix_<extra> for each extra ("DISABLE_SHARE=1"); `acp --cwd`.
func LaunchAs(prefix, envConfig string, extra ...string) func(transports.SessionSpec, string) ([]string, []string, error) {
	return func(spec transports.SessionSpec, scratch string) ([]string, []string, error) {
		cfg, err := Config(json.RawMessage(subprocess.EnvValue(spec.Env, envConfig)), spec.Model, SkillPaths(spec)...)
		if err != nil {
			return nil, nil, err
		}
		if cfg, err = WithEffort(cfg, spec.Effort); err != nil {
			return nil, nil, err
		}
		env := []string{prefix + "_CONFIG_CONTENT=" + string(cfg)}
		for _, kv := range append([]string{"DISABLE_AUTOUPDATE=1", "DISABLE_MODELS_FETCH=1", "DISABLE_LSP_DOWNLOAD=1"}, extra...) {
			env = append(env, prefix+"_"+kv)
		}
		return []string{"acp", "--cwd", spec.Cwd}, env, nil
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
