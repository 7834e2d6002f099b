package script

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
)

// ReplyExhausted is the text a session answers with once every turn of its
// scenario has been used and the scenario has no fallback turn.
const ReplyExhausted = "nothing more to do"

// Scenario is what a scripted session replays: a list of turns, each a list
// of steps. A Scenario is read-only once a session uses it; sessions keep
// their own position in it, so one Scenario may serve many sessions.
type Scenario struct {
	// Turns are picked per StartTurn (see Turn.Match); each is used once.
	Turns []Turn `json:"turns"`
	// Fallback, when set, answers every turn once Turns are exhausted (or
	// none matches). Without it such a turn answers ReplyExhausted.
	Fallback *Turn `json:"fallback,omitempty"`
}

// Turn is one scripted turn.
type Turn struct {
	// Match, when not empty, makes the turn eligible only for an input that
	// contains it (a case-sensitive substring), and preferred over the
	// unmatched turns for such an input.
	Match string `json:"match,omitempty"`
	Steps []Step `json:"steps"`
	// CostUSD is charged when the turn ends with an EvTurnEnd, whatever its
	// state (not on a crash or an end step).
	CostUSD float64 `json:"costUsd,omitempty"`
}

// Step is one scripted action. Exactly one of its fields is set; the
// constructors (Text, Tool, Write, ...) build valid steps.
type Step struct {
	// Text is assistant text: emitted as incremental EvText deltas and then
	// one complete non-delta EvText. Placeholders are expanded (see the package doc).
	Text *string `json:"text,omitempty"`
	// Thinking is emitted as one EvThinking. Placeholders are expanded.
	Thinking *string `json:"thinking,omitempty"`
	// Tool is a tool call whose result is scripted.
	Tool *ToolStep `json:"tool,omitempty"`
	// Write really writes a file inside the session's working directory.
	Write *WriteStep `json:"write,omitempty"`
	// Edit really replaces one exact occurrence of a string in a file.
	Edit *EditStep `json:"edit,omitempty"`
	// Delete really removes a file.
	Delete *DeleteStep `json:"delete,omitempty"`
	// Delay waits; an interrupt or Close cuts it short.
	Delay *Duration `json:"delay,omitempty"`
	// Fail makes the turn fail: EvError, then EvTurnEnd{State: error}.
	Fail *string `json:"fail,omitempty"`
	// Crash simulates the backend dying: a fatal EvError, and the session
	// is dead.
	Crash *string `json:"crash,omitempty"`
	// End makes the agent close the session itself: EvEnded.
	End *string `json:"end,omitempty"`
}

// ToolStep is a scripted tool call: the call is emitted, and its output is
// the scripted one (nothing runs).
type ToolStep struct {
	Name string `json:"name"`
	// Input is the call's input, a JSON object; empty means {}.
	Input   json.RawMessage `json:"input,omitempty"`
	Output  string          `json:"output,omitempty"`
	IsError bool            `json:"isError,omitempty"`
	// Ask raises a clarification before the call runs (posture permitting).
	Ask bool `json:"ask,omitempty"`
}

// WriteStep writes Content to Path (relative to the working directory, or
// absolute inside it), creating parent directories.
type WriteStep struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Ask     bool   `json:"ask,omitempty"`
}

// EditStep replaces the one occurrence of Old in Path by New.
type EditStep struct {
	Path string `json:"path"`
	Old  string `json:"old"`
	New  string `json:"new"`
	Ask  bool   `json:"ask,omitempty"`
}

// DeleteStep removes the file at Path.
type DeleteStep struct {
	Path string `json:"path"`
	Ask  bool   `json:"ask,omitempty"`
}

// Duration is a time.Duration written in JSON as a Go duration string
// ("50ms", "2s").
type Duration = messages.Duration

// Text returns a text step.
func Text(s string) Step { return Step{Text: &s} }

// Thinking returns a thinking step.
func Thinking(s string) Step { return Step{Thinking: &s} }

// Tool returns a tool step; input is marshalled to JSON (nil, or anything
// that marshals to null, means {}).
// An input that does not marshal to a JSON object makes Validate fail.
func Tool(name string, input any, output string) Step {
	var raw json.RawMessage
	if input != nil {
		b, err := json.Marshal(input)
		if err != nil {
			// Keep the step invalid rather than silently dropping the input.
			b = []byte(`"unmarshallable input"`)
		}
		if string(b) != "null" {
			raw = b
		}
	}
	return Step{Tool: &ToolStep{Name: name, Input: raw, Output: output}}
}

// Write returns a write step.
func Write(path, content string) Step {
	return Step{Write: &WriteStep{Path: path, Content: content}}
}

// Edit returns an edit step.
func Edit(path, old, new string) Step {
	return Step{Edit: &EditStep{Path: path, Old: old, New: new}}
}

// Delete returns a delete step.
func Delete(path string) Step { return Step{Delete: &DeleteStep{Path: path}} }

// Delay returns a delay step.
func Delay(d time.Duration) Step { v := Duration(d); return Step{Delay: &v} }

// Fail returns a fail step.
func Fail(msg string) Step { return Step{Fail: &msg} }

// Crash returns a crash step.
func Crash(msg string) Step { return Step{Crash: &msg} }

// End returns an end step.
func End(text string) Step { return Step{End: &text} }

// Asking returns a copy of s whose tool, write, edit or delete action asks
// for permission first; other steps are returned unchanged.
func (s Step) Asking() Step {
	switch {
	case s.Tool != nil:
		c := *s.Tool
		c.Ask = true
		s.Tool = &c
	case s.Write != nil:
		c := *s.Write
		c.Ask = true
		s.Write = &c
	case s.Edit != nil:
		c := *s.Edit
		c.Ask = true
		s.Edit = &c
	case s.Delete != nil:
		c := *s.Delete
		c.Ask = true
		s.Delete = &c
	}
	return s
}

// actionKeys are a step's keys, in the order they are documented.
var actionKeys = []string{"text", "thinking", "tool", "write", "edit", "delete", "delay", "fail", "crash", "end"}

// actions lists the JSON keys of the actions set on s.
func (s *Step) actions() []string {
	set := []bool{s.Text != nil, s.Thinking != nil, s.Tool != nil, s.Write != nil, s.Edit != nil,
		s.Delete != nil, s.Delay != nil, s.Fail != nil, s.Crash != nil, s.End != nil}
	var keys []string
	for i, ok := range set {
		if ok {
			keys = append(keys, actionKeys[i])
		}
	}
	return keys
}

// terminal reports whether the step closes its turn (or the session).
func (s *Step) terminal() bool { return s.Fail != nil || s.Crash != nil || s.End != nil }

// Validate checks the scenario's semantic rules: exactly one action per
// step, required fields present, no step after one that closes the turn,
// non-negative delays and costs, tool inputs that are JSON objects, and no
// match on the fallback turn. The error is a *messages.Error with code
// invalid whose Field is the JSON path of the offending value, such as
// "turns[1].steps[2].delay".
func (sc *Scenario) Validate() error {
	if sc == nil {
		return scenarioErr("", "scenario is nil")
	}
	for i := range sc.Turns {
		if err := sc.Turns[i].validate(fmt.Sprintf("turns[%d]", i)); err != nil {
			return err
		}
	}
	if sc.Fallback != nil {
		if sc.Fallback.Match != "" {
			return scenarioErr("fallback.match", "the fallback turn answers any input; it takes no match")
		}
		if err := sc.Fallback.validate("fallback"); err != nil {
			return err
		}
	}
	return nil
}

func (t *Turn) validate(at string) error {
	if math.IsNaN(t.CostUSD) || math.IsInf(t.CostUSD, 0) || t.CostUSD < 0 {
		return scenarioErr(at+".costUsd", "must be a finite number >= 0")
	}
	for j := range t.Steps {
		sat := fmt.Sprintf("%s.steps[%d]", at, j)
		if j > 0 && t.Steps[j-1].terminal() {
			return scenarioErr(sat, "unreachable: it follows a %q step, which closes the turn",
				t.Steps[j-1].actions()[0])
		}
		if err := t.Steps[j].validate(sat); err != nil {
			return err
		}
	}
	return nil
}

func (s *Step) validate(at string) error {
	keys := s.actions()
	switch len(keys) {
	case 0:
		return scenarioErr(at, "step has no action; want exactly one of %s", strings.Join(actionKeys, ", "))
	case 1:
	default:
		return scenarioErr(at, "step has %d actions (%s); want exactly one", len(keys), strings.Join(keys, ", "))
	}
	switch {
	case s.Tool != nil:
		if s.Tool.Name == "" {
			return scenarioErr(at+".tool.name", "required")
		}
		if len(s.Tool.Input) > 0 {
			in := bytes.TrimSpace(s.Tool.Input)
			if len(in) == 0 || in[0] != '{' || !json.Valid(in) {
				return scenarioErr(at+".tool.input", "must be a JSON object")
			}
		}
	case s.Write != nil:
		return validPath(at+".write.path", s.Write.Path)
	case s.Edit != nil:
		if err := validPath(at+".edit.path", s.Edit.Path); err != nil {
			return err
		}
		if s.Edit.Old == "" {
			return scenarioErr(at+".edit.old", "required: the exact text to replace")
		}
	case s.Delete != nil:
		return validPath(at+".delete.path", s.Delete.Path)
	case s.Delay != nil:
		if *s.Delay < 0 {
			return scenarioErr(at+".delay", "must not be negative")
		}
	}
	return nil
}

// validPath checks what can be checked before a session runs; whether the
// path stays inside the workspace is decided when the step runs, so a
// scenario can test the refusal.
func validPath(at, p string) error {
	if p == "" {
		return scenarioErr(at, "required")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return scenarioErr(at, "must not contain a NUL byte")
	}
	return nil
}

// scenarioErr is the one error shape of this file and parse.go.
func scenarioErr(field, format string, args ...any) *messages.Error {
	return &messages.Error{Code: messages.CodeInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}
