package controlplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"

	"github.com/codesession/codesession/messages"
)

// checkKeys holds what encoding/json does not: a request's object keys must
// be the field names exactly as documented (encoding/json matches them
// case-insensitively, so {"BRIEF": ...} filled brief) and none may appear
// twice (encoding/json keeps the last, so {"brief":"a","brief":"b"} hid a
// field from whoever read the first). It checks every object whose Go type
// is a struct, at any depth; maps and raw JSON are left to their type.
func checkKeys(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	return walkValue(dec, reflect.TypeOf(dst), "")
}

// walkValue reads one JSON value from dec, checking it against t.
func walkValue(dec *json.Decoder, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return nil // a syntax error: the decoder proper reports it
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
		for dec.More() {
			if err := walkValue(dec, elem, path+"[]"); err != nil {
				return err
			}
		}
		_, _ = dec.Token()
	case '{':
		var fields map[string]reflect.Type
		if t != nil && t.Kind() == reflect.Struct && t != reflect.TypeFor[json.RawMessage]() {
			fields = jsonFields(t)
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil
			}
			key, _ := kt.(string)
			if seen[key] {
				return messages.FieldError("request", strings.TrimPrefix(path+"."+key, "."), "appears twice in the object")
			}
			seen[key] = true
			var ft reflect.Type
			if fields != nil {
				var known bool
				if ft, known = fields[key]; !known {
					return unknownKey(path, key, fields)
				}
			}
			if err := walkValue(dec, ft, strings.TrimPrefix(path+"."+key, ".")); err != nil {
				return err
			}
		}
		_, _ = dec.Token()
	}
	return nil
}

// unknownKey names a key that matches no field exactly, with the field it
// would have filled by case-insensitive matching, if any.
func unknownKey(path, key string, fields map[string]reflect.Type) error {
	field := strings.TrimPrefix(path+"."+key, ".")
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
