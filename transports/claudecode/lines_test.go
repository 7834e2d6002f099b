package claudecode

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// readAll reads every line with the cap, as strings; a dropped line is
// "<over N>".
func readAll(t testing.TB, r io.Reader, max int) []string {
	lr := newLineReader(r, max)
	var out []string
	for {
		line, over, err := lr.next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		if over > 0 {
			out = append(out, "<over "+itoa(over)+">")
			continue
		}
		out = append(out, string(line))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestLineReader(t *testing.T) {
	big := strings.Repeat("x", 200<<10) // longer than the reader's buffer
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want []string
	}{
		{"lines", "a\nbb\n\nccc\n", 10, []string{"a", "bb", "", "ccc"}},
		{"no final newline", "a\nbb", 10, []string{"a", "bb"}},
		{"exactly the cap", "12345\n", 5, []string{"12345"}},
		{"one over the cap", "123456\nok\n", 5, []string{"<over 6>", "ok"}},
		{"over the cap at the end", "ok\n123456", 5, []string{"ok", "<over 6>"}},
		{"huge line then more", big + "\nafter\n", 1 << 10, []string{"<over " + itoa(len(big)) + ">", "after"}},
		{"huge line under a huge cap", big + "\n", 1 << 20, []string{big}},
		{"empty", "", 5, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, readAll(t, strings.NewReader(tc.in), tc.max))
			// byte at a time gives the same lines
			assert.Equal(t, tc.want, readAll(t, iotest.OneByteReader(strings.NewReader(tc.in)), tc.max))
		})
	}
	lr := newLineReader(iotest.ErrReader(io.ErrUnexpectedEOF), 10)
	_, _, err := lr.next()
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

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
		lr := newLineReader(bytes.NewReader(data), max)
		for {
			line, over, err := lr.next()
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
				e = c.overCap(over)
				requireError(t, e)
			case len(line) > max:
				t.Fatalf("a line of %d bytes passed the %d cap", len(line), max)
			case len(bytes.TrimSpace(line)) == 0:
				continue
			default:
				l, perr := ParseLine(line)
				if perr != nil {
					if l != nil {
						t.Fatalf("ParseLine returned a line and an error")
					}
					e = c.badLine(perr)
					requireError(t, e)
					break
				}
				if _, ok := l.(ControlResponse); ok {
					continue
				}
				e = c.line(l)
			}
			for _, te := range e.events {
				if !te.ev.Type.Valid() || te.ev.Type.Annotation() && te.ev.Type != messages.EvClarification {
					t.Fatalf("the core emitted a %q event", te.ev.Type)
				}
				if te.ev.Type == messages.EvToolResult && len(te.ev.Output) > 512+100 {
					t.Fatalf("a tool result of %d bytes passed the cap", len(te.ev.Output))
				}
			}
			if !c.running {
				if _, err := c.startTurn(c.turn+1, "again"); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func requireError(t *testing.T, e effects) {
	t.Helper()
	if len(e.events) != 1 || e.events[0].ev.Type != messages.EvError || e.events[0].ev.Fatal {
		t.Fatalf("a bad line must be one non-fatal EvError, got %+v", e.events)
	}
}
