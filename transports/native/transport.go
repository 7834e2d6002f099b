package native

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/gate"
	"github.com/codesession/codesession/transports/proc"
)

// ID is the native backend's id.
const ID = "native"

// Version is what Probe reports.
const Version = "native/1"

// The variables of the backend environment (SessionSpec.Env, then the
// process environment) a native session reads.
const (
	EnvProvider  = "CODESESSION_NATIVE_PROVIDER"   // anthropic | openai-responses | openai-chat
	EnvModel     = "CODESESSION_NATIVE_MODEL"      // the model when the session names none
	EnvMaxRounds = "CODESESSION_NATIVE_MAX_ROUNDS" // the per-turn round cap
	EnvPrices    = "CODESESSION_NATIVE_PRICES"     // JSON {"model": {"input": $/MTok, "output": $/MTok, ...}}

	EnvAnthropicBaseURL   = "ANTHROPIC_BASE_URL"
	EnvAnthropicAPIKey    = "ANTHROPIC_API_KEY"
	EnvAnthropicAuthToken = "ANTHROPIC_AUTH_TOKEN"
	EnvOpenAIBaseURL      = "OPENAI_BASE_URL"
	EnvOpenAIAPIKey       = "OPENAI_API_KEY"
)

// Defaults of a transport without options.
const (
	DefaultMaxRounds = 50
	DefaultMaxTokens = 16384
)

// Default models per provider, and the model classes each maps.
var (
	defaultModels = map[string]string{
		ProviderAnthropic:       "claude-sonnet-5-5",
		ProviderOpenAIResponses: "gpt-5.5",
		ProviderOpenAIChat:      "gpt-5.5",
	}
	modelClasses = map[string]map[string]string{
		ProviderAnthropic:       {"cheap": "claude-haiku-5-5", "standard": "claude-sonnet-5-5", "frontier": "claude-opus-5-5"},
		ProviderOpenAIResponses: {"cheap": "gpt-5.4-mini", "standard": "gpt-5.5", "frontier": "gpt-5.5"},
		ProviderOpenAIChat:      {"cheap": "gpt-5.4-mini", "standard": "gpt-5.5", "frontier": "gpt-5.5"},
	}
)

// classMap is the descriptor's model-class map: the default provider's
// (Anthropic) concrete models, so a class never reaches a session unresolved.
var classMap = modelClasses[ProviderAnthropic]

// providerModel is the session provider's model for model: a class name,
// or the descriptor's (Anthropic) model of a class, becomes that class's
// model of the provider the session talks to; any other name stays.
func providerModel(provider, model string) string {
	if m, ok := modelClasses[provider][model]; ok {
		return m
	}
	for class, m := range classMap {
		if m == model && model != "" {
			if pm, ok := modelClasses[provider][class]; ok {
				return pm
			}
		}
	}
	return model
}

// credentialVars never reach a bash command of the agent: the model API
// keys and the founder credentials of seed 002.
var credentialVars = []string{
	EnvAnthropicAPIKey, EnvAnthropicAuthToken, EnvOpenAIAPIKey, "ANTHROPIC_PROFILE", "ANTHROPIC_IDENTITY_TOKEN",
	"GITEA_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "SSH_AUTH_SOCK", "CODESESSION_TOKEN",
}

// Transport is the native backend: an in-process agent loop against a
// model API, with the gated toolset. It is safe for concurrent use; each
// Open starts an independent session.
type Transport struct {
	maxRounds int
	maxTokens int64
	outputCap int
	bashWall  time.Duration
	retry     RetryPolicy
	prices    map[string]Price
	lookupEnv func(string) (string, bool)
	environ   func() []string
}

var _ transports.Transport = (*Transport)(nil)

// Option configures a Transport.
type Option func(*Transport)

// WithMaxRounds sets the per-turn round cap: how many model calls one turn
// makes at most before it stops (default DefaultMaxRounds; the backend
// environment's CODESESSION_NATIVE_MAX_ROUNDS overrides it per session).
func WithMaxRounds(n int) Option {
	return func(t *Transport) {
		if n > 0 {
			t.maxRounds = n
		}
	}
}

// WithOutputCap caps each tool output at n bytes (default
// DefaultOutputCap); a cut output is reported with Truncated and
// OriginalBytes, to the model and in the events.
func WithOutputCap(n int) Option {
	return func(t *Transport) {
		if n > 0 {
			t.outputCap = n
		}
	}
}

// WithBashWallClock sets the default wall clock of one bash call.
func WithBashWallClock(d time.Duration) Option {
	return func(t *Transport) {
		if d > 0 {
			t.bashWall = d
		}
	}
}

// WithRetryPolicy replaces DefaultRetryPolicy.
func WithRetryPolicy(p RetryPolicy) Option { return func(t *Transport) { t.retry = p } }

// WithPrices sets the price table that turns usage into cost (US dollars
// per million tokens, by model name or model-name prefix). Without one,
// turns report usage and no cost.
func WithPrices(p map[string]Price) Option { return func(t *Transport) { t.prices = p } }

// WithProcessEnv sets where variables missing from SessionSpec.Env are
// looked up (default os.LookupEnv); nil looks up nothing, which tests use
// to keep the machine's keys out.
func WithProcessEnv(lookup func(string) (string, bool)) Option {
	return func(t *Transport) {
		if lookup == nil {
			lookup = func(string) (string, bool) { return "", false }
			t.environ = func() []string { return nil }
		}
		t.lookupEnv = lookup
	}
}

// New returns the native transport.
func New(opts ...Option) *Transport {
	t := &Transport{maxRounds: DefaultMaxRounds, maxTokens: DefaultMaxTokens, outputCap: DefaultOutputCap,
		bashWall: bashDefaultWall, retry: DefaultRetryPolicy, lookupEnv: os.LookupEnv, environ: os.Environ}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Descriptor returns the native backend's capability descriptor (seed 003,
// the neo row).
func (t *Transport) Descriptor() transports.Descriptor {
	return transports.Descriptor{
		ID:             ID,
		DisplayName:    "native (in-process agent loop)",
		ProcessModel:   "in-process agent loop, one model call per round",
		Protocol:       "Anthropic Messages, OpenAI Responses or Chat Completions (streaming, through the vendors' Go SDKs)",
		Granularity:    messages.GranularityPerTurn,
		ClarifySupport: true,
		HonorsAllowed:  true,
		Resume:         messages.ResumeNone,
		ModelSelection: messages.ModelPerSession,
		EffortSupport:  messages.EffortAtStart,
		// classes resolve to the Anthropic models; an OpenAI session gets its
		// provider's model of the same class (providerModel)
		ModelClassMap: maps.Clone(classMap),
		EffortMap: map[messages.Effort]string{
			messages.EffortLow: "low", messages.EffortMedium: "medium",
			messages.EffortHigh: "high", messages.EffortMax: "max",
		},
		PostureMap: map[messages.Posture]string{
			messages.PosturePlan: "plan (read-only tools)", messages.PostureDefault: "default (writes and bash ask)",
			messages.PostureAcceptEdits: "acceptEdits (bash asks)", messages.PostureFull: "bypass (everything runs)",
		},
		EditToolNames: []string{ToolWrite, ToolEdit},
		Live: messages.LiveControls{
			Interrupt:  true,
			SetPosture: true,
			GuideModes: []messages.GuideMode{messages.GuideQueue, messages.GuideInterrupt},
		},
		Cost:       messages.CostMetered,
		Strengths:  []string{"no agent CLI to install", "any Anthropic- or OpenAI-compatible endpoint", "every file path gated inside the workspace"},
		Weaknesses: []string{"a small toolset (read, write, edit, glob, grep, ls, bash)", "no resume: a new session starts a new conversation"},
		BriefingNotes: "The in-process loop: the model sees only the brief, the guidance and its tools' results. " +
			"Tools: read, write, edit (exact-string replace), glob, grep, ls, bash. Every path must stay inside the " +
			"working directory after symlinks. bash runs with writes confined to the working directory and its own " +
			"TMPDIR where the kernel has Landlock (reads anywhere still work); /tmp itself is not writable. The endpoint comes from the backend environment: ANTHROPIC_BASE_URL and " +
			"ANTHROPIC_API_KEY, or OPENAI_BASE_URL and OPENAI_API_KEY, with CODESESSION_NATIVE_PROVIDER=" +
			"anthropic|openai-responses|openai-chat.",
		CLIVersion: Version,
		Gate:       messages.GateTools,
	}
}

// Probe reports the native backend as available: it runs in-process and
// needs nothing installed. Whether its endpoint answers is known only at
// the first turn, where a failure is a clear error naming the endpoint.
func (t *Transport) Probe(ctx context.Context) messages.Availability {
	return messages.Availability{Available: true, Version: Version, CheckedAt: time.Now()}
}

// envLookup reads the backend environment: the last KEY=VALUE of spec.Env,
// else the process environment.
func (t *Transport) envLookup(env []string) func(string) string {
	return func(key string) string {
		v, found := "", false
		for _, kv := range env {
			if k, val, ok := strings.Cut(kv, "="); ok && k == key {
				v, found = val, true
			}
		}
		if found {
			return v
		}
		if t.lookupEnv != nil {
			if v, ok := t.lookupEnv(key); ok {
				return v
			}
		}
		return ""
	}
}

// Open starts a native session: it resolves the workspace, the provider
// and its endpoint from the backend environment, and the model. It returns
// a *messages.Error with code invalid for a bad spec or a missing key, or
// unsupported for a resume (the conversation lives in the session only).
func (t *Transport) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	if sink == nil {
		return nil, messages.FieldError(messages.OpStart, "sink", "required")
	}
	if err := ctx.Err(); err != nil {
		return nil, messages.Wrap(messages.CodeTimeout, messages.OpStart, err, "opening the native session was cancelled")
	}
	if spec.ResumeExternalID != "" {
		return nil, messages.Errorf(messages.CodeUnsupported, messages.OpStart,
			"the native backend cannot resume %q: its conversation lives in the session only (resume none)", spec.ResumeExternalID)
	}
	posture := spec.Posture
	if posture == "" {
		posture = messages.PostureDefault
	}
	if !posture.Valid() {
		return nil, messages.FieldError(messages.OpStart, "posture", "unknown posture %q", spec.Posture)
	}
	if spec.Effort != "" && !spec.Effort.Valid() {
		return nil, messages.FieldError(messages.OpStart, "effort", "unknown effort %q", spec.Effort)
	}
	for _, name := range spec.AllowedTools {
		if _, ok := tools[name]; !ok && !strings.HasPrefix(name, "mcp__") {
			return nil, messages.FieldError(messages.OpStart, "allowedTools", "the native backend has no tool %q (it has %s)", name, strings.Join(ToolNames(), ", "))
		}
	}
	ws, err := gate.NewWorkspace(spec.Cwd)
	if err != nil {
		return nil, &messages.Error{Code: messages.CodeInvalid, Op: messages.OpStart, Field: "cwd", Message: err.Error(), Err: err}
	}
	if err := t.CheckEnv(spec); err != nil {
		return nil, err
	}
	get := t.envLookup(spec.Env)
	// Each session has its own connections, closed with it.
	httpc := sessionHTTPClient()
	prov, err := newProvider(get, httpc)
	if err != nil {
		return nil, err
	}
	model := spec.Model
	model = providerModel(prov.name(), model)
	if model == "" {
		model = get(EnvModel)
	}
	if model == "" {
		model = defaultModels[prov.name()]
	}
	maxRounds := t.maxRounds
	if v := get(EnvMaxRounds); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, messages.FieldError(messages.OpStart, "env."+EnvMaxRounds, "want a positive number of rounds, got %q", v)
		}
		maxRounds = n
	}
	prices := t.prices
	if v := get(EnvPrices); v != "" {
		var p map[string]Price
		if err := json.Unmarshal([]byte(v), &p); err != nil {
			return nil, messages.FieldError(messages.OpStart, "env."+EnvPrices, "want JSON {\"model\": {\"input\": ..., \"output\": ...}} in dollars per million tokens: %v", err)
		}
		prices = p
	}
	var allowed []string
	if spec.AllowedTools != nil {
		allowed = append([]string{}, spec.AllowedTools...)
	}
	tools, err := t.toolEnv(ws, spec)
	if err != nil {
		return nil, err
	}
	mcpt, mcpWarnings := openMCP(ctx, spec.Provision, &tools)
	s := newSession(sessionConfig{
		mcp:         mcpt,
		mcpWarnings: mcpWarnings,
		prov:        prov,
		httpc:       httpc,
		sink:        sink,
		externalID:  "native-" + transports.RandomHex(8),
		model:       model,
		effort:      spec.Effort,
		system:      systemPrompt(ws, spec.AppendSystemPrompt),
		allowed:     allowed,
		maxRounds:   maxRounds,
		maxTokens:   t.maxTokens,
		retry:       t.retry,
		prices:      prices,
		tools:       tools,
	}, posture)
	go s.run()
	return s, nil
}

// systemPrompt tells the model where it works and how its tools behave.
func systemPrompt(ws gate.Workspace, appendix string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are a coding agent working in the repository at %s.\n", ws.Given())
	b.WriteString("Use the tools to read, search and change files and to run commands. Paths are relative to the " +
		"repository; a path that leaves it (through .. or a symlink) is refused. Edit with exact-string " +
		"replacement: read a file first and copy the text to replace exactly. Some calls need the user's " +
		"permission; a refused or denied call comes back as an error result with the reason: adapt, do not retry " +
		"it unchanged. When the task is done, answer with a short summary of what you changed.\n")
	if appendix != "" {
		b.WriteString("\n" + appendix + "\n")
	}
	return b.String()
}

// documentedEnv are the native backend's own variables (its endpoint and
// settings); they configure the loop and never reach bash.
var documentedEnv = []string{"ANTHROPIC_*", "OPENAI_*", "CODESESSION_NATIVE_*"}

// ConfinesShell says the runtime launches this backend's shell (bash),
// which proc confines with Landlock.
func (t *Transport) ConfinesShell() bool { return true }

// CheckEnv refuses a start when founder credentials are in the daemon's
// environment and not named for this backend (proc.EnvPolicy.Check).
func (t *Transport) CheckEnv(spec transports.SessionSpec) error {
	pol := proc.EnvPolicy{Backend: ID, Documented: documentedEnv, Pass: spec.PassEnv}
	return transports.CredentialRefusal(pol.Check(t.environ(), spec.Env))
}

// toolEnv builds what the tools run with: bash's environment, its
// confinement and its own TMPDIR.
func (t *Transport) toolEnv(ws gate.Workspace, spec transports.SessionSpec) (toolEnv, error) {
	// recorded with the session's processes: a runtime that dies leaves
	// it to the next boot's sweep
	tmp, removeTmp, err := spec.Procs.TempDir()
	if err != nil {
		return toolEnv{}, messages.Wrap(messages.CodeInternal, messages.OpStart, err, "cannot make the session's TMPDIR")
	}
	writable := []string{ws.Real(), tmp}
	if spec.Home != "" {
		writable = append(writable, spec.Home)
	}
	env := append(bashEnv(t.environ(), spec), "TMPDIR="+tmp)
	confine := &proc.Confinement{WritableDirs: writable}
	if spec.Confine != nil {
		// the runtime's: the credential folders stay unreadable too, and
		// the session's network mode holds for bash as it does for every
		// other backend's tree (the loop's own model calls are the
		// daemon's, outside it)
		confine.ReadDenied, confine.Network = spec.Confine.ReadDenied, spec.Confine.Network
	}
	return toolEnv{ws: ws, outputCap: t.outputCap, env: env, bashWall: t.bashWall,
		procs: spec.Procs, confine: confine, tmp: tmp, removeTmp: removeTmp}, nil
}

// bashEnv is the environment of the agent's commands: the environment
// policy's allowlist of the daemon's environment and what the operator
// passed by name, then the backend environment, without the model keys and
// the loop's own settings (unless passed by name), with HOME set to
// spec.Home when given.
func bashEnv(daemon []string, spec transports.SessionSpec) []string {
	pol := proc.EnvPolicy{Backend: ID, Pass: spec.PassEnv}
	extra := append([]string{}, spec.Env...)
	if spec.Home != "" {
		extra = append(extra, "HOME="+spec.Home)
	}
	passed := map[string]bool{}
	for _, k := range spec.PassEnv {
		passed[k] = true
	}
	drop := map[string]bool{}
	for _, k := range credentialVars {
		drop[k] = !passed[k]
	}
	var out []string
	for _, kv := range pol.Build(daemon, extra) {
		k, _, _ := strings.Cut(kv, "=")
		if drop[k] || (strings.HasPrefix(k, "CODESESSION_NATIVE_") && !passed[k]) {
			continue
		}
		out = append(out, kv)
	}
	return out
}
