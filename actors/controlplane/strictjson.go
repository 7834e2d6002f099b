package controlplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"

	"github.com/codesession/codesession/messages"
)

// MaxBodyDepth is how deeply a request body may nest arrays and objects.
// The deepest documented body (a start op's scope constraints) nests three
// levels; tool input in an answer is free JSON, and sixty-four levels is
// far more than any a person or an agent writes. A deeper body is refused
// before anything decodes it: the key check below and encoding/json both
// keep state per level, and a 1 MB body of '[' (inside the body limit)
// once drove the key check to 9.5 GiB.
const MaxBodyDepth = 64

// errTooDeep is the answer to a body nested deeper than MaxBodyDepth.
func errTooDeep() error {
	return messages.Errorf(messages.CodeInvalid, "request", "nesting too deep: a request body may nest arrays and objects at most %d levels", MaxBodyDepth)
}

// checkDepth refuses a body that nests arrays and objects deeper than
// MaxBodyDepth. It is one pass over the bytes with no allocation, so its
// time and memory are bounded by the body limit whatever the body holds.
// Brackets inside strings do not count; a malformed body is left to the
// decoder, which reports it (its depth never exceeds the count here, since
// every level it opens is a bracket outside a string).
func checkDepth(body []byte) error {
	depth := 0
	inString, escaped := false, false
	for _, c := range body {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > MaxBodyDepth {
				return errTooDeep()
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}

// checkKeys holds what encoding/json does not: a request's object keys must
// be the field names exactly as documented (encoding/json matches them
// case-insensitively, so {"BRIEF": ...} filled brief) and none may appear
// twice (encoding/json keeps the last, so {"brief":"a","brief":"b"} hid a
// field from whoever read the first). It checks every object whose Go type
// is a struct, at any depth; maps and raw JSON are left to their type.
// Call it only on a body checkDepth passed: its recursion follows the
// body's nesting.
func checkKeys(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	w := keyWalker{dec: dec, fields: map[reflect.Type]map[string]reflect.Type{}}
	if err := w.value(reflect.TypeOf(dst)); err != nil && !errors.Is(err, errMalformed) {
		return err
	}
	return nil // checked, or malformed: the decoder proper reports where
}

// errMalformed stops the walk at the first token the decoder cannot read.
// It must stop there: after a syntax error json.Decoder.More still reports
// more to come, so {"allowedTools":[x]} once spun a handler forever.
var errMalformed = errors.New("malformed JSON")

// keyWalker reads a body token by token. It keeps the path to the current
// value as a stack of segments and joins them only to name a field in an
// error, so walking costs no string per level or element.
type keyWalker struct {
	dec  *json.Decoder
	path []string // object keys, and "[]" for an array element
	// fields caches jsonFields per struct type: an array of a thousand
	// objects reflects on their type once
	fields map[reflect.Type]map[string]reflect.Type
}

// field is the dotted path of key inside the current value.
func (w *keyWalker) field(key string) string {
	var b strings.Builder
	for _, s := range w.path {
		if s != "[]" && b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.WriteString(key)
	return b.String()
}

// value reads one JSON value, checking it against t.
func (w *keyWalker) value(t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := w.dec.Token()
	if err != nil {
		return errMalformed // EOF or a syntax error
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		w.path = append(w.path, "[]")
		for w.dec.More() {
			if err := w.value(elem); err != nil {
				return err
			}
		}
		w.path = w.path[:len(w.path)-1]
		if _, err := w.dec.Token(); err != nil {
			return errMalformed
		}
	case '{':
		var fields map[string]reflect.Type
		if t != nil && t.Kind() == reflect.Struct && t != reflect.TypeFor[json.RawMessage]() {
			if fields = w.fields[t]; fields == nil {
				fields = jsonFields(t)
				w.fields[t] = fields
			}
		}
		seen := map[string]bool{}
		for w.dec.More() {
			kt, err := w.dec.Token()
			if err != nil {
				return errMalformed
			}
			key, _ := kt.(string)
			if seen[key] {
				return messages.FieldError("request", w.field(key), "appears twice in the object")
			}
			seen[key] = true
			var ft reflect.Type
			if fields != nil {
				var known bool
				if ft, known = fields[key]; !known {
					return unknownKey(w.field(key), key, fields)
				}
			}
			w.path = append(w.path, key)
			err = w.value(ft)
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		}
		if _, err := w.dec.Token(); err != nil {
			return errMalformed
		}
	}
	return nil
}

// unknownKey names a key that matches no field exactly, with the field it
// would have filled by case-insensitive matching, if any.
func unknownKey(field, key string, fields map[string]reflect.Type) error {
	for name := range fields {
		if strings.EqualFold(name, key) {
			return messages.FieldError("request", field, "unknown field %q: field names are case-sensitive (did you mean %q?)", key, name)
		}
	}
	return messages.FieldError("request", field, "unknown field %q", key)
}

// jsonFields maps t's JSON field names (embedded structs flattened) to
// their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
