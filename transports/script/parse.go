package script

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/codesession/codesession/messages"
)

// MaxScenarioBytes caps a scenario file; a bigger one is refused loudly.
const MaxScenarioBytes = 8 << 20

// ParseScenario decodes a JSON scenario strictly: unknown keys, keys in the
// wrong case, duplicate keys, values of the wrong type, nulls and trailing
// data are errors, and then the scenario is validated (Scenario.Validate).
// Every error is a *messages.Error with code invalid; its Field is the JSON
// path of the offending value ("turns[1].steps[2].tool.name"), so it names
// the turn and step index.
func ParseScenario(data []byte) (*Scenario, error) {
	sc, err := decodeScenario(data)
	if err != nil {
		return nil, err
	}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return sc, nil
}

// LoadScenario reads and parses a scenario file. Its errors are
// *messages.Error with code invalid whose message names the file.
func LoadScenario(path string) (*Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &messages.Error{Code: messages.CodeInvalid, Field: "scenario",
			Message: fmt.Sprintf("scenario file %q: cannot open it: %v", path, errors.Unwrap(err)), Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxScenarioBytes+1))
	if err != nil {
		return nil, &messages.Error{Code: messages.CodeInvalid, Field: "scenario",
			Message: fmt.Sprintf("scenario file %q: cannot read it", path), Err: err}
	}
	if len(data) > MaxScenarioBytes {
		return nil, &messages.Error{Code: messages.CodeInvalid, Field: "scenario",
			Message: fmt.Sprintf("scenario file %q is larger than the %d-byte cap", path, MaxScenarioBytes)}
	}
	sc, err := ParseScenario(data)
	if err != nil {
		e := messages.AsError("", err)
		where := ""
		if e.Field != "" {
			where = e.Field + ": "
		}
		return nil, &messages.Error{Code: messages.CodeInvalid, Field: "scenario",
			Message: fmt.Sprintf("scenario file %q: %s%s", path, where, e.Message), Err: err}
	}
	return sc, nil
}

func decodeScenario(data []byte) (*Scenario, error) {
	fields, err := objectFields(data, "")
	if err != nil {
		return nil, err
	}
	sc := &Scenario{Turns: []Turn{}}
	for _, f := range fields {
		switch f.key {
		case "turns":
			elems, err := arrayElems(f.val, "turns")
			if err != nil {
				return nil, err
			}
			sc.Turns = make([]Turn, len(elems))
			for i, raw := range elems {
				if err := decodeTurn(raw, fmt.Sprintf("turns[%d]", i), &sc.Turns[i]); err != nil {
					return nil, err
				}
			}
		case "fallback":
			sc.Fallback = &Turn{}
			if err := decodeTurn(f.val, "fallback", sc.Fallback); err != nil {
				return nil, err
			}
		default:
			return nil, unknownKey("", f.key, "turns", "fallback")
		}
	}
	return sc, nil
}

func decodeTurn(data []byte, at string, t *Turn) error {
	fields, err := objectFields(data, at)
	if err != nil {
		return err
	}
	t.Steps = []Step{}
	for _, f := range fields {
		fat := at + "." + f.key
		switch f.key {
		case "match":
			err = decodeString(f.val, fat, &t.Match)
		case "costUsd":
			err = decodeNumber(f.val, fat, &t.CostUSD)
		case "steps":
			var elems []json.RawMessage
			if elems, err = arrayElems(f.val, fat); err != nil {
				return err
			}
			t.Steps = make([]Step, len(elems))
			for j, raw := range elems {
				if err := decodeStep(raw, fmt.Sprintf("%s[%d]", fat, j), &t.Steps[j]); err != nil {
					return err
				}
			}
		default:
			return unknownKey(at, f.key, "match", "steps", "costUsd")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func decodeStep(data []byte, at string, s *Step) error {
	fields, err := objectFields(data, at)
	if err != nil {
		return err
	}
	for _, f := range fields {
		fat := at + "." + f.key
		switch f.key {
		case "text":
			s.Text = new(string)
			err = decodeString(f.val, fat, s.Text)
		case "thinking":
			s.Thinking = new(string)
			err = decodeString(f.val, fat, s.Thinking)
		case "fail":
			s.Fail = new(string)
			err = decodeString(f.val, fat, s.Fail)
		case "crash":
			s.Crash = new(string)
			err = decodeString(f.val, fat, s.Crash)
		case "end":
			s.End = new(string)
			err = decodeString(f.val, fat, s.End)
		case "delay":
			s.Delay = new(Duration)
			if derr := s.Delay.UnmarshalJSON(f.val); derr != nil {
				err = scenarioErr(fat, "%v", derr)
			}
		case "tool":
			s.Tool = &ToolStep{}
			err = decodeTool(f.val, fat, s.Tool)
		case "write":
			s.Write = &WriteStep{}
			err = decodeFields(f.val, fat, map[string]any{
				"path": &s.Write.Path, "content": &s.Write.Content, "ask": &s.Write.Ask})
		case "edit":
			s.Edit = &EditStep{}
			err = decodeFields(f.val, fat, map[string]any{
				"path": &s.Edit.Path, "old": &s.Edit.Old, "new": &s.Edit.New, "ask": &s.Edit.Ask})
		case "delete":
			s.Delete = &DeleteStep{}
			err = decodeFields(f.val, fat, map[string]any{"path": &s.Delete.Path, "ask": &s.Delete.Ask})
		default:
			return unknownKey(at, f.key, actionKeys...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func decodeTool(data []byte, at string, t *ToolStep) error {
	var input json.RawMessage
	err := decodeFields(data, at, map[string]any{"name": &t.Name, "input": &input,
		"output": &t.Output, "isError": &t.IsError, "ask": &t.Ask})
	if err != nil {
		return err
	}
	if input != nil {
		var compact bytes.Buffer
		if err := json.Compact(&compact, input); err != nil {
			return scenarioErr(at+".input", "must be a JSON object")
		}
		t.Input = compact.Bytes()
	}
	return nil
}

// decodeFields decodes an object whose keys must be among those of targets;
// a target is a *string, *bool or *json.RawMessage (which must be an object).
func decodeFields(data []byte, at string, targets map[string]any) error {
	fields, err := objectFields(data, at)
	if err != nil {
		return err
	}
	for _, f := range fields {
		fat := at + "." + f.key
		switch p := targets[f.key].(type) {
		case *string:
			err = decodeString(f.val, fat, p)
		case *bool:
			err = decodeBool(f.val, fat, p)
		case *json.RawMessage:
			if len(f.val) == 0 || f.val[0] != '{' {
				err = scenarioErr(fat, "must be a JSON object")
			} else {
				*p = f.val
			}
		default:
			keys := make([]string, 0, len(targets))
			for k := range targets {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			return unknownKey(at, f.key, keys...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

type field struct {
	key string
	val json.RawMessage // trimmed: it starts with the value's first byte
}

// objectFields splits a JSON object into its fields, in order. It refuses
// anything but an object, duplicate keys and trailing data.
func objectFields(data []byte, at string) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxErr(at, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, scenarioErr(at, "must be a JSON object, got %s", describe(tok))
	}
	var fields []field
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxErr(at, err)
		}
		key, _ := tok.(string) // inside an object the decoder only yields string keys
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, syntaxErr(join(at, key), err)
		}
		if seen[key] {
			return nil, scenarioErr(join(at, key), "duplicate key %q", key)
		}
		seen[key] = true
		fields = append(fields, field{key: key, val: bytes.TrimSpace(val)})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, syntaxErr(at, err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return nil, syntaxErr(at, err)
		}
		return nil, scenarioErr(at, "unexpected %s after the object", describe(tok))
	}
	return fields, nil
}

// arrayElems splits a JSON array into its elements.
func arrayElems(data []byte, at string) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxErr(at, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, scenarioErr(at, "must be a JSON array, got %s", describe(tok))
	}
	elems := []json.RawMessage{}
	for dec.More() {
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, syntaxErr(fmt.Sprintf("%s[%d]", at, len(elems)), err)
		}
		elems = append(elems, bytes.TrimSpace(val))
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntaxErr(at, err)
	}
	return elems, nil
}

func decodeString(data []byte, at string, p *string) error {
	if len(data) == 0 || data[0] != '"' || json.Unmarshal(data, p) != nil {
		return scenarioErr(at, "must be a string")
	}
	return nil
}

func decodeBool(data []byte, at string, p *bool) error {
	if json.Unmarshal(data, p) != nil || (string(data) != "true" && string(data) != "false") {
		return scenarioErr(at, "must be true or false")
	}
	return nil
}

func decodeNumber(data []byte, at string, p *float64) error {
	if len(data) == 0 || !(data[0] == '-' || data[0] >= '0' && data[0] <= '9') || json.Unmarshal(data, p) != nil {
		return scenarioErr(at, "must be a number")
	}
	return nil
}

// unknownKey names the key and the keys that are allowed there.
func unknownKey(at, key string, want ...string) *messages.Error {
	return scenarioErr(join(at, key), "unknown key %q (want one of %s)", key, strings.Join(want, ", "))
}

func syntaxErr(at string, err error) *messages.Error {
	msg := "invalid JSON"
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		msg = fmt.Sprintf("invalid JSON: %s", se.Error())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		msg = "invalid JSON: unexpected end of input"
	default:
		msg = fmt.Sprintf("invalid JSON: %v", err)
	}
	return &messages.Error{Code: messages.CodeInvalid, Field: at, Message: msg, Err: err}
}

func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}
