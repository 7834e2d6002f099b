package contain_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/contain"
)

// fake is a backend whose turns end only when told to (or, with
// obeyInterrupt, when interrupted).
type fake struct {
	obeyInterrupt bool
	mu            sync.Mutex
	sink          transports.Sink
	turn          int
	interrupts    int
	sawPass       []string
}

func (f *fake) Descriptor() transports.Descriptor { return transports.Descriptor{ID: "fake"} }
func (f *fake) Probe(context.Context) messages.Availability {
	return messages.Availability{Available: true}
}
func (f *fake) CheckEnv(spec transports.SessionSpec) error {
	f.sawPass = spec.PassEnv
	return nil
}
func (f *fake) Open(_ context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	f.sink = sink
	return f, nil
}
func (f *fake) StartTurn(_ context.Context, turn int, _ string) error {
	f.mu.Lock()
	f.turn = turn
	f.mu.Unlock()
	return nil
}
func (f *fake) Answer(context.Context, string, messages.Decision, string) error { return nil }
func (f *fake) Interrupt(context.Context) error {
	f.mu.Lock()
	f.interrupts++
	turn := f.turn
	f.mu.Unlock()
	if f.obeyInterrupt {
		f.sink(turn, messages.Event{Type: messages.EvTurnEnd, State: messages.TurnInterrupted, Text: "stopped"})
	}
	return nil
}
func (f *fake) Close(context.Context) error { return nil }

type rec struct {
	mu  sync.Mutex
	evs []messages.Event
}

func (r *rec) sink(_ int, ev messages.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
}

func (r *rec) of(t messages.EventType) []messages.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []messages.Event
	for _, ev := range r.evs {
		if ev.Type == t {
			out = append(out, ev)
		}
	}
	return out
}

func TestWallClockInterruptsAnOverTimeTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{obeyInterrupt: true}
		tr := contain.Wrap(f, contain.Options{DefaultTurnTimeout: time.Minute, Environ: func() []string { return nil }})
		r := &rec{}
		s, err := tr.Open(t.Context(), transports.SessionSpec{}, r.sink)
		require.NoError(t, err)
		require.NoError(t, s.StartTurn(t.Context(), 1, "go"))
		time.Sleep(59 * time.Second)
		synctest.Wait()
		assert.Empty(t, r.of(messages.EvWarning), "within its wall clock the turn runs on")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Len(t, r.of(messages.EvWarning), 1)
		assert.Contains(t, r.of(messages.EvWarning)[0].Text, "wall clock of 1m0s")
		ends := r.of(messages.EvTurnEnd)
		require.Len(t, ends, 1)
		assert.Equal(t, "stopped", ends[0].Text, "the backend's own interrupted end")
		time.Sleep(time.Hour)
		synctest.Wait()
		assert.Len(t, r.of(messages.EvTurnEnd), 1, "exactly one end")
		require.NoError(t, s.Close(t.Context()))
	})
}

func TestWallClockEndsATurnThatIgnoresTheInterrupt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{}
		tr := contain.Wrap(f, contain.Options{TurnTimeout: map[string]time.Duration{"fake": 10 * time.Second},
			DefaultTurnTimeout: time.Hour, Grace: 5 * time.Second, Environ: func() []string { return nil }})
		assert.Equal(t, messages.Duration(10*time.Second), tr.Descriptor().Containment.TurnWallClock)
		r := &rec{}
		s, err := tr.Open(t.Context(), transports.SessionSpec{}, r.sink)
		require.NoError(t, err)
		require.NoError(t, s.StartTurn(t.Context(), 1, "go"))
		time.Sleep(16 * time.Second)
		synctest.Wait()
		assert.Equal(t, 1, f.interrupts)
		ends := r.of(messages.EvTurnEnd)
		require.Len(t, ends, 1)
		assert.Equal(t, messages.TurnInterrupted, ends[0].State)
		assert.Contains(t, ends[0].Text, "the runtime ended it")
		f.sink(1, messages.Event{Type: messages.EvTurnEnd, State: messages.TurnCompleted})
		assert.Len(t, r.of(messages.EvTurnEnd), 1, "the backend's late end of a turn the runtime closed is dropped")

		// the next turn ends in time: no warning for it
		require.NoError(t, s.StartTurn(t.Context(), 2, "again"))
		f.sink(2, messages.Event{Type: messages.EvTurnEnd, State: messages.TurnCompleted})
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Len(t, r.of(messages.EvWarning), 1)
		require.NoError(t, s.Close(t.Context()))
	})
}

func TestRedactsSecretsFromEvents(t *testing.T) {
	daemon := []string{"GITEA_TOKEN=gitea-founder-secret", "PATH=/usr/bin", "SHORT_TOKEN=abc"}
	f := &fake{}
	tr := contain.Wrap(f, contain.Options{Environ: func() []string { return daemon }})
	r := &rec{}
	s, err := tr.Open(t.Context(), transports.SessionSpec{Env: []string{"ANTHROPIC_API_KEY=key-from-config-123"}}, r.sink)
	require.NoError(t, err)
	defer s.Close(t.Context())
	input, _ := json.Marshal(map[string]string{"command": "echo gitea-founder-secret"})
	f.sink(1, messages.Event{Type: messages.EvToolUse, Input: input})
	f.sink(1, messages.Event{Type: messages.EvToolResult, Output: "gitea-founder-secret and key-from-config-123 and ghp_abcdefghijklmnopqrstuvwxyz0123 in /usr/bin"})
	f.sink(1, messages.Event{Type: messages.EvText, Text: "sk-ant-api03-abcdefghijklmnop"})
	all, _ := json.Marshal(r.evs)
	for _, secret := range []string{"gitea-founder-secret", "key-from-config-123", "ghp_abcdef", "sk-ant-api03"} {
		assert.NotContains(t, string(all), secret)
	}
	assert.Contains(t, r.of(messages.EvToolResult)[0].Output, "[REDACTED] and [REDACTED] and [REDACTED] in /usr/bin", "ordinary text stays")
	assert.True(t, json.Valid(r.of(messages.EvToolUse)[0].Input))
	assert.Equal(t, 5, strings.Count(string(all), contain.Redacted), "one in the input, three in the output, one in the text")
}

func TestPassEnvReachesTheBackendsCheck(t *testing.T) {
	f := &fake{}
	tr := contain.Wrap(f, contain.Options{PassEnv: map[string][]string{"fake": {"GITEA_TOKEN"}, "other": {"X"}}})
	require.NoError(t, tr.(transports.EnvChecker).CheckEnv(transports.SessionSpec{}))
	assert.Equal(t, []string{"GITEA_TOKEN"}, f.sawPass)
}

// promptFake is a fake whose commands say they return at once.
type promptFake struct{ *fake }

func (p promptFake) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	if _, err := p.fake.Open(ctx, spec, sink); err != nil {
		return nil, err
	}
	return p, nil
}
func (promptFake) Prompt() bool { return true }

// TestWrappedSessionIsPromptAsItsBackend: the wrapper adds nothing to a
// command that could block, so its sessions say their commands return at
// once (transports.Prompt) exactly when the backend's do.
func TestWrappedSessionIsPromptAsItsBackend(t *testing.T) {
	for _, tc := range []struct {
		backend transports.Transport
		prompt  bool
	}{{promptFake{&fake{}}, true}, {&fake{}, false}} {
		tr := contain.Wrap(tc.backend, contain.Options{Environ: func() []string { return nil }})
		s, err := tr.Open(t.Context(), transports.SessionSpec{}, (&rec{}).sink)
		require.NoError(t, err)
		p, ok := s.(transports.Prompt)
		require.True(t, ok, "the wrapper answers whether it is prompt")
		assert.Equal(t, tc.prompt, p.Prompt())
		require.NoError(t, s.Close(t.Context()))
	}
}

// TestCommandsDoNotWaitBehindABlockedSink: while the session does not take
// the backend's next event (it is behind its store: the runtime's sink
// waits), the wrapper's commands still return; only the events wait. On
// the old code one lock guarded both, so StartTurn waited for the sink.
func TestCommandsDoNotWaitBehindABlockedSink(t *testing.T) {
	f := &fake{}
	tr := contain.Wrap(f, contain.Options{DefaultTurnTimeout: time.Hour, Environ: func() []string { return nil }})
	entered, release := make(chan struct{}), make(chan struct{})
	var got []messages.Event
	sink := func(_ int, ev messages.Event) {
		if ev.Type == messages.EvText && ev.Text == "held" {
			close(entered)
			<-release
		}
		got = append(got, ev)
	}
	s, err := tr.Open(t.Context(), transports.SessionSpec{}, sink)
	require.NoError(t, err)
	go f.sink(1, messages.Event{Type: messages.EvText, Text: "held"})
	<-entered
	returned := make(chan error, 2)
	go func() {
		returned <- s.StartTurn(t.Context(), 2, "next")
		returned <- s.(transports.Interrupter).Interrupt(t.Context())
	}()
	for range 2 {
		select {
		case err := <-returned:
			assert.NoError(t, err)
		case <-time.After(time.Minute): // only stops a hang
			t.Fatal("a command waited for the blocked sink")
		}
	}
	close(release)
	require.NoError(t, s.Close(t.Context()))
	require.Len(t, got, 1, "the held event went on once the sink took it")
}
