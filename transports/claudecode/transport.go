package claudecode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/gate"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/subprocess"
	"github.com/codesession/codesession/transports/warmpool"
)

// EnvBinary names the claude executable when no WithBinary option is given
// (CI sets it to the pinned install); else `claude` is looked up on PATH.
const EnvBinary = "CODESESSION_CLAUDE_BIN"

// Defaults of the options.
const (
	DefaultOutputCap      = 64 << 10
	DefaultLineCap        = 16 << 20
	DefaultControlTimeout = 15 * time.Second
	// DefaultStartTimeout bounds the initialize handshake once the CLI has
	// a boot slot. It only stops a hang: on a loaded two-core machine a
	// healthy boot took over a minute.
	DefaultStartTimeout  = 3 * time.Minute
	DefaultSettleTimeout = 2 * time.Second
	DefaultProbeTimeout  = 10 * time.Second
	// DefaultMaxBooting is how many CLIs may be between spawn and the end of
	// their initialize handshake at once, per core (at least 2); further
	// starts queue. A boot is about a second of CPU for node, so twenty at
	// once on two cores made every one of them late.
	DefaultMaxBooting = 1
)

// DefaultInterruptDeadlines: after an interrupt request the turn gets
// Grace to end; then the process group gets SIGINT, SIGTERM after AfterINT,
// and SIGKILL after AfterTERM.
var DefaultInterruptDeadlines = InterruptDeadlines{Grace: 5 * time.Second, AfterINT: 3 * time.Second, AfterTERM: 3 * time.Second}

// InterruptDeadlines are the escalation steps of an interrupt.
type InterruptDeadlines struct {
	Grace, AfterINT, AfterTERM time.Duration
}

// Transport is the claude-code backend. It is safe for concurrent use;
// each Open starts an independent process.
type Transport struct {
	binary                             string
	outputCap                          int
	lineCap                            int
	controlTimeout                     time.Duration
	startTimeout                       time.Duration
	settle                             time.Duration
	deadlines                          InterruptDeadlines
	env                                []string
	trace                              func(readAt time.Time, ev messages.Event)
	booting                            chan struct{} // a slot per CLI in its initialize handshake
	*warmpool.Slot[warmKey, *warmProc]               // the warm pool (pool.go)
}

var _ transports.Transport = (*Transport)(nil)

// Option configures a Transport.
type Option func(*Transport)

// WithBinary runs this claude executable.
func WithBinary(path string) Option { return func(t *Transport) { t.binary = path } }

// WithOutputCap caps each tool result's output at n bytes (reported with
// Truncated and OriginalBytes when it fires).
func WithOutputCap(n int) Option {
	return func(t *Transport) {
		if n > 0 {
			t.outputCap = n
		}
	}
}

// WithLineCap caps one stdout line at n bytes: a longer line is dropped and
// reported as an EvError; the stream goes on.
func WithLineCap(n int) Option {
	return func(t *Transport) {
		if n > 0 {
			t.lineCap = n
		}
	}
}

// WithControlTimeout bounds each control request (set_model,
// set_permission_mode, interrupt's acknowledgement).
func WithControlTimeout(d time.Duration) Option {
	return func(t *Transport) {
		if d > 0 {
			t.controlTimeout = d
		}
	}
}

// WithStartTimeout bounds the initialize handshake in Open.
func WithStartTimeout(d time.Duration) Option {
	return func(t *Transport) {
		if d > 0 {
			t.startTimeout = d
		}
	}
}

// WithMaxBooting bounds how many CLIs boot at once (default
// DefaultMaxBooting); Open waits for a slot, bounded by its context only.
func WithMaxBooting(n int) Option {
	return func(t *Transport) {
		if n > 0 {
			t.booting = make(chan struct{}, n)
		}
	}
}

// WithInterruptDeadlines sets the interrupt escalation steps.
func WithInterruptDeadlines(d InterruptDeadlines) Option {
	return func(t *Transport) { t.deadlines = d }
}

// WithEnv adds KEY=VALUE entries to every session's environment, below
// SessionSpec.Env.
func WithEnv(kv ...string) Option { return func(t *Transport) { t.env = append(t.env, kv...) } }

// New returns the claude-code transport.
func New(opts ...Option) *Transport {
	t := &Transport{outputCap: DefaultOutputCap, lineCap: DefaultLineCap, controlTimeout: DefaultControlTimeout,
		startTimeout: DefaultStartTimeout, settle: DefaultSettleTimeout, deadlines: DefaultInterruptDeadlines,
		booting: make(chan struct{}, max(2, DefaultMaxBooting*runtime.NumCPU()))}
	t.Slot = newWarmSlot()
	for _, o := range opts {
		o(t)
	}
	return t
}

// Descriptor returns the capability descriptor.
func (t *Transport) Descriptor() transports.Descriptor { return descriptor() }

// Binary returns the claude executable the transport would run with the
// given extra environment (EnvBinary in env wins over the process's own),
// or an error saying why there is none.
func (t *Transport) Binary(env []string) (string, error) {
	if t.binary != "" {
		return t.binary, nil
	}
	if b := subprocess.EnvValue(env, EnvBinary); b != "" {
		return b, nil
	}
	if b := os.Getenv(EnvBinary); b != "" {
		return b, nil
	}
	b, err := exec.LookPath("claude")
	if err != nil {
		return "", fmt.Errorf("the claude CLI is not installed here: no %s and no claude on PATH (npm install @anthropic-ai/claude-code@%s)", EnvBinary, PinnedVersion)
	}
	return b, nil
}

// Probe runs `claude --version`, bounded by ctx and DefaultProbeTimeout.
func (t *Transport) Probe(ctx context.Context) messages.Availability {
	a := messages.Availability{CheckedAt: time.Now()}
	bin, err := t.Binary(nil)
	if err != nil {
		a.Reason = err.Error()
		return a
	}
	a.Binary = bin
	ctx, cancel := context.WithTimeout(ctx, DefaultProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = buildEnv(os.Environ(), transports.SessionSpec{}, t.env) // the allowlist, as for a session
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		switch {
		case ctx.Err() != nil:
			a.Reason = fmt.Sprintf("%s --version did not answer within %s", bin, DefaultProbeTimeout)
		default:
			a.Reason = fmt.Sprintf("%s --version failed (%v): %s", bin, err, transports.TailText(errb.Bytes(), 300))
		}
		return a
	}
	// "2.1.328 (Claude Code)"
	a.Version = firstWord(out.String())
	if a.Version == "" {
		a.Reason = bin + " --version printed nothing"
		return a
	}
	a.Available = true
	return a
}

// Open starts one claude process for the session, completes the
// initialize handshake and emits EvStarted (turn 0) with the session id:
// a fresh UUID passed as --session-id, or SessionSpec.ResumeExternalID
// passed as --resume. It fails with a *messages.Error: invalid for a bad
// spec, unsupported when the CLI is missing, internal (with the end of its
// stderr) when it exits or does not answer.
func (t *Transport) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	if sink == nil {
		return nil, messages.FieldError(messages.OpStart, "sink", "required")
	}
	if spec.Posture == "" {
		spec.Posture = messages.PostureDefault
	}
	if !spec.Posture.Valid() {
		return nil, messages.FieldError(messages.OpStart, "posture", "unknown posture %q", spec.Posture)
	}
	if spec.Effort != "" && !spec.Effort.Valid() {
		return nil, messages.FieldError(messages.OpStart, "effort", "unknown effort %q", spec.Effort)
	}
	if spec.Cwd != "" {
		if fi, err := os.Stat(spec.Cwd); err != nil || !fi.IsDir() {
			return nil, messages.FieldError(messages.OpStart, "cwd", "%q is not a directory", spec.Cwd)
		}
	}
	if err := t.CheckEnv(spec); err != nil {
		return nil, err
	}
	bin, err := t.Binary(spec.Env)
	if err != nil {
		return nil, messages.Wrap(messages.CodeUnsupported, messages.OpStart, err, err.Error())
	}
	ws, err := gate.NewWorkspace(firstNonEmpty(spec.Cwd, "."))
	if err != nil {
		return nil, &messages.Error{Code: messages.CodeInvalid, Op: messages.OpStart, Field: "cwd", Message: err.Error(), Err: err}
	}
	if spec.Home != "" {
		if err := os.MkdirAll(spec.Home, 0o700); err != nil {
			return nil, messages.Wrap(messages.CodeInvalid, messages.OpStart, err, "cannot create the session's HOME "+spec.Home)
		}
	}
	warm, refill, ok := t.adoptWarm(ctx, spec, sink, bin, ws)
	if ok {
		refillAfterFirstTurn(warm, refill)
		return warm, nil
	}
	ext := spec.ResumeExternalID
	if ext == "" {
		ext = transports.NewUUID()
	}
	s := newSession(t, spec, sink, bin, ext, ws)
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	refillAfterFirstTurn(s, refill)
	return s, nil
}

// buildArgs is the argv after the binary: new
// sessions get --session-id, resumed ones --resume.
func buildArgs(spec transports.SessionSpec, ext string, resume bool) []string {
	args := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--include-partial-messages", // text and thinking deltas as they are generated
		// never bypassPermissions, which asks nothing: at full the CLI still
		// asks and the transport allows what the workspace gate admits
		"--permission-prompt-tool", "stdio", "--permission-mode", PermissionMode(spec.Posture)}
	if spec.Model != "" {
		args = append(args, "--model", spec.Model)
	}
	if e, ok := effortMap[spec.Effort]; ok {
		args = append(args, "--effort", e)
	}
	if spec.AllowedTools != nil {
		// --allowedTools: these run without asking; --tools: the built-in
		// tools the model is offered at all (the ceiling).
		args = append(args, "--allowedTools", strings.Join(spec.AllowedTools, ","), "--tools", strings.Join(builtinTools(spec.AllowedTools), ","))
	}
	if spec.AppendSystemPrompt != "" {
		args = append(args, "--append-system-prompt", spec.AppendSystemPrompt)
	}
	if p := spec.Provision; p != nil {
		// the session's capability plan (actors/curation): its MCP servers
		// and its skills as a plugin, both under the session's provision dir
		if p.ConfigFile != "" {
			args = append(args, "--mcp-config", p.ConfigFile)
		}
		if p.SkillsDir != "" {
			args = append(args, "--plugin-dir", p.SkillsDir)
		}
	}
	if resume {
		args = append(args, "--resume", ext)
	} else {
		args = append(args, "--session-id", ext)
	}
	return args
}

// LaunchArgv is the argv a new session of spec starts with (the launch
// manifest records it); the session id is a placeholder until Open.
func (t *Transport) LaunchArgv(spec transports.SessionSpec) []string {
	bin, err := t.Binary(spec.Env)
	if err != nil {
		bin = "claude"
	}
	return append([]string{bin}, buildArgs(spec, "<session-id>", false)...)
}

// transcriptExists reports whether Claude Code keeps a transcript of the
// session id under the HOME the process gets ($CLAUDE_CONFIG_DIR, else
// $HOME/.claude, then projects/<encoded cwd>/<id>.jsonl). known is false
// when the place cannot be told.
func transcriptExists(env []string, id string) (exists, known bool) {
	dir := subprocess.EnvValue(env, "CLAUDE_CONFIG_DIR")
	if dir == "" {
		home := subprocess.EnvValue(env, "HOME")
		if home == "" {
			return false, false
		}
		dir = filepath.Join(home, ".claude")
	}
	m, err := filepath.Glob(filepath.Join(dir, "projects", "*", id+".jsonl"))
	if err != nil {
		return false, false
	}
	return len(m) > 0, true
}

// builtinTools are the tool names of allowedTools entries ("Bash(git *)"
// is Bash), MCP tools left out, each once.
func builtinTools(allowed []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range allowed {
		name, _, _ := strings.Cut(a, "(")
		name = strings.TrimSpace(name)
		if name == "" || strings.HasPrefix(name, "mcp__") || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, name)
	}
	return out
}

// documentedEnv are Claude Code's own variables (its endpoint, login and
// settings): the environment policy takes them from the daemon's
// environment, and ANTHROPIC_AUTH_TOKEN or CLAUDE_CODE_OAUTH_TOKEN there is
// claude-code's login, not a founder credential.
var documentedEnv = []string{"ANTHROPIC_*", "CLAUDE_CODE_*", "CLAUDE_CONFIG_DIR", "DISABLE_*", "BASH_DEFAULT_TIMEOUT_MS",
	"BASH_MAX_TIMEOUT_MS", "MAX_THINKING_TOKENS", "MCP_TIMEOUT", "MCP_TOOL_TIMEOUT", "IS_SANDBOX"}

// scrubbed are variables a claude process never inherits even when they
// match documentedEnv: the markers of a surrounding Claude Code session.
var scrubbed = map[string]bool{"CLAUDECODE": true, "CLAUDE_CODE_ENTRYPOINT": true, "CLAUDE_CODE_SSE_PORT": true}

// envPolicy is the claude-code environment policy of a session.
func envPolicy(spec transports.SessionSpec) prockit.EnvPolicy {
	return prockit.EnvPolicy{Backend: ID, Documented: documentedEnv, Pass: spec.PassEnv}
}

// CheckEnv refuses a start when founder credentials are in the daemon's
// environment and not named for this backend (proc.EnvPolicy.Check).
func (t *Transport) CheckEnv(spec transports.SessionSpec) error {
	return transports.CredentialRefusal(envPolicy(spec).Check(os.Environ(), append(append([]string{}, t.env...), spec.Env...)))
}

// buildEnv is the process environment: the environment policy's allowlist
// of the caller's environment (base), without the markers of a
// surrounding session; HOME; the host defaults; then the transport's and
// the session's extra entries, which win.
func buildEnv(base []string, spec transports.SessionSpec, extra []string) []string {
	hostDefaults := []string{
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_SDK_READS_SESSION_STATE=1",
	}
	return subprocess.Environ(envPolicy(spec).Build(base, nil), scrubbed, spec.Home, hostDefaults, extra, spec.Env)
}

var errExited = errors.New("claude exited")
