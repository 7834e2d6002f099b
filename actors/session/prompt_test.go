package session

import (
	"context"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/supervise"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// stackTransport opens the script backend's sessions behind a wrapper
// that says whether its commands return at once (transports.Prompt) and
// records the call stack of every StartTurn.
type stackTransport struct {
	transports.Transport
	prompt bool

	mu     sync.Mutex
	stacks []string
}

func (t *stackTransport) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	s, err := t.Transport.Open(ctx, spec, sink)
	if err != nil {
		return nil, err
	}
	return &stackSession{Session: s, t: t}, nil
}

func (t *stackTransport) startStacks() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.stacks...)
}

type stackSession struct {
	transports.Session
	t *stackTransport
}

func (s *stackSession) Prompt() bool { return s.t.prompt }

func (s *stackSession) StartTurn(ctx context.Context, turn int, input string) error {
	s.t.mu.Lock()
	s.t.stacks = append(s.t.stacks, string(debug.Stack()))
	s.t.mu.Unlock()
	return s.Session.StartTurn(ctx, turn, input)
}

// startStackSession starts a session on tr (the script backend, every
// turn answering "ok") and returns its engine and PID.
func startStackSession(t *testing.T, tr *stackTransport) (*actor.Engine, *actor.PID) {
	t.Helper()
	e, err := actor.NewEngine(actor.NewEngineConfig())
	require.NoError(t, err)
	registry := e.SpawnFunc(func(*actor.Context) {}, "registry")
	started := make(chan Result[messages.StartResult], 1)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	tr.Transport = script.New(script.WithScenario(sc))
	spec := testSpec()
	spec.Cwd = t.TempDir()
	pid := e.Spawn(NewProducer(Options{
		Spec: spec, Transport: tr, Store: store.NewMemory(),
		Policy: supervise.DefaultPolicy(), ShutdownTimeout: 5 * time.Second, Registry: registry, StartReply: started,
	}), "session")
	r := <-started
	require.NoError(t, r.Err)
	t.Cleanup(func() { <-e.Poison(pid).Done() })
	return e, pid
}

// TestPromptSessionsCommandsRunOnTheHost: the host carries out the
// commands of a backend session that says they return at once on its own
// goroutine (doHere), one hand-off fewer for every turn's start; any other
// session's go to a goroutine per command, chained in order, as a
// command that blocks must not stall the host.
func TestPromptSessionsCommandsRunOnTheHost(t *testing.T) {
	for _, prompt := range []bool{true, false} {
		tr := &stackTransport{prompt: prompt}
		e, pid := startStackSession(t, tr)
		readsTurnOne(t, e, pid)
		stacks := tr.startStacks()
		require.Len(t, stacks, 1)
		if prompt {
			assert.Contains(t, stacks[0], "(*host).doHere", "a prompt session's StartTurn, from the host's Receive")
			assert.NotContains(t, stacks[0], "(*host).do.func")
		} else {
			assert.Contains(t, stacks[0], "(*host).do.func", "another session's StartTurn, from a goroutine of its own")
			assert.NotContains(t, stacks[0], "(*host).doHere")
		}
	}
}

// panickySession panics starting a turn.
type panickySession struct{ transports.Session }

func (panickySession) Prompt() bool { return true }

func (panickySession) StartTurn(context.Context, int, string) error {
	panic("the backend broke starting the turn")
}

// TestPromptSessionPanicIsTheBackends: a command that panics on the host's
// goroutine makes the host panic as one that panics on a command's own
// goroutine does (there the recovered panic comes back to the host as
// hostBackendPanicked, and the host panics with backendPanic of it): with
// the same value, so supervision sees the same backend failure and
// restarts the host.
func TestPromptSessionPanicIsTheBackends(t *testing.T) {
	h := &host{sess: panickySession{}, timeout: time.Second}
	assert.PanicsWithValue(t, backendPanic("the backend broke starting the turn"), func() {
		h.doHere(nil, TStartTurn{Turn: 1, Input: "go"})
	})
}
