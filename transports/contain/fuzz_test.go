package contain

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/codesession/codesession/messages"
)

// FuzzRedact holds redaction's promises on any backend output: a secret
// never survives in any field, and a tool input stays valid JSON.
func FuzzRedact(f *testing.F) {
	f.Add("echo gitea-secret-1", "gitea-secret-1")
	f.Add(`cat "quoted\secret"`, `"quoted\secret"`)
	f.Add("ghp_abcdefghijklmnopqrstuvwxyz0123 sk-ant-xxxxxxxxxx", "sk-ant-yyyyyy")
	f.Fuzz(func(t *testing.T, text, secret string) {
		if len(secret) < 6 {
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
	})
}
