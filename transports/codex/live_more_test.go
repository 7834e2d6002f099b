package codex

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/modelmock"
)

// turnMeta is what Codex tells the model server about a request's turn
// (the x-codex-turn-metadata header) and the
// reasoning effort of its body.
type turnMeta struct {
	Sandbox string
	Effort  string
	Model   string
	Body    string
}

func lastMeta(t *testing.T, m *modelmock.Server) turnMeta {
	t.Helper()
	reqs := m.MainRequests()
	if len(reqs) == 0 {
		t.Fatal("the model server saw no request")
	}
	r := reqs[len(reqs)-1]
	var h struct {
		SandboxMode string `json:"sandbox_mode"`
	}
	_ = json.Unmarshal([]byte(r.Header.Get("X-Codex-Turn-Metadata")), &h)
	var b struct {
		Model     string `json:"model"`
		Reasoning struct {
			Effort string `json:"effort"`
		} `json:"reasoning"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return turnMeta{Sandbox: h.SandboxMode, Effort: b.Reasoning.Effort, Model: b.Model, Body: string(r.Body)}
}

// TestLivePostures holds each row of the posture map to what the
// app-server reports for the thread it started, and to the sandbox the
// model request says it runs under.
func TestLivePostures(t *testing.T) {
	want := map[messages.Posture]struct{ sandbox, approval, meta string }{
		messages.PosturePlan:        {"readOnly", "on-request", "read-only"},
		messages.PostureDefault:     {"workspaceWrite", "untrusted", "workspace-write"},
		messages.PostureAcceptEdits: {"workspaceWrite", "untrusted", "workspace-write"},
		messages.PostureFull:        {"dangerFullAccess", "never", "danger-full-access"},
	}
	for _, p := range messages.Postures() {
		t.Run(string(p), func(t *testing.T) {
			w := want[p]
			m := startMock(t, &modelmock.Scenario{})
			s, rec, _ := openLive(t, m, p)
			got := s.Settings()
			if got.Sandbox != w.sandbox || got.ApprovalPolicy != w.approval {
				t.Errorf("posture %s: the app-server reports sandbox %q, approval %q: want %q, %q", p, got.Sandbox, got.ApprovalPolicy, w.sandbox, w.approval)
			}
			if err := s.StartTurn(ctxT(t), 1, "which posture"); err != nil {
				t.Fatal(err)
			}
			rec.turnEnd(t, 1)
			if mt := lastMeta(t, m); mt.Sandbox != w.meta {
				t.Errorf("posture %s: the model request runs under sandbox %q: want %q", p, mt.Sandbox, w.meta)
			}
		})
	}
}

// TestLiveModelAndEffortPerTurn: SetModel changes model and effort of the
// next turn (max is Codex's xhigh), and a posture set between turns rides
// on the next turn/start: Codex runs that turn under the new sandbox.
func TestLiveModelAndEffortPerTurn(t *testing.T) {
	m := startMock(t, &modelmock.Scenario{})
	s, rec, _ := openLive(t, m, messages.PostureDefault)
	if err := s.StartTurn(ctxT(t), 1, "first"); err != nil {
		t.Fatal(err)
	}
	rec.turnEnd(t, 1)
	first := lastMeta(t, m)
	if err := s.SetModel(ctxT(t), "gpt-5.4", messages.EffortMax); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPosture(ctxT(t), messages.PosturePlan); err != nil {
		t.Fatal(err)
	}
	if err := s.StartTurn(ctxT(t), 2, "second"); err != nil {
		t.Fatal(err)
	}
	rec.turnEnd(t, 2)
	second := lastMeta(t, m)
	if first.Model != mockModel {
		t.Errorf("turn 1 asked for model %q: want %q", first.Model, mockModel)
	}
	if second.Model != "gpt-5.4" || second.Effort != "xhigh" {
		t.Errorf("turn 2 asked for model %q effort %q: want gpt-5.4 xhigh", second.Model, second.Effort)
	}
	if first.Sandbox != "workspace-write" || second.Sandbox != "read-only" {
		t.Errorf("sandboxes %q then %q: want workspace-write, then read-only after SetPosture(plan)", first.Sandbox, second.Sandbox)
	}
}

// TestLiveCommandApproval: a command Codex asks about runs when allowed and
// does not when denied (two turns of one session); the deny's reason
// reaches the model.
func TestLiveCommandApproval(t *testing.T) {
	m := startMock(t, &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "run it"}, Steps: []modelmock.Step{shellStep("touch ran.txt", false), {Text: "ran"}}},
		{Match: modelmock.Match{Text: "run the other"}, Steps: []modelmock.Step{shellStep("touch other.txt", false), {Text: "ran"}}},
		{Match: modelmock.Match{Text: DenyPrefix}, Steps: []modelmock.Step{{Text: "understood, not running it"}}},
	}})
	s, rec, ws := openLive(t, m, messages.PostureDefault)
	for n, c := range []struct {
		d     messages.Decision
		input string
		file  string
	}{{messages.DecisionAllowOnce, "run it", "ran.txt"}, {messages.DecisionDeny, "run the other", "other.txt"}} {
		turn := n + 1
		if err := s.StartTurn(ctxT(t), turn, c.input); err != nil {
			t.Fatal(err)
		}
		q := rec.wait(t, turn, "clarification", func(ev messages.Event) bool { return ev.Type == messages.EvClarification })
		if q.ToolName != ToolShell || !strings.Contains(string(q.Input), "touch "+c.file) {
			t.Errorf("clarification %s %s: want %s naming the command", q.ToolName, q.Input, ToolShell)
		}
		if err := s.Answer(ctxT(t), q.ClarificationID, c.d, "not today"); err != nil {
			t.Fatal(err)
		}
		end := rec.turnEnd(t, turn)
		if end.State != messages.TurnCompleted {
			t.Fatalf("turn %d end %+v\n%s", turn, end, rec.dump())
		}
		_, err := os.Stat(filepath.Join(ws, c.file))
		switch c.d {
		case messages.DecisionAllowOnce:
			if err != nil {
				t.Errorf("the allowed command did not run: %v\n%s", err, rec.dump())
			}
		case messages.DecisionDeny:
			if err == nil {
				t.Error("the denied command ran")
			}
			if !m.Saw("not today") {
				t.Error("the deny reason never reached the model")
			}
		}
		if err := s.Answer(ctxT(t), q.ClarificationID, c.d, ""); err == nil {
			t.Error("a second answer to the same clarification was accepted")
		}
	}
}

// TestLiveKilledBetweenTurnsResumesThread: an app-server killed between
// turns is started again by the next turn, on the same thread: the model
// sees the first turn's history.
func TestLiveKilledBetweenTurnsResumesThread(t *testing.T) {
	m := startMock(t, &modelmock.Scenario{})
	s, rec, _ := openLive(t, m, messages.PostureDefault)
	thread := s.ThreadID()
	if err := s.StartTurn(ctxT(t), 1, "remember the word marmalade"); err != nil {
		t.Fatal(err)
	}
	rec.turnEnd(t, 1)
	s.Lock()
	p := s.Proc
	s.Unlock()
	if err := syscall.Kill(-p.Pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	rec.wait(t, 0, "warning about the exit", func(ev messages.Event) bool {
		return ev.Type == messages.EvWarning && strings.Contains(ev.Text, "exited between turns")
	})
	if err := s.StartTurn(ctxT(t), 2, "what was the word"); err != nil {
		t.Fatal(err)
	}
	end := rec.turnEnd(t, 2)
	if end.State != messages.TurnCompleted {
		t.Fatalf("turn 2: %+v\n%s", end, rec.dump())
	}
	if s.ThreadID() != thread {
		t.Errorf("thread %q after the restart: want %q", s.ThreadID(), thread)
	}
	if mt := lastMeta(t, m); !strings.Contains(mt.Body, "marmalade") || !strings.Contains(mt.Body, "what was the word") {
		t.Error("turn 2's model request does not carry turn 1's history: the thread was not resumed")
	}
}

// TestLiveKilledMidTurn: the app-server dying mid-turn is a fatal error
// and the session refuses further turns with a typed error.
func TestLiveKilledMidTurn(t *testing.T) {
	m := startMock(t, &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "slow"}, Steps: []modelmock.Step{slowStep("starting", 600e9)}},
	}})
	s, rec, _ := openLive(t, m, messages.PostureDefault)
	if err := s.StartTurn(ctxT(t), 1, "slow"); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, 1, "text", func(ev messages.Event) bool { return ev.Type == messages.EvText })
	s.Lock()
	p := s.Proc
	s.Unlock()
	_ = syscall.Kill(-p.Pgid, syscall.SIGKILL)
	end := rec.turnEnd(t, 1)
	if end.Type != messages.EvError || !end.Fatal {
		t.Fatalf("turn 1 closed with %+v: want a fatal EvError", end)
	}
	err := s.StartTurn(ctxT(t), 2, "again")
	var me *messages.Error
	if !asError(err, &me) || me.Code != messages.CodeNotLive {
		t.Errorf("StartTurn after the death: %v: want a not_live *messages.Error", err)
	}
}

// TestLiveCancel: cancel answers Codex's question with cancel, which ends
// the turn without running the patch; the session serves the next turn.
func TestLiveCancel(t *testing.T) {
	m := startMock(t, &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "patch then stop"}, Steps: []modelmock.Step{patchStep("cancelled.txt", "no"), {Text: "went on"}}},
	}})
	s, rec, ws := openLive(t, m, messages.PostureDefault)
	if err := s.StartTurn(ctxT(t), 1, "patch then stop"); err != nil {
		t.Fatal(err)
	}
	q := rec.wait(t, 1, "clarification", func(ev messages.Event) bool { return ev.Type == messages.EvClarification })
	if err := s.Answer(ctxT(t), q.ClarificationID, messages.DecisionCancel, ""); err != nil {
		t.Fatal(err)
	}
	end := rec.turnEnd(t, 1)
	if end.Type != messages.EvTurnEnd || end.State != messages.TurnInterrupted {
		t.Errorf("turn 1 closed with %+v: want interrupted\n%s", end, rec.dump())
	}
	if _, err := os.Stat(filepath.Join(ws, "cancelled.txt")); err == nil {
		t.Error("the cancelled patch ran")
	}
	if err := s.StartTurn(ctxT(t), 2, "still there?"); err != nil {
		t.Fatal(err)
	}
	if end := rec.turnEnd(t, 2); end.State != messages.TurnCompleted {
		t.Errorf("turn 2: %+v", end)
	}
}
