package codex

import (
	"encoding/json"
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/cli"
)

// FuzzReadLine holds the reader's promise on any line the app-server could
// write: parseMessage never panics, a parsed line has exactly one kind
// consistent with its fields, and the core steps through it (with a turn
// open, so every branch runs) without panicking and without emitting an
// event of an invalid type. Seeded from the reference capture.
func FuzzReadLine(f *testing.F) {
	for _, l := range serverLines(f) {
		f.Add(l)
	}
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	ws := workspaceOf(f, f.TempDir()) // once: a directory per input made the workers too slow to answer
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := parseMessage(line)
		if err != nil {
			return
		}
		switch m.Kind {
		case kindResponse:
			if m.ID == nil || m.Method != "" {
				t.Fatalf("response %+v", m)
			}
		case kindRequest:
			if m.ID == nil || m.Method == "" {
				t.Fatalf("request %+v", m)
			}
		case kindNotification:
			if m.ID != nil || m.Method == "" {
				t.Fatalf("notification %+v", m)
			}
		default:
			t.Fatalf("parsed with kind %v", m.Kind)
		}
		c := newCore(coreConfig{outputCap: 64, posture: messages.PostureDefault, ws: ws})
		c.beginTurn(1)
		for _, fx := range []cli.Effects{c.handle(m), c.handle(m)} {
			for _, e := range fx.Events {
				if !e.Ev.Type.Valid() {
					t.Fatalf("event of invalid type %q", e.Ev.Type)
				}
				if e.Ev.Type == messages.EvToolResult && len(e.Ev.Output) > 64+100 {
					t.Fatalf("tool result over the cap: %d bytes", len(e.Ev.Output))
				}
			}
			for _, w := range fx.Writes {
				if !json.Valid(w) {
					t.Fatalf("wrote invalid JSON %q", w)
				}
			}
		}
		for _, id := range c.pendingIDs() {
			if _, err := c.answer(id, messages.DecisionDeny, "no"); err != nil {
				t.Fatalf("answer %s: %v", id, err)
			}
		}
	})
}
