package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/codesession/codesession/messages"
)

// printer renders a driven session: human-readable text, or JSON lines.
type printer interface {
	// started reports the session's start (d is its backend's descriptor).
	started(st messages.StartResult, d messages.Descriptor)
	// result reports one read-turn result.
	result(r messages.TurnResult)
	// answered reports the answer given to a clarification.
	answered(d messages.Decision, reason string)
	// guided reports guidance sent for the next turn.
	guided(text string)
	// stopped reports the session's stop and its verdict; it is the last line.
	stopped(sid string, res messages.StopResult)
	// note says something to the person at the terminal (never on a JSON stdout).
	note(format string, args ...any)
}

func newPrinter(jsonOut bool, stdout, stderr io.Writer, cwd string) printer {
	if jsonOut {
		return &jsonPrinter{out: stdout, errw: stderr}
	}
	return &textPrinter{w: stdout, cwd: cwd}
}

// stoppedLine is the last JSON line of a driven session.
type stoppedLine struct {
	Kind      string           `json:"kind"`
	SessionID string           `json:"sessionId"`
	Outcome   messages.Outcome `json:"outcome"`
}

// stoppedKind is stoppedLine's kind; it is not a read-turn kind.
const stoppedKind = "stopped"

// jsonPrinter writes one JSON object per line on stdout: every read-turn
// result exactly as messages.TurnResult marshals, then the stopped line.
// Everything else goes to stderr.
type jsonPrinter struct {
	out, errw io.Writer
}

func (p *jsonPrinter) line(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(p.errw, "codesession: cannot encode %T: %v\n", v, err)
		return
	}
	p.out.Write(append(b, '\n'))
}

func (p *jsonPrinter) started(st messages.StartResult, d messages.Descriptor) {
	p.note("session %s started on backend %s%s", st.SessionID, st.Backend, scriptedLabel(d))
	for _, w := range st.Warnings {
		p.note("warning: %s", w)
	}
	if st.Worktree != nil {
		p.note("worktree %s (branch %s)", st.Worktree.Path, st.Worktree.Branch)
	}
}
func (p *jsonPrinter) result(r messages.TurnResult)       { p.line(r) }
func (p *jsonPrinter) answered(messages.Decision, string) {}
func (p *jsonPrinter) guided(string)                      {}
func (p *jsonPrinter) note(format string, args ...any)    { fmt.Fprintf(p.errw, format+"\n", args...) }
func (p *jsonPrinter) stopped(sid string, res messages.StopResult) {
	p.line(stoppedLine{Kind: stoppedKind, SessionID: sid, Outcome: res.Outcome})
}

// scriptedLabel says loudly that a backend is scripted.
func scriptedLabel(d messages.Descriptor) string {
	if d.Scripted {
		return " -- SCRIPTED: it replays a fixed scenario and never calls a model"
	}
	return ""
}

// textPrinter writes a human-readable account.
type textPrinter struct {
	w     io.Writer
	wt    *messages.Worktree // the session's, when isolated: said again at stop
	cwd   string             // paths inside it are shown relative
	color bool               // colour unified diffs
	live  *liveText          // the text streamed as it is written (live.go); nil: none
}

func (p *textPrinter) printf(format string, args ...any) { fmt.Fprintf(p.w, format, args...) }

func (p *textPrinter) note(format string, args ...any) { p.printf(format+"\n", args...) }

func (p *textPrinter) started(st messages.StartResult, d messages.Descriptor) {
	name := st.Backend
	if d.DisplayName != "" {
		name = d.DisplayName
	}
	p.printf("session %s started\n", st.SessionID)
	p.wt = st.Worktree
	p.printf("  backend   %s%s\n", name, scriptedLabel(d))
	p.printf("  posture   %s (ceiling %s)\n", st.Posture, st.MaxPosture)
	rounds := "unlimited"
	if st.MaxRounds > 0 {
		rounds = fmt.Sprint(st.MaxRounds)
	}
	p.printf("  rounds    at most %s%s\n", rounds, budgetText(st.MaxCostUSD))
	if st.Model != "" || st.Effort != "" {
		p.printf("  model     %s %s\n", orDash(st.Model), st.Effort)
	}
	writeWorktree(p.w, st.Worktree)
	for _, w := range st.Warnings {
		p.printf("  warning   %s\n", w)
	}
}

func (p *textPrinter) result(r messages.TurnResult) {
	streamed := p.live.flush()
	head := fmt.Sprintf("== turn %d: %s", r.Turn, r.Kind)
	switch r.Kind {
	case messages.KindTurnComplete:
		if r.State != "" && r.State != messages.TurnCompleted {
			head += " (" + string(r.State) + ")"
		}
	case messages.KindEnded:
		head += " (the agent ended the session)"
	case messages.KindError:
		if r.Code != "" {
			head += " [" + string(r.Code) + "]"
		}
	case messages.KindMaxRounds:
		head += fmt.Sprintf(" (after %d rounds)", r.Rounds)
	case messages.KindMaxBudget:
		head += fmt.Sprintf(" (the session cost $%.4f, its budget reached; after %d rounds)", r.CostUSD, r.Rounds)
	}
	if r.CostUSD > 0 && r.Kind != messages.KindMaxBudget {
		head += fmt.Sprintf("  cost $%.4f", r.CostUSD)
	}
	p.printf("%s\n", head)
	switch r.Kind {
	case messages.KindClarification:
		p.printf("   %s asks permission: %s\n", r.ToolName, compactJSON(r.Input, 300))
		return
	case messages.KindError:
		p.indent(r.Message)
	default:
		if !streamed { // the live text has shown it already: once is enough
			p.indent(r.Text)
		}
	}
	if len(r.Actions) > 0 {
		p.printf("   actions:\n")
		for _, a := range r.Actions {
			line := a.ToolName
			if s := p.actionSubject(a.Input); s != "" {
				line += " " + s
			}
			if a.IsError {
				line += "  [error: " + oneLine(a.Result, 120) + "]"
			}
			p.printf("     %s\n", line)
		}
	}
	if d := r.TurnDiff; d != nil {
		p.printf("   ")
		p.diffFiles(d)
		writeUnified(p.w, d.UnifiedDiff, p.color)
	}
}

// diffFiles prints a turn diff's summary line and its file list.
func (p *textPrinter) diffFiles(d *messages.TurnDiff) {
	p.printf("diff (%s): %s\n", d.Source, oneLine(d.Summary, 200))
	for _, f := range d.Files {
		path := f.Path
		if f.OldPath != "" {
			path = f.OldPath + " -> " + f.Path
		}
		counts := ""
		if f.Binary {
			counts = " (binary)"
		} else if f.Insertions > 0 || f.Deletions > 0 {
			counts = fmt.Sprintf(" +%d -%d", f.Insertions, f.Deletions)
		}
		p.printf("     %s %s%s\n", f.Status, path, counts)
	}
	if d.FilesOmitted > 0 {
		p.printf("     ... and %d more files\n", d.FilesOmitted)
	}
	if d.Truncated {
		p.printf("     (the unified diff was truncated)\n")
	}
	if d.Warning != "" {
		p.printf("     warning: %s\n", oneLine(d.Warning, 200))
	}
}

func (p *textPrinter) answered(d messages.Decision, reason string) {
	if reason != "" {
		p.printf("   answered %s: %s\n", d, oneLine(reason, 200))
		return
	}
	p.printf("   answered %s\n", d)
}

func (p *textPrinter) guided(text string) {
	p.printf("-> guidance for the next turn: %s\n", oneLine(text, 200))
}

func (p *textPrinter) stopped(sid string, res messages.StopResult) {
	already := ""
	if res.AlreadyStopped {
		already = " (it had already stopped)"
	}
	p.printf("stopped session %s: outcome %s%s\n", sid, orDash(string(res.Outcome)), already)
	writeWorktreeAtStop(p.w, p.wt)
}

func (p *textPrinter) indent(text string) {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return
	}
	for _, l := range strings.Split(text, "\n") {
		p.printf("   %s\n", l)
	}
}

// actionSubject picks what an action acted on from its input: a path, a
// command or a pattern; else the compact input.
func (p *textPrinter) actionSubject(input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) != nil {
		return compactJSON(input, 100)
	}
	for _, k := range []string{"file_path", "path", "command", "pattern", "url", "query"} {
		if s, ok := m[k].(string); ok && s != "" {
			if k == "file_path" || k == "path" {
				s = p.rel(s)
			}
			return oneLine(s, 120)
		}
	}
	if len(m) == 0 {
		return ""
	}
	return compactJSON(input, 100)
}

func (p *textPrinter) rel(path string) string {
	if p.cwd == "" || !filepath.IsAbs(path) {
		return path
	}
	if r, err := filepath.Rel(p.cwd, path); err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return r
	}
	return path
}

func compactJSON(raw json.RawMessage, max int) string {
	if len(raw) == 0 {
		return "{}"
	}
	return oneLine(plainJSON(raw), max)
}

// oneLine folds s onto one line and cuts it at max bytes (at a rune
// boundary), marking the cut.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= max {
		return s
	}
	return cutUTF8(s, max) + "..."
}

// cutUTF8 cuts s to at most n bytes without splitting a rune.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
