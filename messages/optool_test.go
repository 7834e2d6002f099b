package messages

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestToolInputSchemaIsValidAndCoversEveryOp(t *testing.T) {
	s, err := ToolInputSchema()
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" || len(s.Required) != 1 || s.Required[0] != "op" {
		t.Fatalf("want an object requiring op, got type %q required %v", s.Type, s.Required)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("the schema does not resolve: %v", err)
	}
	var ops []any
	ops = append(ops, s.Properties["op"].Enum...)
	if len(ops) != 8 {
		t.Fatalf("op enum has %d ops, want the seed's 8: %v", len(ops), ops)
	}
	// every field of every op type is in the schema (but the reserved
	// ones), documented, and says which ops use it
	for _, o := range ToolOps() {
		for i := range o.Input.NumField() {
			for _, name := range jsonNames(o.Input.Field(i)) {
				p, ok := s.Properties[name]
				if contains(o.Reserved, name) {
					if ok && strings.Contains(p.Description, o.Name) {
						t.Errorf("%s.%s is reserved but offered to the caller", o.Name, name)
					}
					continue
				}
				if !ok {
					t.Errorf("%s.%s is missing from the schema", o.Name, name)
					continue
				}
				if fieldDocs[name] == "" {
					t.Errorf("%s has no line in fieldDocs", name)
				}
				if !strings.Contains(p.Description, o.Name) {
					t.Errorf("%s's description does not name op %s: %q", name, o.Name, p.Description)
				}
			}
		}
	}
	if !strings.Contains(s.Properties["brief"].Description, "required by start") {
		t.Errorf("brief should say start requires it: %q", s.Properties["brief"].Description)
	}
	good := map[string]any{"op": "start", "brief": "x", "maxPosture": "plan"}
	if err := rs.Validate(good); err != nil {
		t.Errorf("a good start fails the schema: %v", err)
	}
	for _, bad := range []map[string]any{
		{"brief": "no op"},
		{"op": "launch"},
		{"op": "start", "brief": "x", "maxPosture": "root"},
		{"op": "stop", "sessionId": "x", "bogus": 1},
	} {
		if err := rs.Validate(bad); err == nil {
			t.Errorf("the schema accepts %v", bad)
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"additionalProperties":false`) {
		t.Errorf("the schema does not close its properties: %s", b)
	}
}

func jsonNames(f reflect.StructField) []string {
	if f.Anonymous {
		var out []string
		for i := range f.Type.NumField() {
			out = append(out, jsonNames(f.Type.Field(i))...)
		}
		return out
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" || name == "" {
		return nil
	}
	return []string{name}
}

const sid = "cs_0000000000000000000000000000000000000000000000000000000000000000"

func TestDecodeToolCall(t *testing.T) {
	good := []struct {
		in   string
		op   string
		want any
	}{
		{`{"op":"list-backends"}`, OpListBackends, &ListBackends{}},
		{`{"op":"start","brief":"fix it","maxPosture":"plan","maxRounds":3}`, OpStart,
			&Start{Brief: "fix it", MaxPosture: PosturePlan, MaxRounds: 3}},
		{`{"op":"read-turn","sessionId":"` + sid + `","timeoutMs":5000,"includeDiff":true}`, OpReadTurn,
			&ToolReadTurn{ReadTurn: ReadTurn{SessionID: sid, IncludeDiff: true}, TimeoutMs: 5000}},
		{`{"op":"answer","sessionId":"` + sid + `","clarificationId":"c1","decision":"deny","reason":"no"}`, OpAnswer,
			&Answer{SessionID: sid, ClarificationID: "c1", Decision: DecisionDeny, Reason: "no"}},
		{`{"op":"guide","sessionId":"` + sid + `","text":"add a test"}`, OpGuide, &Guide{SessionID: sid, Text: "add a test"}},
		{`{"op":"set-posture","sessionId":"` + sid + `","posture":"acceptEdits"}`, OpSetPosture,
			&SetPosture{SessionID: sid, Posture: PostureAcceptEdits}},
		{`{"op":"interrupt","sessionId":"` + sid + `"}`, OpInterrupt, &Interrupt{SessionID: sid}},
		{`{"sessionId":"` + sid + `","outcome":"success","op":"stop"}`, OpStop, &Stop{SessionID: sid, Outcome: OutcomeSuccess}},
	}
	for _, g := range good {
		c, err := DecodeToolCall([]byte(g.in))
		if err != nil {
			t.Errorf("%s: %v", g.in, err)
			continue
		}
		if c.Op != g.op || !reflect.DeepEqual(c.Args, g.want) {
			t.Errorf("%s: got %s %#v, want %s %#v", g.in, c.Op, c.Args, g.op, g.want)
		}
	}
	bad := []struct{ in, field string }{
		{`[]`, ""},
		{`null`, ""},
		{`{"brief":"x"}`, "op"},
		{`{"op":7}`, "op"},
		{`{"op":"launch"}`, "op"},
		{`{"op":"start"}`, "brief"},
		{`{"op":"start","brief":"x","maxPosture":"root"}`, "maxPosture"},
		{`{"op":"start","brief":"x","maxRounds":"many"}`, "maxRounds"},
		{`{"op":"read-turn","sessionId":"` + sid + `","clarificationId":"c"}`, "clarificationId"},
		{`{"op":"read-turn","sessionId":"` + sid + `","timeoutMs":-1}`, "timeoutMs"},
		{`{"op":"guide","sessionId":"` + sid + `","text":"x","source":"user"}`, "source"},
		{`{"op":"answer","sessionId":"` + sid + `","clarificationId":"c","decision":"maybe"}`, "decision"},
		{`{"op":"stop"}`, "sessionId"},
		{`{"op":"list-backends","sessionId":"` + sid + `"}`, "sessionId"},
		{`{"op":"start","brief":"` + strings.Repeat("x", MaxToolCallBytes) + `"}`, ""},
	}
	for _, b := range bad {
		_, err := DecodeToolCall([]byte(b.in))
		var e *Error
		if err == nil || !asError(err, &e) {
			t.Errorf("%.60s: want a *Error, got %v", b.in, err)
			continue
		}
		if e.Code != CodeInvalid || e.Field != b.field {
			t.Errorf("%.60s: got code %s field %q (%v), want invalid field %q", b.in, e.Code, e.Field, e, b.field)
		}
	}
}

func asError(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}

func TestToolDescriptionNamesEveryOp(t *testing.T) {
	d := ToolDescription()
	for _, step := range []string{"list-backends first", "briefingNotes", "taskTags", "honest verdict", "untrusted data"} {
		if !strings.Contains(d, step) {
			t.Errorf("the description leaves out the driver's flow: %q", step)
		}
	}
	for _, o := range ToolOps() {
		if !strings.Contains(d, "- "+o.Name+": ") {
			t.Errorf("the description leaves out %s", o.Name)
		}
	}
}

// FuzzDecodeToolCall: the tool's arguments come from a model; whatever they
// are, decoding returns a decoded call or a typed invalid error, never a
// panic, and a decoded call names a known op with validated arguments.
func FuzzDecodeToolCall(f *testing.F) {
	for _, s := range []string{
		`{"op":"list-backends"}`, `{"op":"start","brief":"b","allowedTools":["Read"],"taskTags":["x"]}`,
		`{"op":"read-turn","sessionId":"` + sid + `","timeoutMs":1}`, `{"op":"guide","sessionId":"x","text":"t"}`,
		`{"op":"stop","sessionId":"` + sid + `","outcome":"failed","note":"n"}`, `{"op":null}`, `{"op":"start","op":"stop"}`,
		`{}`, `"op"`, `{"op":"answer","decision":{}}`, "\x00", `{"op":"set-posture","sessionId":"` + sid + `","posture":"full"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := DecodeToolCall(raw)
		if err != nil {
			var e *Error
			if !asError(err, &e) || e.Code != CodeInvalid || e.Message == "" {
				t.Fatalf("want a typed invalid error, got %T %v", err, err)
			}
			return
		}
		if _, ok := toolOp(c.Op); !ok || c.Args == nil {
			t.Fatalf("decoded an unknown op %q", c.Op)
		}
		if v, ok := c.Args.(interface{ Validate() error }); ok && v.Validate() != nil {
			t.Fatalf("decoded arguments that do not validate: %v", v.Validate())
		}
	})
}
