package acp

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/codesession/codesession/transports"
)

// filterLines runs filterLine over every line of r as the kit's line
// reader splits it, as the agent's stdout reaches it.
func filterLines(r io.Reader, w io.Writer, maxLine int, report func(v lineVerdict, n int, head []byte)) error {
	lr := transports.NewLineReader(r, maxLine)
	for {
		line, over, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := filterLine(line, over, w, report); err != nil {
			return err
		}
	}
}

func TestFilterLines(t *testing.T) {
	long := `{"jsonrpc":"2.0","method":"x","params":{"pad":"` + strings.Repeat("y", 3000) + `"}}`
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`Ripgrep is not available.`,
		``,
		`{"jsonrpc":"1.0","id":2}`,
		`[1,2]`,
		long,
		`{"jsonrpc":"2.0","method":"session/update","params":{}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}`,
		`{"jsonrpc":"2.0","method":"x","params":[1]}`,
		`{"jsonrpc":"2.0","id":3,"result":{}}`, // last line without a newline
	}, "\n")
	var out bytes.Buffer
	var dropped []lineVerdict
	if err := filterLines(strings.NewReader(in), &out, 2048, func(v lineVerdict, n int, head []byte) {
		dropped = append(dropped, v)
		if len(head) > 80 {
			t.Errorf("the report's head is %d bytes: want at most 80", len(head))
		}
	}); err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `{"jsonrpc":"2.0","method":"session/update","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","method":"x","params":[1]}` + "\n" + `{"jsonrpc":"2.0","id":3,"result":{}}` + "\n"
	if out.String() != want {
		t.Errorf("passed:\n%s\nwant:\n%s", out.String(), want)
	}
	wantDropped := []lineVerdict{lineGarbage, lineGarbage, lineGarbage, lineTooLong}
	if len(dropped) != len(wantDropped) {
		t.Fatalf("dropped %v: want %v", dropped, wantDropped)
	}
	for i := range dropped {
		if dropped[i] != wantDropped[i] {
			t.Errorf("dropped[%d] = %v: want %v", i, dropped[i], wantDropped[i])
		}
	}
}

// FuzzFilterLines: whatever the agent writes, every line passed on is one
// JSON-RPC 2.0 object ending in a newline, and every input line is either
// passed, blank or reported.
func FuzzFilterLines(f *testing.F) {
	for _, s := range []string{
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n",
		"garbage\n{\"jsonrpc\":\"2.0\",\"method\":\"m\"}",
		"\n\n\r\n{}\n[]\nnull\n",
		"{\"jsonrpc\":\"2.0\",\"x\":\"" + strings.Repeat("z", 1500) + "\"}\n",
		"{\"jsonrpc\":\"2.0\"}\r\n{\"jsonrpc\":\"2.0\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		reported := 0
		if err := filterLines(bytes.NewReader(in), &out, 1024, func(v lineVerdict, n int, head []byte) {
			reported++
			if v != lineGarbage && v != lineTooLong {
				t.Errorf("reported verdict %v", v)
			}
		}); err != nil {
			t.Fatal(err)
		}
		passed := 0
		for _, line := range bytes.SplitAfter(out.Bytes(), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			passed++
			if line[len(line)-1] != '\n' || classify(line[:len(line)-1]) != linePass {
				t.Fatalf("passed a line that is not JSON-RPC: %q", line)
			}
			if len(line) > 1024+1 {
				t.Fatalf("passed a %d-byte line over the cap", len(line))
			}
		}
		lines := 0
		for _, l := range bytes.Split(in, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines++
			}
		}
		if passed+reported > lines {
			t.Fatalf("%d passed + %d reported > %d non-blank input lines", passed, reported, lines)
		}
	})
}
