package codex

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/cli"
	"github.com/codesession/codesession/transports/gate"
	"github.com/codesession/codesession/transports/transporttest"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden transcripts under testdata")

// TestParseCapture: every line the app-server wrote parses, with the kind
// its shape says.
func TestParseCapture(t *testing.T) {
	kinds := map[msgKind]int{}
	for _, l := range transporttest.ReadCapture(t, "testdata/codex/codex_appserver.jsonl") {
		if l.Dir != "<<" {
			continue
		}
		m, err := parseMessage(l.Msg)
		if err != nil {
			t.Fatalf("%s: %v", l.Msg, err)
		}
		kinds[m.Kind]++
	}
	if kinds[kindResponse] == 0 || kinds[kindNotification] == 0 || kinds[kindRequest] != 2 {
		t.Errorf("kinds parsed: %v: want responses, notifications and the two approval requests", kinds)
	}
}

func TestParseMessageShapes(t *testing.T) {
	for _, c := range []struct {
		in   string
		kind msgKind
		bad  bool
	}{
		{in: `{"id":1,"result":{}}`, kind: kindResponse},
		{in: `{"id":"a","error":{"code":-32600,"message":"no"}}`, kind: kindResponse},
		{in: `{"method":"turn/started","params":{}}`, kind: kindNotification},
		{in: `{"id":0,"method":"item/fileChange/requestApproval","params":{}}`, kind: kindRequest},
		{in: `{"id":null,"method":"x"}`, kind: kindNotification},
		{in: `{"id":1}`, bad: true},
		{in: `{"method":""}`, bad: true},
		{in: `{"id":{},"result":1}`, bad: true},
		{in: `{}`, bad: true},
		{in: `[1]`, bad: true},
		{in: `not json`, bad: true},
		{in: `{"id":1,"error":"flat"}`, bad: true},
	} {
		m, err := parseMessage([]byte(c.in))
		if c.bad != (err != nil) {
			t.Errorf("%s: error %v, want bad=%v", c.in, err, c.bad)
			continue
		}
		if !c.bad && m.Kind != c.kind {
			t.Errorf("%s: kind %v, want %v", c.in, m.Kind, c.kind)
		}
	}
}

// replay feeds the capture's server lines through a core the way the shell
// does: turn/start's request opens our turn, responses to it name Codex's
// turn, everything else is a core step. It returns the transcript.
func replay(t testing.TB, lines []transporttest.CaptureLine) string {
	c := newCore(coreConfig{outputCap: 1 << 10, posture: messages.PostureDefault})
	var b strings.Builder
	turn := 0
	startIDs := map[string]bool{}
	out := func(fx cli.Effects) {
		for _, e := range fx.Events {
			j, _ := json.Marshal(e.Ev)
			b.WriteString("turn " + itoa(e.Turn) + " " + string(j) + "\n")
		}
		for _, w := range fx.Writes {
			b.WriteString("write " + string(bytes.TrimSpace(w)) + "\n")
		}
		for _, f := range fx.Followups {
			b.WriteString(f.What + " " + string(bytes.TrimSpace(f.Encode("0"))) + "\n")
		}
	}
	for _, l := range lines {
		switch l.Dir {
		case ">>":
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Result struct {
					Decision string `json:"decision"`
				} `json:"result"`
			}
			_ = json.Unmarshal(l.Msg, &m)
			switch {
			case m.Method == "turn/start":
				turn++
				c.beginTurn(turn)
				startIDs[idKey(m.ID)] = true
			case m.Method == "turn/interrupt":
				c.Interrupting = true
			case m.Method == "" && m.Result.Decision != "":
				// the host's answer: replay it through answer()
				d := map[string]messages.Decision{"accept": messages.DecisionAllowOnce, "decline": messages.DecisionDeny}[m.Result.Decision]
				ids := c.pendingIDs()
				if len(ids) != 1 {
					t.Fatalf("answer %s with pending %v", l.Msg, ids)
				}
				fx, err := c.answer(ids[0], d, "")
				if err != nil {
					t.Fatal(err)
				}
				out(fx)
			}
		case "<<":
			m, err := parseMessage(l.Msg)
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind == kindResponse {
				if startIDs[idKey(m.ID)] {
					var r struct {
						Turn struct {
							ID string `json:"id"`
						} `json:"turn"`
					}
					_ = json.Unmarshal(m.Result, &r)
					c.turnStarted(r.Turn.ID)
				}
				continue
			}
			out(c.handle(m))
		}
	}
	return b.String()
}

// TestReplay replays the app-server capture through the core and holds it
// to the golden transcript (regenerate with -rewrite), then checks the
// facts the transcript must show whatever its text.
func TestReplay(t *testing.T) {
	got := replay(t, transporttest.ReadCapture(t, "testdata/codex/codex_appserver.jsonl"))
	golden := filepath.Join("testdata", "codex", "codex_appserver.events")
	if *rewrite {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the replay differs from %s (run with -rewrite after checking):\n%s", golden, got)
	}
	for _, must := range []string{
		`turn 1 {"type":"turn_end","state":"completed","numTurns":1,"usage":{"inputTokens":120,"outputTokens":30,"cacheReadTokens":20}}`,
		`"reason":"mock wants to run unsandboxed"},"clarificationId":"codex-1"}`,
		`write {"id":0,"result":{"decision":"accept"}}`,
		`turn 3 {"type":"clarification","toolName":"apply_patch"`,
		`"isError":true}`,
		`write {"id":1,"result":{"decision":"decline"}}`,
		`turn 4 {"type":"turn_end","state":"interrupted"`,
	} {
		if !strings.Contains(got, must) {
			t.Errorf("the replay lacks %s", must)
		}
	}
}

// TestUnknownNotificationKept: a notification the core does not know is a
// warning carrying its params, never dropped.
func TestUnknownNotificationKept(t *testing.T) {
	c := newCore(coreConfig{outputCap: 100})
	c.beginTurn(1)
	m, err := parseMessage([]byte(`{"method":"future/thing","params":{"turnId":"t1","x":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	fx := c.handle(m)
	if len(fx.Events) != 1 || fx.Events[0].Ev.Type != messages.EvWarning || !strings.Contains(string(fx.Events[0].Ev.Input), `"x":1`) ||
		fx.Events[0].Turn != 1 {
		t.Fatalf("events %+v: want one warning of turn 1 carrying the params", fx.Events)
	}
}

// TestGateDeclinesEscapingPatch: a file change outside the workspace is
// declined before anyone is asked, whatever the posture.
func TestGateDeclinesEscapingPatch(t *testing.T) {
	ws := workspaceOf(t, t.TempDir())
	if ws == nil {
		t.Fatal("no workspace gate")
	}
	for _, p := range []messages.Posture{messages.PostureDefault, messages.PostureAcceptEdits} {
		c := newCore(coreConfig{outputCap: 100, posture: p, ws: ws})
		c.beginTurn(1)
		started, _ := parseMessage([]byte(`{"method":"item/started","params":{"turnId":"t","item":{"type":"fileChange","id":"i1","changes":[{"path":"/etc/passwd","kind":{"type":"update"}}],"status":"inProgress"}}}`))
		c.handle(started)
		req, _ := parseMessage([]byte(`{"id":7,"method":"item/fileChange/requestApproval","params":{"turnId":"t","itemId":"i1"}}`))
		fx := c.handle(req)
		if len(fx.Writes) != 1 || !strings.Contains(string(fx.Writes[0]), `"decline"`) {
			t.Errorf("%s: writes %q: want a decline", p, fx.Writes)
		}
		for _, e := range fx.Events {
			if e.Ev.Type == messages.EvClarification {
				t.Errorf("%s: the escaping patch was put to a human: %+v", p, e.Ev)
			}
		}
	}
}

// TestAcceptEditsAcceptsInsidePatch: under acceptEdits a file change inside
// the workspace is accepted without a clarification; under default it is
// asked.
func TestAcceptEditsAcceptsInsidePatch(t *testing.T) {
	dir := t.TempDir()
	ws := workspaceOf(t, dir)
	for _, c := range []struct {
		p   messages.Posture
		ask bool
	}{{messages.PostureDefault, true}, {messages.PostureAcceptEdits, false}} {
		core := newCore(coreConfig{outputCap: 100, posture: c.p, ws: ws})
		core.beginTurn(1)
		started, _ := parseMessage([]byte(`{"method":"item/started","params":{"turnId":"t","item":{"type":"fileChange","id":"i1","changes":[{"path":"` + filepath.Join(dir, "a.txt") + `","kind":{"type":"add"}}],"status":"inProgress"}}}`))
		core.handle(started)
		req, _ := parseMessage([]byte(`{"id":7,"method":"item/fileChange/requestApproval","params":{"turnId":"t","itemId":"i1"}}`))
		fx := core.handle(req)
		asked := false
		for _, e := range fx.Events {
			asked = asked || e.Ev.Type == messages.EvClarification
		}
		if asked != c.ask {
			t.Errorf("%s: asked=%v, want %v (writes %q)", c.p, asked, c.ask, fx.Writes)
		}
		if !c.ask && (len(fx.Writes) != 1 || !strings.Contains(string(fx.Writes[0]), `"accept"`)) {
			t.Errorf("%s: writes %q: want an accept", c.p, fx.Writes)
		}
	}
}

// TestAnswerErrors: answers to unknown, stale and malformed ids are typed.
func TestAnswerErrors(t *testing.T) {
	c := newCore(coreConfig{outputCap: 100})
	c.beginTurn(1)
	req, _ := parseMessage([]byte(`{"id":3,"method":"item/commandExecution/requestApproval","params":{"turnId":"t","command":"ls"}}`))
	c.handle(req)
	code := func(err error) messages.Code {
		var me *messages.Error
		if asError(err, &me) {
			return me.Code
		}
		return ""
	}
	if _, err := c.answer("codex-9", messages.DecisionAllowOnce, ""); code(err) != messages.CodeNotFound {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := c.answer("codex-1", "maybe", ""); code(err) != messages.CodeInvalid {
		t.Errorf("bad decision: %v", err)
	}
	fx, err := c.answer("codex-1", messages.DecisionAllowSession, "")
	if err != nil || len(fx.Writes) != 1 || string(bytes.TrimSpace(fx.Writes[0])) != `{"id":3,"result":{"decision":"acceptForSession"}}` {
		t.Errorf("allow_session: %q %v", fx.Writes, err)
	}
	if _, err := c.answer("codex-1", messages.DecisionAllowOnce, ""); code(err) != messages.CodeConflict {
		t.Errorf("second answer: %v", err)
	}
}

// TestUnknownServerRequestRefused: a server request the transport cannot
// answer gets a JSON-RPC error (Codex never waits forever) and a warning.
func TestUnknownServerRequestRefused(t *testing.T) {
	c := newCore(coreConfig{outputCap: 100})
	req, _ := parseMessage([]byte(`{"id":"r1","method":"mcpServer/elicitation/request","params":{}}`))
	fx := c.handle(req)
	if len(fx.Writes) != 1 || !strings.Contains(string(fx.Writes[0]), `"id":"r1"`) || !strings.Contains(string(fx.Writes[0]), `"error":{"code":-32601`) {
		t.Errorf("writes %q: want an error response with the request's id", fx.Writes)
	}
	if len(fx.Events) != 1 || fx.Events[0].Ev.Type != messages.EvWarning {
		t.Errorf("events %+v: want a warning", fx.Events)
	}
}

// TestResumedThreadRestatesOldTurn: a resumed thread restates its last
// turn's token usage (with that turn's id) right after turn/start, before
// the new turn is named; the core must neither take that id for the new
// turn nor count those tokens (seen live with Codex 0.169.0).
func TestResumedThreadRestatesOldTurn(t *testing.T) {
	c := newCore(coreConfig{outputCap: 100})
	c.beginTurn(2)
	step := func(line string) cli.Effects {
		m, err := parseMessage([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		return c.handle(m)
	}
	step(`{"method":"thread/tokenUsage/updated","params":{"turnId":"old","tokenUsage":{"total":{"inputTokens":200,"outputTokens":40},"last":{"inputTokens":100,"outputTokens":20}}}}`)
	step(`{"method":"turn/started","params":{"turn":{"id":"new","status":"inProgress"}}}`)
	fx := step(`{"method":"item/agentMessage/delta","params":{"turnId":"new","itemId":"m","delta":"hi"}}`)
	if len(fx.Events) != 1 || fx.Events[0].Turn != 2 {
		t.Fatalf("the new turn's text went to %+v", fx.Events)
	}
	step(`{"method":"thread/tokenUsage/updated","params":{"turnId":"new","tokenUsage":{"total":{"inputTokens":300,"outputTokens":60},"last":{"inputTokens":100,"outputTokens":20}}}}`)
	fx = step(`{"method":"turn/completed","params":{"turn":{"id":"new","status":"completed"}}}`)
	if len(fx.Events) != 1 || fx.Events[0].Ev.Type != messages.EvTurnEnd || fx.Events[0].Turn != 2 {
		t.Fatalf("turn/completed gave %+v", fx.Events)
	}
	if u := fx.Events[0].Ev.Usage; u == nil || u.InputTokens != 100 || u.OutputTokens != 20 {
		t.Errorf("turn 2 usage %+v: want only its own request (100 in, 20 out)", u)
	}
}

// TestExitMidTurn: a process the shell killed to end an interrupt closes
// the turn interrupted and the session lives on; one that died by itself
// is fatal and refuses further turns.
func TestExitMidTurn(t *testing.T) {
	c := newCore(coreConfig{outputCap: 100})
	c.beginTurn(1)
	fx := c.exited(true, "killed")
	if len(fx.Events) != 1 || fx.Events[0].Ev.Type != messages.EvTurnEnd || fx.Events[0].Ev.State != messages.TurnInterrupted || c.Fatal {
		t.Errorf("killed for an interrupt: %+v dead=%v", fx.Events, c.Fatal)
	}
	c.beginTurn(2)
	fx = c.exited(false, "signal: killed")
	if len(fx.Events) != 1 || fx.Events[0].Ev.Type != messages.EvError || !fx.Events[0].Ev.Fatal || fx.Events[0].Turn != 2 || !c.Fatal {
		t.Errorf("died by itself: %+v dead=%v", fx.Events, c.Fatal)
	}
	c = newCore(coreConfig{outputCap: 100})
	fx = c.exited(false, "exit status 1")
	if len(fx.Events) != 1 || fx.Events[0].Ev.Type != messages.EvWarning || c.Fatal {
		t.Errorf("exit between turns: %+v dead=%v", fx.Events, c.Fatal)
	}
}

// workspaceOf is the workspace gate of dir.
func workspaceOf(t testing.TB, dir string) *gate.Workspace {
	w, err := gate.NewWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &w
}
