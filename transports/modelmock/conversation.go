package modelmock

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
)

// Conversation is the provider-neutral view of one model request: what
// every wire decodes its request into before the scenario is consulted.
type Conversation struct {
	Model    string
	System   string
	Messages []Message
	Tools    []string // the names of the tools offered
	Stream   bool
}

// Message is one message of a conversation.
type Message struct {
	Role  string // "user" or "assistant"
	Parts []Part
}

// PartKind says what a Part holds.
type PartKind string

const (
	PartText       PartKind = "text"
	PartThinking   PartKind = "thinking"
	PartToolUse    PartKind = "tool_use"
	PartToolResult PartKind = "tool_result"
	PartOther      PartKind = "other"
)

// Part is one content block.
type Part struct {
	Kind      PartKind
	Text      string          // text, thinking, or a tool result's output
	ToolName  string          // tool_use
	ToolUseID string          // tool_use and tool_result
	Input     json.RawMessage // tool_use
	IsError   bool            // tool_result
}

// ToolResult is the last tool result a request carried.
type ToolResult struct {
	ToolUseID string `json:"toolUseId"`
	ToolName  string `json:"toolName,omitempty"`
	Content   string `json:"content"`
	IsError   bool   `json:"isError"`
}

// view is what the scenario looks at in a conversation.
type view struct {
	model string
	// prompt is the last user text (system reminders left out) and
	// promptAt the index of its message; -1 when there is none.
	prompt   string
	promptAt int
	// after counts the assistant messages after the prompt's message.
	after int
	// result is the last tool result when the conversation ends with tool
	// results and no new prompt.
	result *ToolResult
}

// isReminder reports whether a user text block is a client-side reminder
// rather than something the user said: Claude Code's <system-reminder>, or
// the <environment_details> block kilo appends to every prompt as a part of
// its own.
func isReminder(s string) bool {
	s = strings.TrimSpace(s)
	return s == "" || strings.HasPrefix(s, "<system-reminder>") || strings.HasPrefix(s, "<environment_details>")
}

// promptText returns the last non-reminder text of a user message.
func promptText(m Message) (string, bool) {
	for i := len(m.Parts) - 1; i >= 0; i-- {
		p := m.Parts[i]
		if p.Kind == PartText && !isReminder(p.Text) {
			return p.Text, true
		}
	}
	return "", false
}

func (c *Conversation) view() view {
	v := view{model: c.Model, promptAt: -1}
	for i := len(c.Messages) - 1; i >= 0; i-- {
		m := c.Messages[i]
		switch m.Role {
		case "assistant":
			v.after++
			continue
		case "user":
		default:
			continue // a mid-conversation system message
		}
		if t, ok := promptText(m); ok {
			v.prompt, v.promptAt = t, i
			break
		}
	}
	if last, ok := c.lastOf("user", "assistant"); ok && last.Role == "user" && (v.promptAt < 0 || &c.Messages[v.promptAt] != last) {
		for i := len(last.Parts) - 1; i >= 0; i-- {
			if p := last.Parts[i]; p.Kind == PartToolResult {
				v.result = &ToolResult{ToolUseID: p.ToolUseID, ToolName: c.toolName(p.ToolUseID), Content: p.Text, IsError: p.IsError}
				break
			}
		}
	}
	return v
}

// lastOf returns the last message with one of the roles.
func (c *Conversation) lastOf(roles ...string) (*Message, bool) {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		for _, r := range roles {
			if c.Messages[i].Role == r {
				return &c.Messages[i], true
			}
		}
	}
	return nil, false
}

// toolName finds the name of the tool_use with the given id.
func (c *Conversation) toolName(id string) string {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		for _, p := range c.Messages[i].Parts {
			if p.Kind == PartToolUse && p.ToolUseID == id {
				return p.ToolName
			}
		}
	}
	return ""
}

// LastToolResult returns the last tool result of the conversation's last
// message, if it ends with one.
func (c *Conversation) LastToolResult() (ToolResult, bool) {
	v := c.view()
	if v.result == nil {
		return ToolResult{}, false
	}
	return *v.result, true
}

// LastUserText returns the last thing the user said (system reminders left
// out).
func (c *Conversation) LastUserText() string { return c.view().prompt }

// picked is the scenario's answer to one request.
type picked struct {
	step Step
	rule int // the rule that answered; -1 for a default
	vars map[string]string
}

// picker chooses responses. It is the scenario's only state: how often each
// rule answered, and which rule started the turn of each prompt.
type picker struct {
	sc *Scenario
	ms []matcher

	mu      sync.Mutex
	uses    []int
	started map[string]int // prompt -> the rule that answered it
}

func newPicker(sc *Scenario) (*picker, error) {
	ms, err := sc.compile()
	if err != nil {
		return nil, err
	}
	return &picker{sc: sc, ms: ms, uses: make([]int, len(sc.Rules)), started: map[string]int{}}, nil
}

// pick answers a conversation (see the package doc for the order).
func (p *picker) pick(c *Conversation) picked {
	v := c.view()
	vars := map[string]string{"model": v.model, "input": v.prompt, "result": "", "is_error": "", "tool": ""}
	p.mu.Lock()
	defer p.mu.Unlock()
	if v.result != nil {
		vars["result"], vars["is_error"], vars["tool"] = v.result.Content, strconv.FormatBool(v.result.IsError), v.result.ToolName
		for i := range p.sc.Rules {
			if !p.sc.Rules[i].Match.forToolResult() || !p.available(i) {
				continue
			}
			if g, ok := p.ms[i].match(v.result.Content); ok {
				p.uses[i]++
				return picked{step: p.sc.Rules[i].Steps[0], rule: i, vars: withGroups(vars, g)}
			}
		}
		if i, g, ok := p.continuing(v.prompt); ok && v.promptAt >= 0 && v.after < len(p.sc.Rules[i].Steps) {
			return picked{step: p.sc.Rules[i].Steps[v.after], rule: i, vars: withGroups(vars, g)}
		}
		st := DefaultToolResultReply
		if p.sc.ToolResultDefault != nil {
			st = *p.sc.ToolResultDefault
		}
		return picked{step: st, rule: -1, vars: vars}
	}
	if v.after > 0 {
		// the conversation ends with an assistant message: go on with the turn
		if i, g, ok := p.continuing(v.prompt); ok && v.after < len(p.sc.Rules[i].Steps) {
			return picked{step: p.sc.Rules[i].Steps[v.after], rule: i, vars: withGroups(vars, g)}
		}
	}
	for i := range p.sc.Rules {
		if p.sc.Rules[i].Match.forToolResult() || !p.available(i) {
			continue
		}
		if g, ok := p.ms[i].match(v.prompt); ok {
			p.uses[i]++
			p.started[v.prompt] = i
			return picked{step: p.sc.Rules[i].Steps[0], rule: i, vars: withGroups(vars, g)}
		}
	}
	st := DefaultReply
	if p.sc.Default != nil {
		st = *p.sc.Default
	}
	return picked{step: st, rule: -1, vars: vars}
}

func (p *picker) available(i int) bool {
	t := p.sc.Rules[i].Times
	return t == 0 || p.uses[i] < t
}

// continuing finds the rule whose turn the prompt started: the one that
// answered it, else the first prompt rule it matches.
func (p *picker) continuing(prompt string) (int, []string, bool) {
	if i, ok := p.started[prompt]; ok {
		g, _ := p.ms[i].match(prompt)
		return i, g, true
	}
	for i := range p.sc.Rules {
		if p.sc.Rules[i].Match.forToolResult() {
			continue
		}
		if g, ok := p.ms[i].match(prompt); ok {
			return i, g, true
		}
	}
	return 0, nil, false
}

func withGroups(vars map[string]string, groups []string) map[string]string {
	for i, g := range groups {
		vars[strconv.Itoa(i)] = g
	}
	return vars
}

// expand fills {{name}} placeholders; an unknown name is left as it is.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			break
		}
		j := strings.Index(s[i+2:], "}}")
		if j < 0 {
			break
		}
		name := s[i+2 : i+2+j]
		b.WriteString(s[:i])
		if v, ok := vars[name]; ok {
			b.WriteString(v)
		} else {
			b.WriteString(s[i : i+2+j+2])
		}
		s = s[i+2+j+2:]
	}
	b.WriteString(s)
	return b.String()
}

// expandJSON expands the placeholders in every string of a JSON value.
func expandJSON(raw json.RawMessage, vars map[string]string) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`{}`)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw // Validate has checked it
	}
	out, err := json.Marshal(expandValue(v, vars))
	if err != nil {
		return raw
	}
	return out
}

func expandValue(v any, vars map[string]string) any {
	switch x := v.(type) {
	case string:
		return expand(x, vars)
	case map[string]any:
		for k, e := range x {
			x[k] = expandValue(e, vars)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = expandValue(e, vars)
		}
		return x
	}
	return v
}
