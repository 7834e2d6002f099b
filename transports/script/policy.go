package script

// The pure decisions of a scripted session: which scenario turn answers an
// input, whether a tool call runs, asks or is refused, how text is chunked
// and how tokens are counted. Nothing here touches a goroutine, a clock or
// the filesystem; policy_test.go tests it as tables.

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/codesession/codesession/messages"
)

// pickTurn returns the index of the scenario turn that answers input, or -1
// when none does (the fallback then answers). It prefers the first unused
// turn whose non-empty Match is a substring of input, then the first unused
// turn without a Match. used is indexed like sc.Turns.
func pickTurn(sc *Scenario, used []bool, input string) int {
	for i, t := range sc.Turns {
		if !used[i] && t.Match != "" && strings.Contains(input, t.Match) {
			return i
		}
	}
	for i, t := range sc.Turns {
		if !used[i] && t.Match == "" {
			return i
		}
	}
	return -1
}

// callKind says what a gated step does.
type callKind int

const (
	callInvalid callKind = iota
	callTool             // a scripted tool
	callWrite            // a file write or edit
	callDelete           // a file removal
)

func (k callKind) String() string {
	switch k {
	case callTool:
		return "tool"
	case callWrite:
		return "write"
	case callDelete:
		return "delete"
	}
	return "invalid"
}

// verdict is what the gate decides for one call.
type verdict int

const (
	verdictInvalid    verdict = iota
	verdictRun                // run it now
	verdictAsk                // raise a clarification first
	verdictRefusePlan         // refused: the session is in plan posture
	verdictRefuseTool         // refused: the tool is not in the session's allowed tools
)

func (v verdict) String() string {
	switch v {
	case verdictRun:
		return "run"
	case verdictAsk:
		return "ask"
	case verdictRefusePlan:
		return "refuse-plan"
	case verdictRefuseTool:
		return "refuse-tool"
	}
	return "invalid"
}

// gateInput is everything the gate looks at for one call.
type gateInput struct {
	kind    callKind
	tool    string
	ask     bool
	posture messages.Posture
	// allowed is the session's allowedTools; nil means every tool.
	allowed []string
	// sessionAllowed reports an earlier allow_session for the same tool.
	sessionAllowed bool
}

// decide is the scripted agent's permission gate. In order: a tool outside
// allowedTools is refused; plan posture refuses every call; a call that
// does not ask runs; full posture never asks; acceptEdits does not ask for
// file changes; an earlier allow_session for the tool runs it; else it asks.
func decide(in gateInput) verdict {
	if in.allowed != nil && !slices.Contains(in.allowed, in.tool) {
		return verdictRefuseTool
	}
	switch {
	case in.posture == messages.PosturePlan:
		return verdictRefusePlan
	case !in.ask, in.posture == messages.PostureFull:
		return verdictRun
	case in.posture == messages.PostureAcceptEdits && (in.kind == callWrite || in.kind == callDelete):
		return verdictRun
	case in.sessionAllowed:
		return verdictRun
	}
	return verdictAsk
}

// chunks splits s into the incremental pieces a text step streams: three
// for a text of three runes or more, else one per rune; never an empty one
// (an empty text has no chunks, only its complete event).
func chunks(s string) []string {
	n := utf8.RuneCountInString(s)
	parts := min(n, 3)
	if parts == 0 {
		return nil
	}
	out := make([]string, 0, parts)
	rest := s
	for p := parts; p > 1; p-- {
		// Cut after ceil(remaining runes / remaining parts) runes.
		take := (utf8.RuneCountInString(rest) + p - 1) / p
		cut := 0
		for range take {
			_, size := utf8.DecodeRuneInString(rest[cut:])
			cut += size
		}
		out = append(out, rest[:cut])
		rest = rest[cut:]
	}
	return append(out, rest)
}

// tokens is the scripted token count of s: one token per four bytes,
// rounded up. It is deterministic, not an estimate of any real tokenizer.
func tokens(s string) int64 { return int64(len(s)+3) / 4 }

// vars are the placeholders a text or thinking step may use.
type vars struct {
	input   string
	turn    int
	model   string
	effort  messages.Effort
	posture messages.Posture
}

// expand replaces the placeholders {{input}}, {{turn}}, {{model}},
// {{effort}} and {{posture}} in a text or thinking step with the turn's
// input, its number and the session's current model, effort and posture.
func (v vars) expand(s string) string {
	i := strings.Index(s, "{{")
	if i < 0 {
		return s
	}
	// One pass, no strings.Replacer: building one per call was the script
	// backend's largest cost per event. The placeholders all start with
	// "{{" and none is a prefix of another, so at each "{{" at most one
	// matches, as the Replacer (leftmost match, then on past it) would
	// choose; an unknown "{{" is kept and the scan goes on from its next byte.
	var b strings.Builder
	b.Grow(len(s) + len(v.input))
	for i >= 0 {
		b.WriteString(s[:i])
		s = s[i:]
		if name, val, ok := v.placeholder(s); ok {
			b.WriteString(val)
			s = s[len(name):]
		} else {
			b.WriteByte(s[0])
			s = s[1:]
		}
		i = strings.Index(s, "{{")
	}
	b.WriteString(s)
	return b.String()
}

// placeholder returns the placeholder s starts with and its value.
func (v vars) placeholder(s string) (name, val string, ok bool) {
	switch {
	case strings.HasPrefix(s, "{{input}}"):
		return "{{input}}", v.input, true
	case strings.HasPrefix(s, "{{turn}}"):
		return "{{turn}}", strconv.Itoa(v.turn), true
	case strings.HasPrefix(s, "{{model}}"):
		return "{{model}}", v.model, true
	case strings.HasPrefix(s, "{{effort}}"):
		return "{{effort}}", string(v.effort), true
	case strings.HasPrefix(s, "{{posture}}"):
		return "{{posture}}", string(v.posture), true
	}
	return "", "", false
}
