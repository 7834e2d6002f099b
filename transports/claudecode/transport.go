package claudecode

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/cli"
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
	DefaultOutputCap      = cli.DefaultOutputCap
	DefaultLineCap        = cli.DefaultLineCap
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
type InterruptDeadlines = cli.InterruptDeadlines

// Transport is the claude-code backend on the CLI kit (transports/cli). It
// is safe for concurrent use; each Open starts an independent process.
type Transport struct {
	cli.Base
	*warmpool.Slot[warmKey, *warmProc] // the warm pool (pool.go)
}

var (
	_ transports.Transport  = (*Transport)(nil)
	_ transports.WarmPooler = (*Transport)(nil)
)

// Option configures a Transport (the kit's options: WithBinary,
// WithOutputCap, WithLineCap, WithControlTimeout, WithStartTimeout,
// WithMaxBooting, WithInterruptDeadlines, WithEnv, WithWarmPool).
type Option = cli.Option

// The options, as the kit defines them; WithControlTimeout bounds each
// control request (set_model, set_permission_mode, interrupt's
// acknowledgement), WithStartTimeout the initialize handshake, and
// WithMaxBooting how many CLIs boot at once (default DefaultMaxBooting per
// core, at least 2).
var (
	WithBinary, WithEnv                    = cli.WithBinary, cli.WithEnv
	WithOutputCap, WithLineCap             = cli.WithOutputCap, cli.WithLineCap
	WithControlTimeout, WithStartTimeout   = cli.WithControlTimeout, cli.WithStartTimeout
	WithMaxBooting, WithInterruptDeadlines = cli.WithMaxBooting, cli.WithInterruptDeadlines
	WithWarmPool                           = cli.WithWarmPool
)

// New returns the claude-code transport.
func New(opts ...Option) *Transport {
	t := &Transport{Slot: newWarmSlot()}
	t.Base = cli.NewBase(cli.Config{
		CLI: subprocess.CLI{Name: "claude", Command: "claude", EnvVar: EnvBinary,
			Install: "npm install @anthropic-ai/claude-code@" + PinnedVersion},
		OutputCap: DefaultOutputCap, LineCap: DefaultLineCap, ControlTimeout: DefaultControlTimeout,
		StartTimeout: DefaultStartTimeout, Settle: DefaultSettleTimeout, Deadlines: DefaultInterruptDeadlines,
		Booting: make(chan struct{}, max(2, DefaultMaxBooting*runtime.NumCPU())),
		Policy:  envPolicy,
		HostDefaults: []string{
			"DISABLE_AUTOUPDATER=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"CLAUDE_CODE_SDK_READS_SESSION_STATE=1",
		},
		// "2.1.328 (Claude Code)"
		Probe: subprocess.VersionProbe{Timeout: DefaultProbeTimeout, Parse: subprocess.FirstField},
	}, descriptor, t.Slot, opts)
	return t
}

// Open starts one claude process for the session, completes the
// initialize handshake and emits EvStarted (turn 0) with the session id:
// a fresh UUID passed as --session-id, or SessionSpec.ResumeExternalID
// passed as --resume. It fails with a *messages.Error: invalid for a bad
// spec, unsupported when the CLI is missing, internal (with the end of its
// stderr) when it exits or does not answer.
func (t *Transport) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	spec, pr, err := t.Cfg.Prepare(spec, sink)
	if err != nil {
		return nil, err
	}
	ws := pr.Workspace
	if ws == nil {
		w, err := gate.NewWorkspace(".")
		if err != nil {
			return nil, &messages.Error{Code: messages.CodeInvalid, Op: messages.OpStart, Field: "cwd", Message: err.Error(), Err: err}
		}
		ws = &w
	}
	if err := cli.MakeHome(spec); err != nil {
		return nil, err
	}
	warm, refill, ok := t.adoptWarm(ctx, spec, sink, pr.Bin, *ws)
	if ok {
		warm.RefillAfterFirstTurn(refill)
		return warm, nil
	}
	ext := spec.ResumeExternalID
	if ext == "" {
		ext = transports.NewUUID()
	}
	s := newSession(t, spec, sink, pr.Bin, ext, *ws)
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	s.RefillAfterFirstTurn(refill)
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
var scrubbed = []string{"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT"}

// envPolicy is the claude-code environment policy of a session.
func envPolicy(spec transports.SessionSpec) prockit.EnvPolicy {
	return prockit.EnvPolicy{Backend: ID, Documented: documentedEnv, Pass: spec.PassEnv, Scrub: scrubbed}
}
