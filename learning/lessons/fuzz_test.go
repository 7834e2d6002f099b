package lessons

import (
	"testing"
	"unicode/utf8"
)

// FuzzParse: whatever a model answers, Parse either rejects it or returns
// candidates that keep the book's rules.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"lessons":[]}`,
		`{"lessons":[{"text":"codex is fine","backend":"codex","model":"","tags":[],"sessions":["sa"],"reinforces":""}]}`,
		"```json\n{\"lessons\":[{\"text\":\"x\",\"sessions\":[\"sb\",\"sa\"]}]}\n```",
		`{"lessons":[{"text":"raise the posture","sessions":["sa"]}]}`,
		`{"lessons":null}`, `[]`, ``, "```", `{"lessons":[1,2]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, answer string) {
		cands, _, err := Parse(answer, batch())
		if err != nil {
			return
		}
		for _, c := range cands {
			if validText(c.Text) != nil || utf8.RuneCountInString(c.Text) > MaxLessonChars {
				t.Fatalf("an invalid text passed: %q", c.Text)
			}
			if len(c.Supports) == 0 {
				t.Fatalf("a candidate without support passed")
			}
			for _, s := range c.Supports {
				if s.SessionID != "sa" && s.SessionID != "sb" {
					t.Fatalf("a support outside the batch: %+v", s)
				}
			}
		}
	})
}
