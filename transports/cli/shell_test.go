package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/subprocess"
)

// envFake makes the test binary a fake line CLI (see fakeCLI).
const envFake = "CODESESSION_FAKE_LINE_CLI"

// TestMain runs the fake CLI when asked to, else the tests, failing the
// package if a goroutine outlives them.
func TestMain(m *testing.M) {
	if mode := os.Getenv(envFake); mode != "" {
		os.Exit(fakeCLI(mode))
	}
	goleak.VerifyTestMain(m)
}

// fakeCLI speaks a line protocol of its own, just enough for the shell's
// tests. The host writes {"op": ..., "id": ...}; the CLI writes
// {"event": ..., "text": ...} for the core, or {"reply": id} (with
// "refused") for a request. "start" begins a turn: in mode "followup" the
// CLI then asks the core for a Followup; otherwise the turn runs until an
// interrupt. A "steer" request is answered after a pause; a "then" line
// says whether it came after that reply (a Followup's Then must wait for
// it). In mode "race" an "interrupt" ends the turn
// first, then is refused, as a CLI does whose turn ended as the interrupt
// came.
func fakeCLI(mode string) int {
	out := json.NewEncoder(os.Stdout)
	lines := make(chan []byte)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(lines)
	}()
	var pending [][]byte
	next := func() ([]byte, bool) {
		if len(pending) > 0 {
			l := pending[0]
			pending = pending[1:]
			return l, true
		}
		l, ok := <-lines
		return l, ok
	}
	replied := false // a steer was answered
	for {
		l, ok := next()
		if !ok {
			return 0
		}
		var in struct{ Op, ID string }
		if json.Unmarshal(l, &in) != nil {
			continue
		}
		switch in.Op {
		case "start":
			if mode == "followup" {
				_ = out.Encode(map[string]any{"event": "followup"})
			}
		case "steer":
			// a line the host writes meanwhile is read before the reply
			select {
			case early, ok := <-lines:
				if ok && strings.Contains(string(early), `"then"`) {
					_ = out.Encode(map[string]any{"event": "log", "text": "then, written before the reply"})
				} else if ok {
					pending = append(pending, early)
				}
			case <-time.After(300 * time.Millisecond):
			}
			_ = out.Encode(map[string]any{"reply": in.ID})
			replied = true
		case "then":
			text := "then"
			if !replied {
				text = "then, written before the request"
			}
			_ = out.Encode(map[string]any{"event": "log", "text": text})
		case "interrupt":
			if mode == "race" {
				_ = out.Encode(map[string]any{"event": "end"})
				_ = out.Encode(map[string]any{"reply": in.ID, "refused": true})
			}
		}
	}
}

type fakeMsg struct{ Event, Text string }

func decodeFake(line []byte) []Event[*fakeMsg] {
	var w struct {
		Reply       *string
		Refused     bool
		Event, Text string
	}
	if err := json.Unmarshal(line, &w); err != nil {
		return []Event[*fakeMsg]{{Err: err}}
	}
	if w.Reply != nil {
		return []Event[*fakeMsg]{{Reply: &Reply{ID: *w.Reply, Refused: w.Refused, Message: "no turn runs", Code: messages.CodeConflict}}}
	}
	return []Event[*fakeMsg]{{Msg: &fakeMsg{w.Event, w.Text}}}
}

// fakeCore is a core that is also an InterruptAsker: askable says whether
// its CLI can be asked to interrupt.
type fakeCore struct {
	Turn
	askable bool
}

func (c *fakeCore) Line(m *fakeMsg) Effects {
	var e Effects
	switch m.Event {
	case "followup":
		e.Followups = append(e.Followups, Followup{What: "the steer",
			Encode: func(id string) []byte { return []byte(`{"op":"steer","id":"` + id + `"}` + "\n") },
			Then:   [][]byte{[]byte(`{"op":"then"}` + "\n")}})
	case "end":
		c.End(&e)
		e.Emit(c.Number, messages.Event{Type: messages.EvTurnEnd, State: messages.TurnCompleted})
	case "log":
		e.Emit(c.EvTurn(), messages.Event{Type: messages.EvWarning, Text: m.Text})
	}
	return e
}

func (c *fakeCore) Exited(how ExitKind, status, tail string) Effects {
	var e Effects
	c.Exit(&e, "fake", how, status, tail, "", messages.Event{Type: messages.EvTurnEnd, State: messages.TurnInterrupted, Text: how.String()}, c.End)
	return e
}

func (c *fakeCore) Answer(string, messages.Decision, string) (Effects, error) {
	return Effects{}, messages.Errorf(messages.CodeNotFound, messages.OpAnswer, "nothing asked")
}

func (c *fakeCore) State() *Turn { return &c.Turn }

func (c *fakeCore) InterruptRequest() (func(id string) []byte, bool) {
	return func(id string) []byte { return []byte(`{"op":"interrupt","id":"` + id + `"}` + "\n") }, c.askable
}

// fakeRig is a shell around the fake CLI in mode, its first turn running.
type fakeRig struct {
	s   *Shell[*fakeMsg, *fakeCore]
	evs chan messages.Event
}

func startFake(t *testing.T, mode string, askable bool) *fakeRig {
	t.Helper()
	cfg := &Config{CLI: subprocess.CLI{Name: "fake"}, LineCap: DefaultLineCap, ControlTimeout: time.Minute,
		// an hour each: the tests must never wait for the grace
		Deadlines: InterruptDeadlines{Grace: time.Hour, AfterINT: time.Hour, AfterTERM: time.Hour},
		Env:       []string{envFake + "=" + mode},
		Policy:    func(transports.SessionSpec) prockit.EnvPolicy { return prockit.EnvPolicy{Backend: "fake"} }}
	b := Backend[*fakeMsg]{Name: "fake", Decode: decodeFake, Stop: []subprocess.Step{{Wait: 5 * time.Second, Signal: syscall.SIGKILL}}}
	r := &fakeRig{evs: make(chan messages.Event, 64)}
	bin, err := os.Executable()
	require.NoError(t, err)
	r.s = NewShell(b, cfg, transports.SessionSpec{}, func(_ int, ev messages.Event) { r.evs <- ev }, bin, "ext", &fakeCore{askable: askable})
	r.s.Lock()
	_, err = r.s.Spawn(nil)
	r.s.Unlock()
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, r.s.Close(ctx))
	})
	r.s.Begin()
	r.s.Lock()
	require.NoError(t, r.s.Core.Begin(1))
	r.s.OpenTurn(1, Effects{Writes: [][]byte{[]byte(`{"op":"start"}` + "\n")}})
	r.s.Unlock()
	return r
}

// next returns the next event pred accepts, failing after two minutes
// (a stop for a hang, not a verdict on speed).
func (r *fakeRig) next(t *testing.T, what string, pred func(messages.Event) bool) messages.Event {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	var seen []string
	for {
		select {
		case ev := <-r.evs:
			if pred(ev) {
				return ev
			}
			seen = append(seen, fmt.Sprintf("%s %q", ev.Type, ev.Text))
		case <-deadline:
			t.Fatalf("no %s; events: %s", what, strings.Join(seen, ", "))
		}
	}
}

// TestFollowupThenWaitsForReply: a core's Followup is sent as a request
// of the host, and its Then lines reach the CLI only after the reply.
func TestFollowupThenWaitsForReply(t *testing.T) {
	r := startFake(t, "followup", true)
	then := r.next(t, `the "then" line`, func(ev messages.Event) bool {
		return ev.Type == messages.EvWarning && strings.HasPrefix(ev.Text, "then")
	})
	assert.Equal(t, "then", then.Text)
}

// TestInterruptWithoutRequestSignalsAtOnce: an InterruptAsker that cannot
// be asked (codex before it named the turn) has the escalation signal at
// once, not after the grace (an hour here).
func TestInterruptWithoutRequestSignalsAtOnce(t *testing.T) {
	r := startFake(t, "hang", false)
	require.NoError(t, r.s.Interrupt(context.Background()))
	r.next(t, "a warning that SIGINT went", func(ev messages.Event) bool {
		return ev.Type == messages.EvWarning && strings.Contains(ev.Text, "sent SIGINT")
	})
	end := r.next(t, "the interrupted turn's end", func(ev messages.Event) bool { return ev.Type == messages.EvTurnEnd })
	assert.Equal(t, messages.TurnInterrupted, end.State)
	assert.Equal(t, ExitInterrupt.String(), end.Text, "the exit is the escalation's")
}

// TestInterruptRefusedAfterTurnEnded: an interrupt the CLI refuses because
// the turn ended as it came is no error; the request is the core's own.
func TestInterruptRefusedAfterTurnEnded(t *testing.T) {
	r := startFake(t, "race", true)
	require.NoError(t, r.s.Interrupt(context.Background()))
	end := r.next(t, "the turn's end", func(ev messages.Event) bool { return ev.Type == messages.EvTurnEnd })
	assert.Equal(t, messages.TurnCompleted, end.State)
}
