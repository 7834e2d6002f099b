package modelmock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
)

// MaxScenarioBytes caps a scenario file.
const MaxScenarioBytes = 8 << 20

// Scenario is what the scripted model answers, independent of the wire it
// is asked over. It is data: rules, each mapping what the model receives to
// the responses it gives. A Scenario is read-only once a server uses it.
type Scenario struct {
	// Rules are tried in order; see the package doc for how one is picked.
	Rules []Rule `json:"rules"`
	// Default answers a prompt no rule matches (nil: DefaultReply).
	Default *Step `json:"default,omitempty"`
	// ToolResultDefault answers a tool result that nothing else answers
	// (nil: DefaultToolResultReply).
	ToolResultDefault *Step `json:"toolResultDefault,omitempty"`
}

// Rule maps a match to the model's responses.
type Rule struct {
	Match Match `json:"match"`
	// Steps are the model's successive responses within one agent turn:
	// Steps[0] answers the prompt, Steps[k] the k-th request after it (each
	// one carrying the tool results of the step before). A tool-result rule
	// has exactly one step.
	Steps []Step `json:"steps"`
	// Times is how many prompts the rule answers; 0 is unlimited. A spent
	// rule still continues the turns it started.
	Times int `json:"times,omitempty"`
}

// Match says what a rule answers. Text and Regex look at the prompt (the
// last user text); ToolResult and ToolResultRegex at the last tool result.
// A rule uses the prompt fields or the tool-result fields, never both; a
// match with no field answers every prompt.
type Match struct {
	Text            string `json:"text,omitempty"`
	Regex           string `json:"regex,omitempty"`
	ToolResult      string `json:"toolResult,omitempty"`
	ToolResultRegex string `json:"toolResultRegex,omitempty"`
}

// forToolResult reports whether the match looks at tool results.
func (m *Match) forToolResult() bool { return m.ToolResult != "" || m.ToolResultRegex != "" }

// matcher is a Match with its regular expression compiled.
type matcher struct {
	sub string
	re  *regexp.Regexp
}

// match tests s and returns the template groups ({{0}} is the whole match).
func (m matcher) match(s string) ([]string, bool) {
	if m.sub != "" && !strings.Contains(s, m.sub) {
		return nil, false
	}
	if m.re == nil {
		return []string{s}, true
	}
	g := m.re.FindStringSubmatch(s)
	if g == nil {
		return nil, false
	}
	return g, true
}

// Step is one model response: blocks in the order thinking, text, tools;
// or an error status.
type Step struct {
	Thinking string     `json:"thinking,omitempty"`
	Text     string     `json:"text,omitempty"`
	Tool     *ToolCall  `json:"tool,omitempty"`
	Tools    []ToolCall `json:"tools,omitempty"`
	Error    *ErrorStep `json:"error,omitempty"`

	// Delay is waited before the response starts (after the request is
	// recorded).
	Delay Duration `json:"delay,omitempty"`
	// Chunks splits the text (and thinking) into this many streamed
	// deltas (default 1), with ChunkDelay before each delta after the first.
	// A slow stream is many chunks with a delay.
	Chunks     int      `json:"chunks,omitempty"`
	ChunkDelay Duration `json:"chunkDelay,omitempty"`
	// StopReason overrides the stop reason ("tool_use" when the step calls
	// a tool, else "end_turn").
	StopReason string `json:"stopReason,omitempty"`
	// InputTokens and OutputTokens are reported as usage (defaults 100 and 20).
	InputTokens  int64 `json:"inputTokens,omitempty"`
	OutputTokens int64 `json:"outputTokens,omitempty"`
}

// ToolCall is a tool_use block. Input's string values are expanded as
// templates.
type ToolCall struct {
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty"`
	// ID is the tool_use id (default: minted by the server).
	ID string `json:"id,omitempty"`
}

// ErrorStep answers with an HTTP error status.
type ErrorStep struct {
	Status int `json:"status"`
	// Type is the wire's error type (default: derived from the status).
	Type    string `json:"type,omitempty"`
	Message string `json:"message,omitempty"`
	// RetryAfter, when set, is sent as the Retry-After header (seconds).
	RetryAfter string `json:"retryAfter,omitempty"`
}

// tools returns the step's tool calls, the shorthand first.
func (s *Step) tools() []ToolCall {
	if s.Tool == nil {
		return s.Tools
	}
	return append([]ToolCall{*s.Tool}, s.Tools...)
}

// Duration is a time.Duration written as a Go duration string ("250ms").
type Duration = messages.Duration

// Default replies: the conventions of the reference mock the agent CLIs
// were verified against.
var (
	DefaultReply           = Step{Text: "PONG(model={{model}}): {{input}}"}
	DefaultToolResultReply = Step{Text: "TOOL_DONE: is_error={{is_error}} result={{result}}"}
)

// Reference returns the scenario of the reference mock: "TOOL:WRITE <path> <text>" writes text plus a newline to path with
// Claude's Write tool, "TOOL:WRITE_NATIVE <path> <text>" the same with the
// native loop's write tool, "TOOL:BASH <cmd>" runs cmd with Bash, "TOOL:PATCH <path>
// <text>" adds path with Codex's apply_patch, "TOOL:SHELL <cmd>" runs cmd
// with Codex's exec_command, "SLOW" streams ten
// chunks one second apart, any other prompt is answered "PONG(model=M):
// <prompt>", and a tool result "TOOL_DONE: is_error=<bool> result=<output>".
func Reference() *Scenario {
	sc := &Scenario{Rules: []Rule{
		{Match: Match{Regex: `TOOL:WRITE (\S+) (.*)`}, Steps: []Step{
			{Tool: &ToolCall{Name: "Write", Input: json.RawMessage(`{"file_path":"{{1}}","content":"{{2}}\n"}`)}},
		}},
		// the native loop's own write tool ({path, content}, relative to the workspace)
		{Match: Match{Regex: `TOOL:WRITE_NATIVE (\S+) (.*)`}, Steps: []Step{
			{Tool: &ToolCall{Name: "write", Input: json.RawMessage(`{"path":"{{1}}","content":"{{2}}\n"}`)}},
		}},
		{Match: Match{Regex: `TOOL:BASH (.*)`}, Steps: []Step{
			{Tool: &ToolCall{Name: "Bash", Input: json.RawMessage(`{"command":"{{1}}","description":"run a command"}`)}},
		}},
		// Codex: apply_patch adding a file, exec_command
		{Match: Match{Regex: `TOOL:PATCH (\S+) (.*)`}, Steps: []Step{
			{Tool: &ToolCall{Name: "apply_patch", Input: json.RawMessage(`{"input":"*** Begin Patch\n*** Add File: {{1}}\n+{{2}}\n*** End Patch\n"}`)}},
		}},
		{Match: Match{Regex: `TOOL:SHELL (.*)`}, Steps: []Step{
			{Tool: &ToolCall{Name: "exec_command", Input: json.RawMessage(`{"cmd":"{{1}}"}`)}},
		}},
		{Match: Match{Text: "SLOW"}, Steps: []Step{
			{Text: "slow answer chunk 0 slow answer chunk 1 slow answer chunk 2 slow answer chunk 3 slow answer chunk 4 " +
				"slow answer chunk 5 slow answer chunk 6 slow answer chunk 7 slow answer chunk 8 slow answer chunk 9",
				Chunks: 10, ChunkDelay: Duration(time.Second)},
		}},
	}}
	if err := sc.Validate(); err != nil {
		panic(err) // a programming error in the literal above
	}
	return sc
}

// ParseScenario decodes a JSON scenario strictly (unknown keys and trailing
// data are errors) and validates it. Errors are *messages.Error with code
// invalid.
func ParseScenario(data []byte) (*Scenario, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var sc Scenario
	if err := dec.Decode(&sc); err != nil {
		return nil, messages.FieldError("modelmock", "scenario", "not a valid scenario: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, messages.FieldError("modelmock", "scenario", "trailing data after the scenario object")
	}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return &sc, nil
}

// LoadScenario reads and parses a scenario file; "builtin:reference" is
// Reference().
func LoadScenario(path string) (*Scenario, error) {
	if path == "builtin:reference" {
		return Reference(), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &messages.Error{Code: messages.CodeInvalid, Op: "modelmock", Field: "scenario",
			Message: fmt.Sprintf("scenario file %q: cannot open it", path), Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxScenarioBytes+1))
	if err != nil {
		return nil, &messages.Error{Code: messages.CodeInvalid, Op: "modelmock", Field: "scenario",
			Message: fmt.Sprintf("scenario file %q: cannot read it", path), Err: err}
	}
	if len(data) > MaxScenarioBytes {
		return nil, messages.FieldError("modelmock", "scenario", "scenario file %q is larger than %d bytes", path, MaxScenarioBytes)
	}
	sc, err := ParseScenario(data)
	if err != nil {
		e := messages.AsError("modelmock", err)
		return nil, &messages.Error{Code: messages.CodeInvalid, Op: "modelmock", Field: e.Field,
			Message: fmt.Sprintf("scenario file %q: %s", path, e.Message), Err: err}
	}
	return sc, nil
}

// Validate checks the scenario. It returns a *messages.Error with code
// invalid whose Field is the JSON path of the problem
// ("rules[2].steps[0].tool.name").
func (sc *Scenario) Validate() error {
	_, err := sc.compile()
	return err
}

// compile validates the scenario and compiles its matches, one per rule.
// It never changes the scenario, so one scenario may serve many servers.
func (sc *Scenario) compile() ([]matcher, error) {
	ms := make([]matcher, len(sc.Rules))
	for i := range sc.Rules {
		r := &sc.Rules[i]
		at := fmt.Sprintf("rules[%d]", i)
		m := &r.Match
		if (m.Text != "" || m.Regex != "") && m.forToolResult() {
			return nil, messages.FieldError("modelmock", at+".match", "a match looks at the prompt (text, regex) or at a tool result (toolResult, toolResultRegex), not both")
		}
		ms[i].sub = m.Text
		if m.forToolResult() {
			ms[i].sub = m.ToolResult
		}
		expr := m.Regex
		if m.forToolResult() {
			expr = m.ToolResultRegex
		}
		if expr != "" {
			re, err := regexp.Compile(expr)
			if err != nil {
				return nil, messages.FieldError("modelmock", at+".match", "bad regular expression: %v", err)
			}
			ms[i].re = re
		}
		if len(r.Steps) == 0 {
			return nil, messages.FieldError("modelmock", at+".steps", "a rule needs at least one step")
		}
		if m.forToolResult() && len(r.Steps) != 1 {
			return nil, messages.FieldError("modelmock", at+".steps", "a tool-result rule has exactly one step")
		}
		if r.Times < 0 {
			return nil, messages.FieldError("modelmock", at+".times", "must not be negative")
		}
		for j := range r.Steps {
			if err := r.Steps[j].validate(fmt.Sprintf("%s.steps[%d]", at, j)); err != nil {
				return nil, err
			}
		}
	}
	if sc.Default != nil {
		if err := sc.Default.validate("default"); err != nil {
			return nil, err
		}
	}
	if sc.ToolResultDefault != nil {
		if err := sc.ToolResultDefault.validate("toolResultDefault"); err != nil {
			return nil, err
		}
	}
	return ms, nil
}

func (s *Step) validate(at string) error {
	if s.Error != nil {
		if s.Text != "" || s.Thinking != "" || len(s.tools()) > 0 {
			return messages.FieldError("modelmock", at, "an error step has no text, thinking or tools")
		}
		if s.Error.Status < 400 || s.Error.Status > 599 {
			return messages.FieldError("modelmock", at+".error.status", "want an HTTP error status (400-599), got %d", s.Error.Status)
		}
		if s.Error.RetryAfter != "" {
			if _, err := strconv.ParseFloat(s.Error.RetryAfter, 64); err != nil {
				return messages.FieldError("modelmock", at+".error.retryAfter", "want seconds, got %q", s.Error.RetryAfter)
			}
		}
		return nil
	}
	if s.Text == "" && s.Thinking == "" && len(s.tools()) == 0 {
		return messages.FieldError("modelmock", at, "a step needs text, thinking, a tool or an error")
	}
	for k, t := range s.tools() {
		if t.Name == "" {
			return messages.FieldError("modelmock", fmt.Sprintf("%s.tools[%d].name", at, k), "required")
		}
		if len(t.Input) > 0 {
			var obj map[string]any
			if err := json.Unmarshal(t.Input, &obj); err != nil || obj == nil {
				return messages.FieldError("modelmock", fmt.Sprintf("%s.tools[%d].input", at, k), "a tool's input is a JSON object")
			}
		}
	}
	if s.Chunks < 0 || s.Delay < 0 || s.ChunkDelay < 0 || s.InputTokens < 0 || s.OutputTokens < 0 {
		return messages.FieldError("modelmock", at, "chunks, delays and token counts must not be negative")
	}
	return nil
}
