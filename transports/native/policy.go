package native

// The pure decisions of a native session: whether a tool call runs, asks
// or is refused, which tools the model is offered, how effort maps to the
// providers' reasoning knobs, and what a turn costs. Nothing here touches
// a goroutine, a clock or the network; policy_test.go tests it as tables.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/codesession/codesession/messages"
)

// verdict is what the posture gate decides for one tool call.
type verdict int

const (
	verdictInvalid verdict = iota
	verdictRun             // run it now
	verdictAsk             // raise a clarification first
	verdictRefuse          // refused; the reason goes back to the model
)

func (v verdict) String() string {
	switch v {
	case verdictRun:
		return "run"
	case verdictAsk:
		return "ask"
	case verdictRefuse:
		return "refuse"
	}
	return "invalid"
}

// decision is the verdict and, for a refusal, the text the model receives.
type decision struct {
	verdict verdict
	reason  string
}

// permit decides one call of tool under posture. allowed is the session's
// allowedTools (nil: every tool); sessionAllowed is an earlier
// allow_session answer for the same tool. In order: an unknown tool and a
// tool outside allowedTools are refused; plan runs read-only tools and
// refuses the rest; full runs everything; reads always run; acceptEdits
// runs writes; an allow_session runs the tool; else the call asks.
func permit(tool string, posture messages.Posture, allowed []string, sessionAllowed bool) decision {
	def, ok := tools[tool]
	if !ok {
		return decision{verdictRefuse, fmt.Sprintf("refused: there is no tool %q (the tools are %s)", tool, strings.Join(ToolNames(), ", "))}
	}
	return permitKind(tool, def.kind, posture, allowed, sessionAllowed)
}

// permitKind is permit for a tool of a known kind (the built-in tools, and
// a plan's MCP tools, which are exec tools).
func permitKind(tool string, kind toolKind, posture messages.Posture, allowed []string, sessionAllowed bool) decision {
	def := toolDef{kind: kind}
	if allowed != nil && !slices.Contains(allowed, tool) {
		return decision{verdictRefuse, fmt.Sprintf("refused: tool %q is not in this session's allowed tools", tool)}
	}
	switch {
	case def.kind == kindRead:
		return decision{verdict: verdictRun}
	case posture == messages.PosturePlan:
		return decision{verdictRefuse, fmt.Sprintf("refused: the session is in plan posture, which allows read-only tools only (%s is not)", tool)}
	case posture == messages.PostureFull:
		return decision{verdict: verdictRun}
	case posture == messages.PostureAcceptEdits && def.kind == kindWrite:
		return decision{verdict: verdictRun}
	case sessionAllowed:
		return decision{verdict: verdictRun}
	}
	return decision{verdict: verdictAsk}
}

// offered lists the tools the model is told about under posture: those in
// allowed (nil: all), and in plan only the read-only ones. A call of a tool
// it was not offered is still decided by permit.
func offered(posture messages.Posture, allowed []string) []ToolSpec {
	var out []ToolSpec
	for _, name := range ToolNames() {
		if permit(name, posture, allowed, false).verdict == verdictRefuse {
			continue
		}
		out = append(out, tools[name].spec)
	}
	return out
}

// clampEffort maps a requested effort to the levels a provider has: max
// becomes high where the provider has no max, and an unset effort stays
// unset (the provider's default).
func clampEffort(e messages.Effort, hasMax bool) messages.Effort {
	if e == messages.EffortMax && !hasMax {
		return messages.EffortHigh
	}
	return e
}

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead,omitempty"`
	CacheWrite float64 `json:"cacheWrite,omitempty"`
}

// cost is what u costs at p.
func (p Price) cost(u messages.Usage) float64 {
	return (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output +
		float64(u.CacheReadTokens)*p.CacheRead + float64(u.CacheWriteTokens)*p.CacheWrite) / 1e6
}

// priceFor finds model's price: an exact entry, else the longest entry that
// is a prefix of model (so "claude-sonnet-4-5" prices
// "claude-sonnet-4-5-20250929").
func priceFor(table map[string]Price, model string) (Price, bool) {
	if p, ok := table[model]; ok {
		return p, true
	}
	best, found := "", false
	for k := range table {
		if k != "" && strings.HasPrefix(model, k) && len(k) > len(best) {
			best, found = k, true
		}
	}
	if !found {
		return Price{}, false
	}
	return table[best], true
}

func addUsage(a *messages.Usage, b messages.Usage) {
	a.InputTokens += b.InputTokens
	a.OutputTokens += b.OutputTokens
	a.CacheReadTokens += b.CacheReadTokens
	a.CacheWriteTokens += b.CacheWriteTokens
}
