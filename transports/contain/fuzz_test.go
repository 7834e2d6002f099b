package contain

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/codesession/codesession/messages"
)

// FuzzRedact holds redaction's promises on any backend output: a secret
// never survives in any field, nor does a longer secret that contains it
// (whatever order the values come in, the result is the same), a tool
// input stays valid JSON, and a malformed one holding a secret is redacted
// as text.
func FuzzRedact(f *testing.F) {
	f.Add("echo gitea-secret-1", "gitea-secret-1")
	f.Add(`cat "quoted\secret"`, `"quoted\secret"`)
	f.Add("ghp_abcdefghijklmnopqrstuvwxyz0123 sk-ant-xxxxxxxxxx", "sk-ant-yyyyyy")
	f.Add(`{"command":"echo hunter2-db`, "hunter2-db")
	f.Add(`{"command": echo hunter2-db}`, "hunter2-db")
	f.Fuzz(func(t *testing.T, text, secret string) {
		if len(secret) < 6 || strings.Contains(inputHeldASecret, secret) {
			// a "secret" that is part of the placeholder itself (say
			// "REDACTED" or "input held") is found in every redaction
			return
		}
		r := newRedactor([]string{secret})
		in, _ := json.Marshal(map[string]string{"command": text})
		ev := r.event(messages.Event{Text: text, Output: text, Input: in})
		for _, s := range []string{ev.Text, ev.Output} {
			if strings.Contains(s, secret) {
				t.Fatalf("the secret survived in %q", s)
			}
		}
		if !json.Valid(ev.Input) {
			t.Fatalf("the input is no longer JSON: %s", ev.Input)
		}
		var back map[string]string
		if json.Unmarshal(ev.Input, &back) == nil && strings.Contains(back["command"], secret) {
			t.Fatalf("the secret survived in the input: %q", back["command"])
		}

		// a longer secret holding this one
		long := secret + "#tail#" + secret[:3]
		withLong := text + " " + long + " " + text
		a := newRedactor([]string{secret, long}).text(withLong)
		b := newRedactor([]string{long, secret}).text(withLong)
		if a != b {
			t.Fatalf("the order of the values changed the redaction: %q vs %q", a, b)
		}
		if strings.Contains(a, long) || strings.Contains(a, secret) {
			t.Fatalf("a secret survived in %q", a)
		}

		// a malformed tool input: the raw text itself
		if !json.Valid([]byte(text)) {
			raw := r.event(messages.Event{Input: json.RawMessage(text)}).Input
			if strings.Contains(string(raw), secret) {
				t.Fatalf("the secret survived in a malformed input: %s", raw)
			}
		}
	})
}
