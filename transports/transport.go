package transports

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/proc"
)

// Descriptor is a backend's static capability descriptor.
type Descriptor = messages.Descriptor

// SessionSpec is what a backend needs to open a session.
type SessionSpec struct {
	SessionID          string
	Cwd                string
	Model              string
	Effort             messages.Effort
	Posture            messages.Posture
	AllowedTools       []string // nil: the backend's own set
	AppendSystemPrompt string
	// ResumeExternalID is the backend's own session id to resume, when a
	// previous run captured one.
	ResumeExternalID string
	// Env is extra KEY=VALUE environment for a backend process.
	Env []string
	// Home, when set, is used as HOME for a backend process so it never
	// touches the user's files.
	Home string
	// PassEnv names variables of the daemon's environment the operator gave
	// this backend (config backends.<id>.passEnv): they reach its processes,
	// founder credentials included (proc.EnvPolicy).
	PassEnv []string
	// Procs is the session's process bookkeeping (cgroup, boot-sweep
	// records); nil still starts every process under the watchdog.
	Procs *proc.Group
	// Confine is the Landlock confinement of every process the session
	// starts (the runtime's containment fills it in from the workspace,
	// HOME and the backend's declared state folders); nil: unconfined.
	// Backends pass it to Procs.Start as is.
	Confine *proc.Confinement
	// Network is the session's network mode (messages.Network*; "" open),
	// which the runtime's containment turns into Confine's TCP rules.
	Network string
	// Provision is the session's capability plan (read only; nil: none).
	// A backend takes what its CLI can; a provisioned session never takes
	// a warm process booted without the plan.
	Provision *Provision
}

// EnvChecker is a transport that can refuse a start on its environment
// policy before a session exists (founder credentials in the daemon's
// environment, seed 002); the error is a *messages.Error with
// Field FieldFounderCredentials.
type EnvChecker interface {
	CheckEnv(spec SessionSpec) error
}

// FieldFounderCredentials is the Field of the start error an EnvChecker
// returns; the CLI exits 20 on it (seed 002).
const FieldFounderCredentials = "env.founderCredentials"

// CredentialRefusal turns the policy's refusal into the start error.
func CredentialRefusal(err error) error {
	if err == nil {
		return nil
	}
	return &messages.Error{Code: messages.CodeInvalid, Op: messages.OpStart, Field: FieldFounderCredentials, Message: err.Error(), Err: err}
}

// Sink receives a session's events in order. turn is the turn the event
// belongs to, so stale events of an interrupted turn never close the next
// one. A Sink is safe to call from any goroutine and does not block for long.
type Sink func(turn int, ev messages.Event)

// Transport is one backend.
type Transport interface {
	Descriptor() Descriptor
	// Probe reports whether the backend can run here; bounded by ctx.
	Probe(ctx context.Context) messages.Availability
	// Open starts a backend session. Events arrive through sink until Close
	// returns. A turn is closed by exactly one EvTurnEnd (or EvEnded, or a
	// fatal EvError) carrying that turn's number.
	Open(ctx context.Context, spec SessionSpec, sink Sink) (Session, error)
}

// Session is one open backend session.
type Session interface {
	// StartTurn sends input as turn number turn and returns without waiting
	// for the turn to finish.
	StartTurn(ctx context.Context, turn int, input string) error
	// Answer answers the clarification the backend raised with the given id.
	// A deny carries reason back to the agent.
	Answer(ctx context.Context, clarificationID string, decision messages.Decision, reason string) error
	// Close stops the backend and frees everything it holds, killing any
	// process it started when ctx expires. It is idempotent.
	Close(ctx context.Context) error
}

// Prompt is a Session whose commands (StartTurn, Answer and the optional
// Interrupt, Steer, SetModel and SetPosture) return at once: each hands
// its work to the session's own goroutine, or changes a field, and never
// waits on I/O, a process or a model. The runtime then calls them on the
// goroutine that hosts the session instead of one started per command,
// which spares every command a hand-off between goroutines. A session
// that says so and blocks stalls its host: only say so when it holds.
type Prompt interface {
	Prompt() bool
}

// Interrupter aborts the running turn; the turn then ends with
// EvTurnEnd{State: interrupted}.
type Interrupter interface {
	Interrupt(ctx context.Context) error
}

// Steerer injects guidance into the running turn.
type Steerer interface {
	Steer(ctx context.Context, text string) error
}

// ModelSetter switches model (and effort, where per-turn) for the next turn.
type ModelSetter interface {
	SetModel(ctx context.Context, model string, effort messages.Effort) error
}

// PostureSetter changes the backend's permission mode live.
type PostureSetter interface {
	SetPosture(ctx context.Context, p messages.Posture) error
}

// Registry holds the backends a runtime can start. It is safe for
// concurrent use.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Transport
}

// NewRegistry returns a registry holding ts.
func NewRegistry(ts ...Transport) *Registry {
	r := &Registry{m: map[string]Transport{}}
	for _, t := range ts {
		r.Register(t)
	}
	return r
}

// Register adds or replaces a backend under its descriptor's id.
func (r *Registry) Register(t Transport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[t.Descriptor().ID] = t
}

// Get returns the backend with the given id or a not_found error that
// lists the registered ones.
func (r *Registry) Get(id string) (Transport, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if t, ok := r.m[id]; ok {
		return t, nil
	}
	return nil, messages.Errorf(messages.CodeNotFound, messages.OpStart,
		"backend %q is not registered (have: %v)", id, r.idsLocked())
}

// IDs lists the registered backend ids, sorted.
func (r *Registry) IDs() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.idsLocked()
}

func (r *Registry) idsLocked() []string {
	ids := make([]string, 0, len(r.m))
	for id := range r.m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// CapOutput cuts a tool output to max bytes and reports whether it did and
// how long the original was, so a cap that fires is always visible.
func CapOutput(s string, max int) (out string, truncated bool, original int) {
	if len(s) <= max {
		return s, false, 0
	}
	return s[:max] + fmt.Sprintf("\n[output truncated: %d of %d bytes shown]", max, len(s)), true, len(s)
}
