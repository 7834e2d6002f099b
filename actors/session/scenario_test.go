package session

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/learning"
	"github.com/codesession/codesession/messages"
)

// Scenario files (testdata/*.txt) script the core one input per line and
// hold the expected transcript below a "----" line:
//
//	# comment (echoed)
//	new max_rounds=2            optional first line: the spec
//	created
//	baseline 1
//	agent 1 tool_use t1 Write {"file_path":"a.go"}
//	read r1
//	----
//	> created
//	  dc baseline 1
//	  meta status=running posture=default rounds=0
//	...
//
// Each input advances the clock by one second. The transcript echoes each
// input ("> ...") followed by what it returned ("=> ...") and the drained
// Output: events ("ev seq t<turn> type {fields}"), the record ("meta ..."),
// transport commands ("tx ..."), diff capture commands ("dc ...") and
// read-turn replies ("reply rN ..."). "state", "facts" (what the inferred
// verdict is decided from) and "store" (the store-failure streak) print
// the core's state. Regenerate the transcripts with
//
//	go test ./actors/session -run Scenario -rewrite
//
// and read the diff before committing it.
var rewriteScenarios = flag.Bool("rewrite", false, "rewrite the expected transcripts of testdata/*.txt scenarios")

const scenarioSeparator = "----"

func TestScenario(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no scenario files")
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			require.NoError(t, err)
			script, want, _ := strings.Cut(string(raw), "\n"+scenarioSeparator+"\n")
			script = strings.TrimSuffix(script, "\n"+scenarioSeparator)
			got := runScenario(t, script)
			if *rewriteScenarios {
				require.NoError(t, os.WriteFile(file, []byte(script+"\n"+scenarioSeparator+"\n"+got), 0o644))
				return
			}
			require.Equal(t, want, got, "transcript of %s differs; run with -rewrite and review the diff", file)
		})
	}
}

type scenario struct {
	t   *testing.T
	c   *Core
	now time.Time
	b   strings.Builder
}

func runScenario(t *testing.T, script string) string {
	s := &scenario{t: t, now: t0}
	for i, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			if s.c != nil { // the header comment is not repeated
				s.b.WriteString(line + "\n")
			}
			continue
		}
		toks, err := tokenize(line)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if toks[0] == "new" {
			if s.c != nil {
				t.Fatalf("line %d: new must be the first input", i+1)
			}
			s.b.WriteString("> " + line + "\n")
			s.c = New(scenarioSpec(t, toks[1:]), s.now, uintArg(t, kv(toks[1:])["last_seq"]))
			if v := kv(toks[1:])["give_up"]; v != "" {
				s.c.SetStoreGiveUp(intArg(t, v))
			}
			continue
		}
		if s.c == nil {
			s.c = New(scenarioSpec(t, nil), s.now, 0)
		}
		s.b.WriteString("> " + line + "\n")
		s.now = s.now.Add(time.Second)
		if ret := s.exec(toks); ret != "" {
			s.b.WriteString("  => " + ret + "\n")
		}
		s.render(s.c.Drain())
	}
	return s.b.String()
}

// tokenize splits a line into words, Go-quoted strings (unquoted) and JSON
// objects or arrays (kept verbatim).
func tokenize(line string) ([]string, error) {
	var toks []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		switch line[0] {
		case '"':
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, fmt.Errorf("bad string at %q: %v", line, err)
			}
			u, _ := strconv.Unquote(q)
			toks = append(toks, u)
			line = line[len(q):]
		case '{', '[':
			n, err := jsonPrefix(line)
			if err != nil {
				return nil, err
			}
			toks = append(toks, line[:n])
			line = line[n:]
		default:
			w, rest, _ := strings.Cut(line, " ")
			// key="quoted value"
			if k, v, ok := strings.Cut(w, "="); ok && strings.HasPrefix(v, `"`) {
				q, err := strconv.QuotedPrefix(line[len(k)+1:])
				if err != nil {
					return nil, fmt.Errorf("bad string at %q: %v", line, err)
				}
				u, _ := strconv.Unquote(q)
				toks = append(toks, k+"="+u)
				line = line[len(k)+1+len(q):]
				continue
			}
			toks = append(toks, w)
			line = rest
		}
	}
	return toks, nil
}

func jsonPrefix(s string) (int, error) {
	depth, inStr, esc := 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				if !json.Valid([]byte(s[:i+1])) {
					return 0, fmt.Errorf("invalid JSON %q", s[:i+1])
				}
				return i + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unterminated JSON in %q", s)
}

// kv collects key=value tokens.
func kv(toks []string) map[string]string {
	m := map[string]string{}
	for _, t := range toks {
		if k, v, ok := strings.Cut(t, "="); ok {
			m[k] = v
		}
	}
	return m
}

func has(toks []string, w string) bool {
	for _, t := range toks {
		if t == w {
			return true
		}
	}
	return false
}

func uintArg(t *testing.T, s string) uint64 {
	if s == "" {
		return 0
	}
	n, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err)
	return n
}

func intArg(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "want a number, got %q", s)
	return n
}

func floatArg(t *testing.T, s string) float64 {
	if s == "" {
		return 0
	}
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err)
	return f
}

func tokenArg(t *testing.T, s string) uint64 {
	require.True(t, strings.HasPrefix(s, "r"), "a reader is named rN, got %q", s)
	return uintArg(t, s[1:])
}

// arg returns toks[i], or "" past the end.
func arg(toks []string, i int) string {
	if i < len(toks) {
		return toks[i]
	}
	return ""
}

// scenarioSpec is testSpec adjusted by the words of a "new" line:
// max_rounds=N max_posture=P posture=P brief="..." model=<selection>
// give_up=N (the store give-up count)
// effort=<support> no_steer no_interrupt no_set_posture.
func scenarioSpec(t *testing.T, toks []string) Spec {
	spec := testSpec()
	m := kv(toks)
	if v := m["max_rounds"]; v != "" {
		spec.MaxRounds = intArg(t, v)
	}
	if v := m["max_posture"]; v != "" {
		spec.MaxPosture = messages.Posture(v)
	}
	if v := m["posture"]; v != "" {
		spec.Posture = messages.Posture(v)
	}
	if v, ok := m["brief"]; ok {
		spec.Brief = v
	}
	if v := m["model"]; v != "" {
		spec.Descriptor.ModelSelection = messages.ModelSelection(v)
	}
	if v := m["effort"]; v != "" {
		spec.Descriptor.EffortSupport = messages.EffortSupport(v)
	}
	if has(toks, "no_interrupt") {
		spec.Descriptor.Live.Interrupt = false
	}
	if has(toks, "no_set_posture") {
		spec.Descriptor.Live.SetPosture = false
	}
	if has(toks, "no_steer") {
		spec.Descriptor.Live.GuideModes = []messages.GuideMode{messages.GuideQueue, messages.GuideInterrupt}
	}
	return spec
}

func errRet(err error) string {
	if err != nil {
		return "err " + err.Error()
	}
	return "ok"
}

func (s *scenario) exec(toks []string) string {
	t, c, now := s.t, s.c, s.now
	args := toks[1:]
	switch toks[0] {
	case "created":
		c.Created(now)
	case "baseline":
		c.BaselineReady(now, intArg(t, arg(args, 0)))
	case "agent":
		c.AgentEvent(now, intArg(t, arg(args, 0)), scenarioEvent(t, args[1:]))
	case "diff":
		c.DiffReady(now, intArg(t, arg(args, 0)), scenarioDiff(args[1:]))
	case "persisted":
		seq := c.LastSeq()
		if a := arg(args, 0); a != "all" {
			seq = uintArg(t, a)
		}
		var err error
		if e := arg(args, 1); e != "" {
			err = fmt.Errorf("%s", e)
		}
		c.Persisted(now, seq, err)
	case "read":
		return errRet(c.ReadTurn(tokenArg(t, arg(args, 0)), has(args, "diff")))
	case "cancel":
		return strconv.FormatBool(c.CancelRead(tokenArg(t, arg(args, 0))))
	case "answer":
		res, err := c.Answer(now, messages.Answer{SessionID: testSessionID, ClarificationID: arg(args, 0),
			Decision: messages.Decision(arg(args, 1)), Reason: arg(args, 2)})
		if err != nil {
			return errRet(err)
		}
		return fmt.Sprintf("ok %s %s %s", res.Clarification.ID, res.Clarification.ToolName, res.Clarification.Decision)
	case "guide":
		m := kv(args)
		g := messages.Guide{SessionID: testSessionID, Mode: messages.GuideMode(arg(args, 0)), Text: arg(args, 1),
			Model: m["model"], Effort: messages.Effort(m["effort"])}
		if has(args, "user") {
			g.Source = messages.SourceUser
		}
		return errRet(c.Guide(now, g))
	case "posture":
		res, err := c.SetPosture(now, messages.Posture(arg(args, 0)))
		if err != nil {
			return errRet(err)
		}
		return "ok " + string(res.Posture)
	case "interrupt":
		return errRet(c.Interrupt(now))
	case "transport_failed":
		c.TransportFailed(now, intArg(t, arg(args, 0)), arg(args, 1))
	case "supervised":
		c.Supervised(now, arg(args, 0), arg(args, 1))
	case "release":
		m := kv(args)
		o := c.BeginRelease(now, messages.ReleaseReason(arg(args, 0)), messages.Outcome(m["outcome"]), m["note"], m["why"])
		return "outcome " + string(o)
	case "finish":
		return fmt.Sprintf("seq %d", c.FinishRelease(now))
	case "state":
		return s.state()
	case "facts":
		f := c.outcomeFacts()
		return fmt.Sprintf("completed=%d last=%s/%s running=%t infer=%s", f.CompletedTurns, f.LastKind, f.LastState, f.TurnRunning, learning.InferOutcome(f))
	case "store":
		return fmt.Sprintf("fails_in_a_row=%d gave_up=%t unavailable=%t", c.storeFails, c.StoreGaveUp(), c.storeUnavailable("guide") != nil)
	default:
		t.Fatalf("unknown scenario input %q", toks[0])
	}
	return ""
}

func (s *scenario) state() string {
	c := s.c
	pending, reader := "-", "-"
	if p := c.Pending(); p != nil {
		pending = p.ID
	}
	if c.reader != nil {
		reader = fmt.Sprintf("r%d", c.reader.token)
	}
	return fmt.Sprintf("phase=%s turn=%d seq=%d durable=%d pending=%s reader=%s queued=%d guidance=%d carry=%d diet=%d",
		c.phase, c.turn, c.seq, c.durableSeq, pending, reader, len(c.queue), len(c.guidance), len(c.carry), c.diet.Len())
}

// scenarioEvent builds an agent event from "<type> args...".
func scenarioEvent(t *testing.T, toks []string) messages.Event {
	typ := arg(toks, 0)
	args := toks[1:]
	m := kv(args)
	ev := messages.Event{Type: messages.EventType(typ)}
	switch ev.Type {
	case messages.EvText, messages.EvThinking, messages.EvWarning:
		ev.Text = arg(args, 0)
	case "delta":
		ev.Type, ev.Text, ev.Delta = messages.EvText, arg(args, 0), true
	case messages.EvToolUse:
		ev.ToolUseID, ev.ToolName, ev.Input = arg(args, 0), arg(args, 1), json.RawMessage(arg(args, 2))
	case messages.EvToolResult:
		ev.ToolUseID, ev.Output, ev.IsError = arg(args, 0), arg(args, 1), has(args, "error")
	case messages.EvClarification:
		ev.ClarificationID, ev.ToolName, ev.Input = arg(args, 0), arg(args, 1), json.RawMessage(arg(args, 2))
	case messages.EvTurnEnd:
		for _, a := range args {
			if !strings.Contains(a, "=") {
				if st := messages.TurnState(a); st.Valid() && ev.State == "" {
					ev.State = st
				} else {
					ev.Text = a
				}
			}
		}
		ev.CostUSD, ev.TotalCostUSD = floatArg(t, m["cost"]), floatArg(t, m["total"])
		if n := m["num"]; n != "" {
			ev.NumTurns = intArg(t, n)
		}
	case messages.EvEnded:
		ev.Text = arg(args, 0)
	case messages.EvError:
		ev.Fatal = has(args, "fatal")
		for _, a := range args {
			if a != "fatal" {
				ev.Text = a
			}
		}
	case messages.EvStarted:
		ev.ExternalSessionID, ev.Model = arg(args, 0), arg(args, 1)
	default:
		t.Fatalf("unknown agent event %q", typ)
	}
	return ev
}

// scenarioDiff builds a diff: "none" for no diff at all, else the listed
// paths as modified files.
func scenarioDiff(toks []string) *messages.TurnDiff {
	if has(toks, "none") {
		return nil
	}
	d := &messages.TurnDiff{Source: messages.DiffGit, Files: []messages.FileChange{}}
	var unified strings.Builder
	for _, p := range toks {
		d.Files = append(d.Files, messages.FileChange{Path: p, Status: "M", Insertions: 1})
		fmt.Fprintf(&unified, "diff --git a/%s b/%s\n+x\n", p, p)
	}
	d.Summary = fmt.Sprintf("%d files changed", len(d.Files))
	d.UnifiedDiff = unified.String()
	return d
}

func (s *scenario) render(o Output) {
	w := func(format string, args ...any) { fmt.Fprintf(&s.b, "  "+format+"\n", args...) }
	for _, e := range o.Events {
		ev := e.Event
		diff := ev.Diff
		ev.Type, ev.Diff = "", nil
		fields, _ := json.Marshal(ev)
		line := fmt.Sprintf("ev %d t%d %s", e.Seq, e.Turn, e.Event.Type)
		if string(fields) != `{"type":""}` {
			line += " " + strings.Replace(string(fields), `"type":"",`, "", 1)
		}
		if diff != nil {
			line += " " + renderDiff(diff)
		}
		w("%s", line)
	}
	if r := o.Meta; r != nil {
		line := fmt.Sprintf("meta status=%s posture=%s rounds=%d", r.Status, r.Posture, r.RoundsElapsed)
		if r.Model != "" {
			line += " model=" + r.Model
		}
		if r.Effort != "" {
			line += " effort=" + string(r.Effort)
		}
		if r.CostUSD != 0 {
			line += fmt.Sprintf(" cost=%g", r.CostUSD)
		}
		if ext := r.LatestRun().ExternalSessionID; ext != "" {
			line += " ext=" + ext
		}
		if r.Outcome != "" {
			line += " outcome=" + string(r.Outcome)
		}
		if r.OutcomeNote != "" {
			line += fmt.Sprintf(" note=%q", r.OutcomeNote)
		}
		w("%s", line)
	}
	for _, x := range o.Transport {
		switch x := x.(type) {
		case TStartTurn:
			w("tx start_turn %d %q", x.Turn, x.Input)
		case TAnswer:
			w("tx answer %s %s %q", x.ClarificationID, x.Decision, x.Reason)
		case TInterrupt:
			w("tx interrupt")
		case TSteer:
			w("tx steer %q", x.Text)
		case TSetModel:
			w("tx set_model model=%q effort=%q", x.Model, x.Effort)
		case TSetPosture:
			w("tx set_posture %s", x.Posture)
		default:
			w("tx %#v", x)
		}
	}
	for _, x := range o.Diff {
		switch x := x.(type) {
		case DBaseline:
			w("dc baseline %d", x.Turn)
		case DFinish:
			w("dc finish %d %v", x.Turn, x.EditPaths)
		case DPrepare:
			w("dc prepare %d", x.Turn)
		default:
			w("dc %#v", x)
		}
	}
	for _, r := range o.Replies {
		if r.Err != nil {
			w("reply r%d err %v", r.Token, r.Err)
			continue
		}
		s.renderResult(r.Token, r.Result)
	}
}

func renderDiff(d *messages.TurnDiff) string {
	var files []string
	for _, f := range d.Files {
		files = append(files, f.Status+" "+f.Path)
	}
	u := "no"
	if d.UnifiedDiff != "" {
		u = "yes"
	}
	return fmt.Sprintf("diff{source=%s files=[%s] summary=%q unified=%s}", d.Source, strings.Join(files, ", "), d.Summary, u)
}

func (s *scenario) renderResult(token uint64, r messages.TurnResult) {
	if err := r.Validate(); err != nil {
		s.t.Errorf("reply r%d: invalid result: %v", token, err)
	}
	if r.SessionID != testSessionID {
		s.t.Errorf("reply r%d: session id %q", token, r.SessionID)
	}
	parts := []string{fmt.Sprintf("reply r%d %s turn=%d", token, r.Kind, r.Turn)}
	add := func(cond bool, format string, args ...any) {
		if cond {
			parts = append(parts, fmt.Sprintf(format, args...))
		}
	}
	add(r.State != "", "state=%s", r.State)
	add(r.OK, "ok=true")
	add(r.Rounds != 0, "rounds=%d", r.Rounds)
	add(r.ClarificationID != "", "id=%s tool=%s input=%s", r.ClarificationID, r.ToolName, string(r.Input))
	add(r.Text != "", "text=%q", r.Text)
	add(r.Message != "", "message=%q", r.Message)
	add(r.Code != "", "code=%s", r.Code)
	add(r.NumTurns != 0, "num_turns=%d", r.NumTurns)
	add(r.CostUSD != 0, "cost=%g", r.CostUSD)
	fmt.Fprintf(&s.b, "  %s\n", strings.Join(parts, " "))
	for _, a := range r.Actions {
		line := fmt.Sprintf("    action %s %s %s", a.ToolUseID, a.ToolName, string(a.Input))
		if a.Result != "" || a.IsError {
			line += fmt.Sprintf(" -> %q", a.Result)
		}
		if a.IsError {
			line += " (error)"
		}
		s.b.WriteString(line + "\n")
	}
	if r.TurnDiff != nil {
		s.b.WriteString("    " + renderDiff(r.TurnDiff) + "\n")
	}
	for _, h := range r.RoundHistory {
		pin := ""
		if h.Pinned {
			pin = " (pinned)"
		}
		fmt.Fprintf(&s.b, "    history t%d %s%s: %s\n", h.Turn, h.Kind, pin, h.Text)
	}
}

// TestScenarioFilesAreWellFormed keeps -rewrite honest: every file has a
// transcript and every input line appears in it.
func TestScenarioFilesAreWellFormed(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 5)
	sort.Strings(files)
	for _, file := range files {
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		script, want, ok := strings.Cut(string(raw), "\n"+scenarioSeparator+"\n")
		require.True(t, ok, "%s has no %s line", file, scenarioSeparator)
		for _, line := range strings.Split(script, "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				require.Contains(t, want, "> "+line+"\n", "%s: input not in the transcript", file)
			}
		}
	}
}
