package acptest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc/confinetest"
	"github.com/codesession/codesession/transports/transporttest"
)

// Wire records what the client wrote to a CLI and what it answered.
type Wire struct {
	mu    sync.Mutex
	lines [][2]string
	at    []time.Time // when each line was seen
}

// Tap is the WithWireTap option that records into w.
func (w *Wire) Tap() acp.Option {
	return acp.WithWireTap(func(dir string, b []byte) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, l := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				w.lines = append(w.lines, [2]string{dir, string(l)})
				w.at = append(w.at, time.Now())
			}
		}
	})
}

// Sent returns the lines the client wrote that contain every one of subs.
func (w *Wire) Sent(subs ...string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
next:
	for _, l := range w.lines {
		if l[0] != ">>" {
			continue
		}
		for _, s := range subs {
			if !strings.Contains(l[1], s) {
				continue next
			}
		}
		out = append(out, l[1])
	}
	return out
}

// FirstAfter is when the first line in direction dir (">>" written,
// "<<" read) after t0 that contains every one of subs was seen (zero when
// none was).
func (w *Wire) FirstAfter(t0 time.Time, dir string, subs ...string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
next:
	for i, l := range w.lines {
		if l[0] != dir || w.at[i].Before(t0) {
			continue
		}
		for _, s := range subs {
			if !strings.Contains(l[1], s) {
				continue next
			}
		}
		return w.at[i]
	}
	return time.Time{}
}

// Live is one live session of a backend's own tests: its transport with a
// wire tap, its mock, its recorder.
type Live struct {
	T    *testing.T
	Wire *Wire
	Mock *modelmock.Server
	Rec  *transporttest.Recorder
	S    transports.Session
	WS   string
}

// OpenLive scripts the mock with sc and opens a session in a fresh
// workspace (ws, when not empty) under posture p.
func OpenLive(t *testing.T, b Backend, sc *modelmock.Scenario, ws string, p messages.Posture) *Live {
	t.Helper()
	mock, err := modelmock.Start(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	if ws == "" {
		ws = t.TempDir()
	}
	w := &Wire{}
	tr := b.New(Options(acp.WithBinary(b.Bin), w.Tap())...)
	spec := b.Spec(t, mock)
	spec.Cwd, spec.Posture, spec.SessionID = ws, p, "live-"+strings.ReplaceAll(t.Name(), "/", "-")
	rec := transporttest.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := tr.Open(ctx, spec, rec.Sink)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	l := &Live{T: t, Wire: w, Mock: mock, Rec: rec, S: s, WS: ws}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// Turn runs turn n, answering each clarification with answer (nil: any
// clarification fails the test), and returns the turn's events.
func (l *Live) Turn(n int, input string, answer func(messages.Event) (messages.Decision, string)) []messages.Event {
	l.T.Helper()
	l.Rec.TurnStarting(n)
	if err := l.S.StartTurn(context.Background(), n, input); err != nil {
		l.T.Fatalf("StartTurn %d: %v", n, err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	answered := 0
	for time.Now().Before(deadline) {
		evs := l.Rec.Turn(n)
		asked := 0
		for _, ev := range evs {
			if ev.Type == messages.EvClarification {
				asked++
				if asked > answered {
					if answer == nil {
						l.T.Fatalf("turn %d raised a clarification: %s", n, transporttest.Brief(ev))
					}
					d, why := answer(ev)
					if err := l.S.Answer(context.Background(), ev.ClarificationID, d, why); err != nil {
						l.T.Fatalf("Answer: %v", err)
					}
					answered++
				}
			}
			if ev.Type == messages.EvTurnEnd || (ev.Type == messages.EvError && ev.Fatal) {
				return evs
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.T.Fatalf("turn %d did not end\n%s", n, l.Rec.Transcript())
	return nil
}

// RequireFile fails unless rel (in the workspace) holds content.
func (l *Live) RequireFile(rel, content string) {
	l.T.Helper()
	b, err := os.ReadFile(filepath.Join(l.WS, rel))
	if err != nil || string(b) != content {
		l.T.Errorf("%s: %q, %v: want %q\n%s", rel, b, err, content, l.Rec.Transcript())
	}
}

// RequireNoFile fails if rel exists in the workspace.
func (l *Live) RequireNoFile(rel string) {
	l.T.Helper()
	if _, err := os.Stat(filepath.Join(l.WS, rel)); err == nil {
		l.T.Errorf("%s exists: it must not\n%s", rel, l.Rec.Transcript())
	}
}

// Count counts the events of type typ in evs.
func Count(evs []messages.Event, typ messages.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// PostureRun is the posture check every ACP backend runs: the session
// opens in plan, where the CLI receives the plan mode and a write is
// refused without a question; set-posture full sends the build/default
// mode and the next write runs without a question; set-posture default
// asks again, and a deny leaves the file unwritten and its reason reaches
// the agent with the next prompt. planMode and workMode are what the CLI
// must receive.
func PostureRun(t *testing.T, b Backend, planMode, workMode string) {
	in := func(n int) string { return "[posture turn " + string(rune('0'+n)) + "] go" }
	var sc modelmock.Scenario
	ws := t.TempDir()
	for n, f := range []string{"plan.txt", "full.txt", "denied.txt"} {
		call := b.Tools.Write(filepath.Join(ws, f), "posture "+f+"\n")
		sc.Rules = append(sc.Rules, modelmock.Rule{Match: modelmock.Match{Text: in(n + 1)},
			Steps: []modelmock.Step{{Tool: &call}, {Text: "done with " + f}}})
	}
	sc.Rules = append(sc.Rules, modelmock.Rule{Match: modelmock.Match{Text: in(4)}, Steps: []modelmock.Step{{Text: "heard"}}})
	l := OpenLive(t, b, &sc, ws, messages.PosturePlan)
	if len(l.Wire.Sent(planMode)) == 0 {
		t.Errorf("the CLI never received the plan mode %q", planMode)
	}

	evs := l.Turn(1, in(1), nil)                  // a clarification fails the test
	refused := Count(evs, messages.EvWarning) > 0 // by the client
	for _, ev := range evs {
		refused = refused || (ev.Type == messages.EvToolResult && ev.IsError) // by the agent's plan mode
	}
	if !refused {
		t.Errorf("plan: the write was neither refused by the client nor failed in the agent\n%s", l.Rec.Transcript())
	}
	l.RequireNoFile("plan.txt")

	ps := l.S.(transports.PostureSetter)
	if err := ps.SetPosture(context.Background(), messages.PostureFull); err != nil {
		t.Fatalf("SetPosture(full): %v", err)
	}
	if len(l.Wire.Sent(workMode)) == 0 {
		t.Errorf("the CLI never received the working mode %q", workMode)
	}
	l.Turn(2, in(2), nil)
	l.RequireFile("full.txt", "posture full.txt\n")

	if err := ps.SetPosture(context.Background(), messages.PostureDefault); err != nil {
		t.Fatalf("SetPosture(default): %v", err)
	}
	asked := 0
	evs = l.Turn(3, in(3), func(messages.Event) (messages.Decision, string) {
		asked++
		return messages.DecisionDeny, "posture test: no denied.txt"
	})
	if asked != 1 {
		t.Errorf("default: %d clarifications: want 1", asked)
	}
	l.RequireNoFile("denied.txt")
	if c := evs[len(evs)-1]; c.Type != messages.EvTurnEnd || c.State != messages.TurnCompleted {
		t.Errorf("turn 3 closed with %s: want completed", transporttest.Brief(c))
	}
	l.Turn(4, in(4), nil)
	if !l.Mock.Saw("posture test: no denied.txt") {
		t.Error("the deny's reason never reached the agent")
	}
}

// Contained is confinetest's live check for an ACP backend at posture full:
// the model asks shellTool (the CLI's shell, taking "command") for each
// command; readsOpen for a CLI that lists HOME (its reads stay open).
func Contained(t *testing.T, b Backend, shellTool string, readsOpen bool) {
	contained(t, b, shellTool, confinetest.Case{ReadsOpen: readsOpen})
}

// ContainedLoopback is Contained at network: loopback (confinetest's
// Case.Loopback): the agent reaches the mock only through the relay of
// its own network namespace.
func ContainedLoopback(t *testing.T, b Backend, shellTool string) {
	contained(t, b, shellTool, confinetest.Case{Loopback: true})
}

func contained(t *testing.T, b Backend, shellTool string, c confinetest.Case) {
	call := Call(shellTool, map[string]any{"command": "{{1}}", "description": "run it"})
	mock, err := modelmock.Start(t, &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Regex: "RUN-SHELL (.*)"}, Steps: []modelmock.Step{{Tool: &call}, {Text: "shell done"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	spec := b.Spec(t, mock)
	spec.Posture = messages.PostureFull
	c.Transport, c.Mock, c.Spec, c.Answer = b.New(Options(acp.WithBinary(b.Bin))...), mock, spec, true
	c.ShellPrompt = func(cmd string) string { return "RUN-SHELL " + cmd }
	confinetest.Run(t, c)
}
