package claudecode

import (
	"bytes"
	"io"
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/cli"
)

// FuzzReadLine holds the stdout path together: any bytes become lines
// (each under the cap, or reported as dropped), every line parses or
// becomes an EvError, and the core never panics. Seeded with every line
// of the captures.
func FuzzReadLine(f *testing.F) {
	for _, name := range append(append([]string{}, hostDriven...), rawStdout...) {
		for _, l := range stdoutLines(f, name) {
			f.Add(append(append([]byte{}, l...), '\n'))
		}
	}
	for _, s := range []string{"", "\n", "not json\n", "{\"type\":\"result\"\n", "{}\n{\"type\":1}\n", "\x00\xff\n",
		`{"type":"control_request","request_id":"r","request":{"subtype":"can_use_tool","tool_name":"Bash","input":[1]}}` + "\n",
		`{"type":"result","total_cost_usd":-1,"num_turns":-5,"errors":{"a":1}}` + "\n",
		`{"type":"user","message":{"content":[{"type":"tool_result","content":{"nested":true}}]}}` + "\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 4 << 10
		c := newCore(coreConfig{outputCap: 512, lineCap: max})
		if _, err := c.startTurn(1, "fuzz"); err != nil {
			t.Fatal(err)
		}
		lr := transports.NewLineReader(bytes.NewReader(data), max)
		for {
			line, over, err := lr.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatalf("a bytes.Reader failed: %v", err)
			}
			var e effects
			switch {
			case over > 0:
				if over <= max {
					t.Fatalf("a line of %d bytes was dropped under the %d cap", over, max)
				}
				e.Emit(c.EvTurn(), cli.OverCap("claude", over, max))
				requireError(t, e)
			case len(line) > max:
				t.Fatalf("a line of %d bytes passed the %d cap", len(line), max)
			case len(bytes.TrimSpace(line)) == 0:
				continue
			default:
				evs := Decode(line)
				if len(evs) != 1 {
					t.Fatalf("Decode read %d events of one line", len(evs))
				}
				switch ev := evs[0]; {
				case ev.Err != nil:
					if ev.Msg != nil || ev.Reply != nil {
						t.Fatalf("Decode returned a line and an error")
					}
					e.Emit(c.EvTurn(), cli.BadLine("claude", ev.Err))
					requireError(t, e)
				case ev.Reply != nil:
					continue
				default:
					e = c.Line(ev.Msg)
				}
			}
			for _, te := range e.Events {
				if !te.Ev.Type.Valid() || te.Ev.Type.Annotation() && te.Ev.Type != messages.EvClarification {
					t.Fatalf("the core emitted a %q event", te.Ev.Type)
				}
				if te.Ev.Type == messages.EvToolResult && len(te.Ev.Output) > 512+100 {
					t.Fatalf("a tool result of %d bytes passed the cap", len(te.Ev.Output))
				}
			}
			if !c.Running {
				if _, err := c.startTurn(c.Number+1, "again"); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func requireError(t *testing.T, e effects) {
	t.Helper()
	if len(e.Events) != 1 || e.Events[0].Ev.Type != messages.EvError || e.Events[0].Ev.Fatal {
		t.Fatalf("a bad line must be one non-fatal EvError, got %+v", e.Events)
	}
}
