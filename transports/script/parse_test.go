package script

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

func TestParseScenarioErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		field    string // the error's Field: the JSON path
		msg      string // a substring of the message
	}{
		{"bad JSON", `{"turns":[`, "turns", "invalid JSON"},
		{"bad JSON token", `{"turns" 1}`, "turns", "invalid JSON"},
		{"empty input", ``, "", "unexpected end of input"},
		{"not an object", `[]`, "", "must be a JSON object, got an array"},
		{"trailing data", `{"turns":[]} {}`, "", "unexpected an object after the object"},
		{"unknown top-level key", `{"turns":[],"extra":1}`, "extra", `unknown key "extra" (want one of turns, fallback)`},
		{"key in the wrong case", `{"Turns":[]}`, "Turns", `unknown key "Turns"`},
		{"turns not an array", `{"turns":{}}`, "turns", "must be a JSON array"},
		{"turn null", `{"turns":[null]}`, "turns[0]", "must be a JSON object, got null"},
		{"unknown turn key", `{"turns":[{"steps":[],"when":"x"}]}`, "turns[0].when", `unknown key "when"`},
		{"match not a string", `{"turns":[{"match":1,"steps":[]}]}`, "turns[0].match", "must be a string"},
		{"cost not a number", `{"turns":[{"costUsd":"1","steps":[]}]}`, "turns[0].costUsd", "must be a number"},
		{"negative cost", `{"turns":[{"costUsd":-1,"steps":[]}]}`, "turns[0].costUsd", "finite number >= 0"},
		{"unknown step key", `{"turns":[{"steps":[{"text":"a"},{"txt":"b"}]}]}`, "turns[0].steps[1].txt", `unknown key "txt" (want one of text, thinking, tool`},
		{"two actions", `{"turns":[{},{"steps":[{"text":"a","thinking":"b"}]}]}`, "turns[1].steps[0]", "step has 2 actions (text, thinking); want exactly one"},
		{"zero actions", `{"turns":[{"steps":[{"text":"a"},{}]}]}`, "turns[0].steps[1]", "step has no action"},
		{"duplicate key", `{"turns":[{"steps":[{"text":"a","text":"b"}]}]}`, "turns[0].steps[0].text", `duplicate key "text"`},
		{"null action", `{"turns":[{"steps":[{"text":null}]}]}`, "turns[0].steps[0].text", "must be a string"},
		{"bad delay", `{"turns":[{"steps":[]},{"steps":[{"text":"a"},{"delay":"fast"}]}]}`, "turns[1].steps[1].delay", `"fast" is not a duration`},
		{"delay as a number", `{"turns":[{"steps":[{"delay":50}]}]}`, "turns[0].steps[0].delay", "want a duration string"},
		{"negative delay", `{"turns":[{"steps":[{"delay":"-1s"}]}]}`, "turns[0].steps[0].delay", "must not be negative"},
		{"tool without name", `{"turns":[{"steps":[{"tool":{"output":"x"}}]}]}`, "turns[0].steps[0].tool.name", "required"},
		{"tool input not an object", `{"turns":[{"steps":[{"tool":{"name":"Bash","input":[1]}}]}]}`, "turns[0].steps[0].tool.input", "must be a JSON object"},
		{"unknown tool key", `{"turns":[{"steps":[{"tool":{"name":"Bash","stdout":""}}]}]}`, "turns[0].steps[0].tool.stdout", `unknown key "stdout" (want one of ask, input, isError, name, output)`},
		{"ask not a bool", `{"turns":[{"steps":[{"write":{"path":"a","content":"","ask":"yes"}}]}]}`, "turns[0].steps[0].write.ask", "must be true or false"},
		{"write without path", `{"turns":[{"steps":[{"write":{"content":"x"}}]}]}`, "turns[0].steps[0].write.path", "required"},
		{"edit without old", `{"turns":[{"steps":[{"edit":{"path":"a","new":"x"}}]}]}`, "turns[0].steps[0].edit.old", "required"},
		{"delete path with NUL", `{"turns":[{"steps":[{"delete":{"path":"a\u0000b"}}]}]}`, "turns[0].steps[0].delete.path", "NUL"},
		{"step after fail", `{"turns":[{"steps":[{"fail":"x"},{"text":"never"}]}]}`, "turns[0].steps[1]", `unreachable: it follows a "fail" step`},
		{"fallback with match", `{"turns":[],"fallback":{"match":"x","steps":[]}}`, "fallback.match", "takes no match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := ParseScenario([]byte(tc.in))
			require.Nil(t, sc)
			var e *messages.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, messages.CodeInvalid, e.Code)
			assert.Equal(t, tc.field, e.Field)
			assert.Contains(t, e.Message, tc.msg)
		})
	}
}

func TestParseScenarioRoundTrip(t *testing.T) {
	in := `{
	  "turns": [
	    {"match": "test", "costUsd": 0.25, "steps": [
	      {"thinking": "hm"},
	      {"text": "hello {{input}}"},
	      {"tool": {"name": "Bash", "input": {"command": "ls", "n": [1, 2]}, "output": "a\nb", "isError": true, "ask": true}},
	      {"write": {"path": "a/b.txt", "content": "x", "ask": true}},
	      {"edit": {"path": "a/b.txt", "old": "x", "new": "y"}},
	      {"delete": {"path": "a/b.txt"}},
	      {"delay": "1m30s"},
	      {"crash": "boom"}
	    ]},
	    {"steps": [{"end": "bye"}]},
	    {"steps": [{"fail": "no"}]}
	  ],
	  "fallback": {"steps": [{"text": "fallback"}]}
	}`
	sc := mustParse(t, in)
	want := &Scenario{
		Turns: []Turn{
			{Match: "test", CostUSD: 0.25, Steps: []Step{
				Thinking("hm"),
				Text("hello {{input}}"),
				{Tool: &ToolStep{Name: "Bash", Input: json.RawMessage(`{"command":"ls","n":[1,2]}`), Output: "a\nb", IsError: true, Ask: true}},
				Write("a/b.txt", "x").Asking(),
				Edit("a/b.txt", "x", "y"),
				Delete("a/b.txt"),
				Delay(90 * time.Second),
				Crash("boom"),
			}},
			{Steps: []Step{End("bye")}},
			{Steps: []Step{Fail("no")}},
		},
		Fallback: &Turn{Steps: []Step{Text("fallback")}},
	}
	require.Equal(t, want, sc)

	// What the struct marshals to parses back to the same scenario.
	b, err := json.Marshal(sc)
	require.NoError(t, err)
	again, err := ParseScenario(b)
	require.NoError(t, err, "%s", b)
	require.Equal(t, sc, again)
}

func TestParseScenarioEmpty(t *testing.T) {
	sc := mustParse(t, `{}`)
	assert.Empty(t, sc.Turns)
	assert.Nil(t, sc.Fallback)
	sc = mustParse(t, `{"turns":[{"steps":[]}, {}]}`)
	assert.Len(t, sc.Turns, 2)
}

func TestValidateProgrammatic(t *testing.T) {
	bad := &Scenario{Turns: []Turn{{Steps: []Step{Text("a"), {}}}}}
	err := bad.Validate()
	var e *messages.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "turns[0].steps[1]", e.Field)

	two := Text("a")
	two.Fail = new(string)
	err = (&Scenario{Turns: []Turn{{Steps: []Step{two}}}}).Validate()
	require.ErrorAs(t, err, &e)
	assert.Contains(t, e.Message, "2 actions (text, fail)")

	err = (&Scenario{Turns: []Turn{{Steps: []Step{Tool("Bash", []int{1}, "")}}}}).Validate()
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "turns[0].steps[0].tool.input", e.Field)

	err = (&Scenario{Turns: []Turn{{Steps: []Step{Tool("Bash", func() {}, "")}}}}).Validate()
	require.ErrorAs(t, err, &e, "an input that cannot marshal is reported, not dropped")

	require.NoError(t, (&Scenario{Turns: []Turn{{Steps: []Step{Tool("Bash", map[string]any{"command": "ls"}, "x")}}}}).Validate())
	assert.Nil(t, Tool("Bash", map[string]string(nil), "").Tool.Input, "a nil map means {}")
	require.Error(t, (*Scenario)(nil).Validate())
}

func TestLoadScenario(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"turns":[{"steps":[{"text":"hi"}]}]}`), 0o644))
	sc, err := LoadScenario(good)
	require.NoError(t, err)
	require.Len(t, sc.Turns, 1)

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"turns":[{"steps":[{"delay":"soon"}]}]}`), 0o644))
	_, err = LoadScenario(bad)
	requireCode(t, err, messages.CodeInvalid, bad, "turns[0].steps[0].delay", `"soon" is not a duration`)

	_, err = LoadScenario(filepath.Join(dir, "missing.json"))
	requireCode(t, err, messages.CodeInvalid, "missing.json", "cannot open it")

	big := filepath.Join(dir, "big.json")
	require.NoError(t, os.WriteFile(big, make([]byte, MaxScenarioBytes+1), 0o644))
	_, err = LoadScenario(big)
	requireCode(t, err, messages.CodeInvalid, "cap")
}

func TestDemoScenario(t *testing.T) {
	sc := DemoScenario()
	require.Len(t, sc.Turns, 2)
	assert.Empty(t, sc.Turns[0].Match)
	assert.Equal(t, "test", sc.Turns[1].Match)
	sc.Turns[0].Match = "changed"
	assert.Empty(t, DemoScenario().Turns[0].Match, "each call returns a fresh copy")
}

func FuzzParseScenario(f *testing.F) {
	seeds := []string{
		``, `{}`, `null`, `[]`, `{"turns":[]}`, `{"turns":null}`,
		`{"turns":[{"steps":[{"text":"a"}]}]}`,
		`{"turns":[{"match":"x","costUsd":1e308,"steps":[{"delay":"1h"},{"end":""}]}],"fallback":{"steps":[]}}`,
		`{"turns":[{"steps":[{"tool":{"name":"B","input":{"a":{"b":[]}},"output":"o","isError":true,"ask":true}}]}]}`,
		`{"turns":[{"steps":[{"write":{"path":"../x","content":""}},{"edit":{"path":"/x","old":"a","new":""}},{"delete":{"path":"d"}}]}]}`,
		`{"turns":[{"steps":[{"text":"a","thinking":"b"}]}]}`,
		`{"turns":[{"steps":[{"delay":"-5s"}]}]}`,
		`{"turns":[{"steps":[{"delay":"99999999999h"}]}]}`,
		`{"turns":[{"costUsd":-0,"steps":[{"fail":"x"},{"crash":"y"}]}]}`,
		`{"turns":[{"steps":[{"tool":{"name":"B","input":"{}"}}]}]}`,
		`{"turns":[{"costUsd":1e999}]}`,
		`{"turns":[{"steps":[{"text":"\ud800"}]}]} `,
		"{\"turns\":[{\"steps\":[{\"text\":\"\xff\"}]}]}",
		`{"turns":[{"steps":[{"write":{"path":"a","content":"b","path":"c"}}]}]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := ParseScenario(data)
		if err != nil {
			require.Nil(t, sc)
			var e *messages.Error
			require.True(t, errors.As(err, &e), "untyped error %T: %v", err, err)
			require.Equal(t, messages.CodeInvalid, e.Code)
			require.NotEmpty(t, e.Message)
			return
		}
		require.NotNil(t, sc)
		require.NoError(t, sc.Validate())
		// A parsed scenario survives a round trip: what it marshals to
		// parses, and marshals to the same bytes.
		b, err := json.Marshal(sc)
		require.NoError(t, err)
		again, err := ParseScenario(b)
		require.NoError(t, err, "%s", b)
		b2, err := json.Marshal(again)
		require.NoError(t, err)
		require.Equal(t, string(b), string(b2))
	})
}
