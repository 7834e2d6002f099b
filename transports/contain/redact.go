package contain

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/codesession/codesession/messages"
)

// Redacted replaces a secret in events.
const Redacted = "[REDACTED]"

// inputHeldASecret replaces a tool input that held a secret and could not
// be redacted in place without breaking it.
const inputHeldASecret = Redacted + " (the tool input held a secret)"

// keyShapes are the shapes of well-known API keys and tokens, redacted
// wherever they appear, whether or not the environment held them.
var keyShapes = regexp.MustCompile(strings.Join([]string{
	`sk-ant-[A-Za-z0-9_-]{8,}`,                 // Anthropic
	`sk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,}`, // OpenAI
	`gh[pousr]_[A-Za-z0-9]{20,}`,               // GitHub
	`github_pat_[A-Za-z0-9_]{20,}`,             // GitHub fine-grained
	`glpat-[A-Za-z0-9_-]{20,}`,                 // GitLab
	`xox[abposr]-[A-Za-z0-9-]{10,}`,            // Slack
	`AKIA[0-9A-Z]{16}`,                         // AWS access key id
	`AIza[0-9A-Za-z_-]{35}`,                    // Google API key
	`-----BEGIN [A-Z ]*PRIVATE KEY-----`,       // PEM private keys
}, "|"))

// redactor hides the values of a session's secrets and known key shapes.
type redactor struct {
	values []string // longest first, so a value containing another goes whole
	raw    [][]byte // values as bytes, for plainJSON
	// exhaustive skips the pre-checks (mayHoldKeyShape, plainJSON): every
	// text goes through the regexps and every input is decoded. Tests hold
	// the pre-checked redactor to it.
	exhaustive bool
}

func newRedactor(values []string) *redactor {
	seen := map[string]bool{}
	var vs []string
	for _, v := range values {
		if v != "" && !seen[v] {
			seen[v] = true
			vs = append(vs, v)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return len(vs[i]) > len(vs[j]) })
	raw := make([][]byte, len(vs))
	for i, v := range vs {
		raw[i] = []byte(v)
	}
	return &redactor{values: vs, raw: raw}
}

func (r *redactor) text(s string) string {
	if s == "" {
		return s
	}
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, Redacted)
	}
	if !r.exhaustive && !mayHoldKeyShape(s) {
		return s // nearly every event: the regexps cannot match
	}
	return keyShapes.ReplaceAllString(s, Redacted)
}

// keyShapeStarts are literals every match of keyShapes contains: a string
// holding none of them cannot match, and skips the regexps.
var keyShapeStarts = []string{"sk-", "gh", "glpat-", "xox", "AKIA", "AIza", "-----BEGIN "}

// keyShapeFirst marks the first bytes of keyShapeStarts.
var keyShapeFirst = func() (t [256]bool) {
	for _, l := range keyShapeStarts {
		t[l[0]] = true
	}
	return t
}()

// mayHoldKeyShape reports whether s holds one of keyShapeStarts: false
// means keyShapes finds nothing in s. One pass over s, where running the
// regexps on every event was most of the redactor's cost.
func mayHoldKeyShape[S ~string | ~[]byte](s S) bool {
	for i := 0; i < len(s); i++ {
		if !keyShapeFirst[s[i]] {
			continue
		}
		for _, l := range keyShapeStarts {
			if len(s)-i >= len(l) && string(s[i:i+len(l)]) == l {
				return true
			}
		}
	}
	return false
}

// plainJSON reports whether raw cannot hold anything to redact, without
// decoding it: with no escape and valid UTF-8, every string it decodes to
// is a substring of raw, so if raw holds no secret value and no key shape,
// neither does any of its strings (nor raw itself, as text).
func (r *redactor) plainJSON(raw json.RawMessage) bool {
	if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) || mayHoldKeyShape(raw) {
		return false
	}
	for _, v := range r.raw {
		if bytes.Contains(raw, v) {
			return false
		}
	}
	return true
}

// event returns ev with every text field redacted.
func (r *redactor) event(ev messages.Event) messages.Event {
	ev.Text = r.text(ev.Text)
	ev.Output = r.text(ev.Output)
	ev.Reason = r.text(ev.Reason)
	ev.Note = r.text(ev.Note)
	if len(ev.Input) > 0 {
		ev.Input = r.json(ev.Input)
	}
	return ev
}

// json redacts every string of a JSON document (decoded, so an escaped
// secret is found too); a document that does not decode is redacted as text
// and replaced by a placeholder if that breaks it.
func (r *redactor) json(raw json.RawMessage) json.RawMessage {
	if !r.exhaustive && r.plainJSON(raw) {
		return raw
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		red := r.text(string(raw))
		if red == string(raw) {
			return raw
		}
		if json.Valid([]byte(red)) {
			return json.RawMessage(red)
		}
		b, _ := json.Marshal(inputHeldASecret)
		return b
	}
	out, changed := r.walk(v)
	if !changed {
		return raw
	}
	b, err := json.Marshal(out)
	if err != nil {
		b, _ = json.Marshal(inputHeldASecret)
	}
	return b
}

func (r *redactor) walk(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		red := r.text(x)
		return red, red != x
	case []any:
		changed := false
		for i := range x {
			var c bool
			x[i], c = r.walk(x[i])
			changed = changed || c
		}
		return x, changed
	case map[string]any:
		changed := false
		for k := range x {
			var c bool
			x[k], c = r.walk(x[k])
			changed = changed || c
		}
		return x, changed
	}
	return v, false
}
