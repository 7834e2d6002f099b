package grok

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// EnvBinary names the grok executable when no WithBinary option is given;
// else `grok` is looked up on PATH.
const EnvBinary = "CODESESSION_GROK_BIN"

// Defaults of the options.
const (
	DefaultLineCap      = 16 << 20
	DefaultOutputCap    = 32 << 20 // a turn's whole stdout
	DefaultProbeTimeout = 15 * time.Second
)

// DefaultInterruptDeadlines: an interrupt sends SIGINT to the turn's
// process group at once, SIGTERM after AfterINT and SIGKILL after
// AfterTERM.
var DefaultInterruptDeadlines = InterruptDeadlines{AfterINT: 3 * time.Second, AfterTERM: 3 * time.Second}

// InterruptDeadlines are the escalation steps of an interrupt.
type InterruptDeadlines struct {
	AfterINT, AfterTERM time.Duration
}

// Transport is the grok backend. It is safe for concurrent use.
type Transport struct {
	binary    string
	lineCap   int
	outputCap int
	deadlines InterruptDeadlines
	env       []string
}

var _ transports.Transport = (*Transport)(nil)

// Option configures a Transport.
type Option func(*Transport)

// WithBinary runs this grok executable.
func WithBinary(path string) Option { return func(t *Transport) { t.binary = path } }

// WithLineCap caps one stdout line at n bytes: a longer line is dropped
// and reported as an EvError.
func WithLineCap(n int) Option {
	return func(t *Transport) {
		if n > 0 {
			t.lineCap = n
		}
	}
}

// WithOutputCap caps a turn's whole stdout at n bytes.
func WithOutputCap(n int) Option {
	return func(t *Transport) {
		if n > 0 {
			t.outputCap = n
		}
	}
}

// WithInterruptDeadlines sets the interrupt escalation steps.
func WithInterruptDeadlines(d InterruptDeadlines) Option {
	return func(t *Transport) { t.deadlines = d }
}

// WithEnv adds KEY=VALUE entries to every turn's environment, below
// SessionSpec.Env.
func WithEnv(kv ...string) Option { return func(t *Transport) { t.env = append(t.env, kv...) } }

// New returns the grok transport.
func New(opts ...Option) *Transport {
	t := &Transport{lineCap: DefaultLineCap, outputCap: DefaultOutputCap, deadlines: DefaultInterruptDeadlines}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Descriptor returns the capability descriptor.
func (t *Transport) Descriptor() transports.Descriptor { return descriptor() }

// Binary returns the grok executable, or an error saying why there is none.
func (t *Transport) Binary(env []string) (string, error) {
	if t.binary != "" {
		return t.binary, nil
	}
	if b := envValue(env, EnvBinary); b != "" {
		return b, nil
	}
	if b := os.Getenv(EnvBinary); b != "" {
		return b, nil
	}
	b, err := exec.LookPath("grok")
	if err != nil {
		return "", fmt.Errorf("the grok CLI is not installed here: no %s and no grok on PATH (x.ai's installer: curl -fsSL https://x.ai/cli/install.sh | bash)", EnvBinary)
	}
	return b, nil
}

// Probe runs `grok --version` (it needs no login, seed 003).
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
	cmd.Env = buildEnv(os.Environ(), transports.SessionSpec{}, t.env)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			a.Reason = fmt.Sprintf("%s --version did not answer within %s", bin, DefaultProbeTimeout)
		} else {
			a.Reason = fmt.Sprintf("%s --version failed (%v): %s", bin, err, transports.TailText(errb.Bytes(), 300))
		}
		return a
	}
	// "grok 0.2.93 (f00f96316d)"
	f := strings.Fields(out.String())
	for _, w := range f {
		if w != "" && w[0] >= '0' && w[0] <= '9' {
			a.Version = w
			break
		}
	}
	if a.Version == "" && len(f) > 0 {
		a.Version = f[0]
	}
	if a.Version == "" {
		a.Reason = bin + " --version printed nothing"
		return a
	}
	a.Available = true
	return a
}

// Open checks the spec and the binary and emits EvStarted (turn 0) with
// the session's UUID; no process runs until the first turn. It fails with
// a *messages.Error: invalid for a bad spec (an explicit AllowedTools
// included: --tools crashes grok's session creation), unsupported when the
// CLI is missing.
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
	if spec.AllowedTools != nil {
		return nil, messages.FieldError(messages.OpStart, "allowedTools",
			"grok cannot honour allowedTools: its --tools flag crashes session creation (grok %s); start without allowedTools", DocumentedVersion)
	}
	if spec.Cwd != "" {
		if fi, err := os.Stat(spec.Cwd); err != nil || !fi.IsDir() {
			return nil, messages.FieldError(messages.OpStart, "cwd", "%q is not a directory", spec.Cwd)
		}
	}
	bin, err := t.Binary(spec.Env)
	if err != nil {
		return nil, messages.Wrap(messages.CodeUnsupported, messages.OpStart, err, err.Error())
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		return nil, messages.Errorf(messages.CodeUnsupported, messages.OpStart, "the grok executable %s is not there", bin)
	}
	if spec.Home != "" {
		if err := os.MkdirAll(spec.Home, 0o700); err != nil {
			return nil, messages.Wrap(messages.CodeInvalid, messages.OpStart, err, "cannot create the session's HOME "+spec.Home)
		}
	}
	ext, created := spec.ResumeExternalID, spec.ResumeExternalID != ""
	if ext == "" {
		ext = newUUID()
	}
	s := &session{t: t, spec: spec, sink: sink, bin: bin, ext: ext, created: created, posture: spec.Posture}
	sink(0, messages.Event{Type: messages.EvStarted, ExternalSessionID: ext, Model: spec.Model})
	return s, nil
}

// BuildArgs is a turn's argv after the binary: the session pinned with -s
// on its first turn and --resume after; --tools is never passed.
func BuildArgs(spec transports.SessionSpec, posture messages.Posture, ext string, resume bool, input string) []string {
	args := []string{"-p", input, "--output-format", "json", "--permission-mode", PermissionMode(posture)}
	if spec.Model != "" {
		args = append(args, "-m", spec.Model)
	}
	if e := ReasoningEffort(spec.Effort); e != "" {
		args = append(args, "--reasoning-effort", e)
	}
	if resume {
		args = append(args, "--resume", ext)
	} else {
		args = append(args, "-s", ext)
	}
	return args
}

var scrubbed = map[string]bool{
	"NODE_OPTIONS": true, "CLAUDECODE": true, "ANTHROPIC_API_KEY": true, "ANTHROPIC_BASE_URL": true,
	"OPENAI_API_KEY": true, "OPENAI_BASE_URL": true, "GEMINI_API_KEY": true, "GOOGLE_API_KEY": true,
	"GITHUB_TOKEN": true, "GH_TOKEN": true, "COPILOT_GITHUB_TOKEN": true, "FACTORY_API_KEY": true,
	"AWS_SECRET_ACCESS_KEY": true, "AWS_SESSION_TOKEN": true,
}

// buildEnv is a turn's environment: the caller's less other vendors'
// credentials (XAI_API_KEY is grok's own), HOME, then the extra entries.
func buildEnv(base []string, spec transports.SessionSpec, extra []string) []string {
	var env []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !scrubbed[k] {
			env = append(env, kv)
		}
	}
	if spec.Home != "" {
		env = append(env, "HOME="+spec.Home)
	}
	env = append(env, extra...)
	env = append(env, spec.Env...)
	last := map[string]string{}
	var order []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = kv
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, last[k])
	}
	return out
}

func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
