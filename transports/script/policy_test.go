package script

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/codesession/codesession/messages"
)

func TestPickTurn(t *testing.T) {
	sc := &Scenario{Turns: []Turn{
		{Steps: []Step{Text("first")}},
		{Match: "test", Steps: []Step{Text("tests")}},
		{Steps: []Step{Text("second")}},
		{Match: "test", Steps: []Step{Text("more tests")}},
	}}
	used := make([]bool, len(sc.Turns))
	var got []int
	for _, in := range []string{"add tests", "hello", "test again", "hello", "and again", "test"} {
		i := pickTurn(sc, used, in)
		if i >= 0 {
			used[i] = true
		}
		got = append(got, i)
	}
	// A match wins over the next unmatched turn; a used turn never comes
	// back; a matched turn is never picked for an input without the match.
	assert.Equal(t, []int{1, 0, 3, 2, -1, -1}, got)

	assert.Equal(t, 0, pickTurn(sc, make([]bool, 4), "Test"), "matching is case-sensitive")
	assert.Equal(t, -1, pickTurn(&Scenario{}, nil, "x"))
}

func TestDecide(t *testing.T) {
	P := messages.PosturePlan
	D := messages.PostureDefault
	A := messages.PostureAcceptEdits
	F := messages.PostureFull
	for _, tc := range []struct {
		in   gateInput
		want verdict
	}{
		{gateInput{kind: callTool, tool: "Bash", posture: D}, verdictRun},
		{gateInput{kind: callTool, tool: "Bash", ask: true, posture: D}, verdictAsk},
		{gateInput{kind: callWrite, tool: "Write", ask: true, posture: D}, verdictAsk},
		{gateInput{kind: callTool, tool: "Bash", ask: true, posture: D, sessionAllowed: true}, verdictRun},
		{gateInput{kind: callTool, tool: "Bash", ask: true, posture: A}, verdictAsk},
		{gateInput{kind: callWrite, tool: "Edit", ask: true, posture: A}, verdictRun},
		{gateInput{kind: callDelete, tool: "Bash", ask: true, posture: A}, verdictRun},
		{gateInput{kind: callTool, tool: "Bash", ask: true, posture: F}, verdictRun},
		{gateInput{kind: callTool, tool: "Read", posture: P}, verdictRefusePlan},
		{gateInput{kind: callWrite, tool: "Write", ask: true, posture: P, sessionAllowed: true}, verdictRefusePlan},
		{gateInput{kind: callDelete, tool: "Bash", posture: P}, verdictRefusePlan},
		{gateInput{kind: callTool, tool: "Bash", posture: F, allowed: []string{"Write"}}, verdictRefuseTool},
		{gateInput{kind: callTool, tool: "Bash", posture: F, allowed: []string{}}, verdictRefuseTool},
		{gateInput{kind: callWrite, tool: "Write", posture: D, allowed: []string{"Write"}}, verdictRun},
	} {
		t.Run(fmt.Sprintf("%s-%s-ask=%v-posture=%s", tc.in.kind, tc.in.tool, tc.in.ask, tc.in.posture), func(t *testing.T) {
			assert.Equal(t, tc.want.String(), decide(tc.in).String())
		})
	}
}

func TestChunks(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"ab", []string{"a", "b"}},
		{"abc", []string{"a", "b", "c"}},
		{"hello world", []string{"hell", "o wo", "rld"}},
		{"héllo", []string{"hé", "ll", "o"}},
		{"日本語です", []string{"日本", "語で", "す"}},
	} {
		got := chunks(tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
		assert.Equal(t, tc.in, strings.Join(got, ""))
	}
}

func TestExpand(t *testing.T) {
	v := vars{input: "in", turn: 3, model: "m", effort: messages.EffortHigh, posture: messages.PosturePlan}
	assert.Equal(t, "in 3 m high plan {{other}}", v.expand("{{input}} {{turn}} {{model}} {{effort}} {{posture}} {{other}}"))
	assert.Equal(t, "plain", v.expand("plain"))
	assert.Equal(t, int64(0), tokens(""))
	assert.Equal(t, int64(1), tokens("abcd"))
	assert.Equal(t, int64(2), tokens("abcde"))
}

// replacerExpand is expand as it was, through a strings.Replacer: the
// reference the one-pass expand must agree with.
func (v vars) replacerExpand(s string) string {
	return strings.NewReplacer(
		"{{input}}", v.input,
		"{{turn}}", strconv.Itoa(v.turn),
		"{{model}}", v.model,
		"{{effort}}", string(v.effort),
		"{{posture}}", string(v.posture),
	).Replace(s)
}

func TestExpandAgreesWithReplacer(t *testing.T) {
	v := vars{input: "{{turn}} in", turn: 12, model: "m{{", effort: messages.EffortLow, posture: messages.PostureAcceptEdits}
	for _, s := range []string{
		"", "{{", "{", "}}", "{{{input}}", "{{{{turn}}}}", "{{input}}{{input}}", "x{{inp", "{{input}",
		"{{model}}{{effort}}{{posture}}", "a{{b}}c{{turn}}d", "{{turn}}{{", "héllo {{input}} 日本",
	} {
		assert.Equal(t, v.replacerExpand(s), v.expand(s), "%q", s)
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"{{input}} {{turn}}", "{{{model}}", "{{effort}}}{{posture}}", "plain", "{{x}}{{"} {
		f.Add(s, "in", 3)
	}
	f.Fuzz(func(t *testing.T, s, input string, turn int) {
		v := vars{input: input, turn: turn, model: "model", effort: messages.EffortHigh, posture: messages.PosturePlan}
		if got, want := v.expand(s), v.replacerExpand(s); got != want {
			t.Fatalf("expand(%q) = %q, the Replacer gives %q", s, got, want)
		}
	})
}

// BenchmarkExpand: a text step's placeholders, expanded in one pass and
// through a strings.Replacer built per call (as before); compare the two
// in the same run.
func BenchmarkExpand(b *testing.B) {
	v := vars{input: "fix the failing test", turn: 3, model: "model", effort: messages.EffortHigh, posture: messages.PosturePlan}
	s := "step 4 of turn {{turn}}"
	for _, bc := range []struct {
		name string
		f    func(string) string
	}{{"onepass", v.expand}, {"replacer", v.replacerExpand}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = bc.f(s)
			}
		})
	}
}
