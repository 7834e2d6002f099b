package clitest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports/cli"
)

// update rewrites the decoder golden files: go test -run Golden -update.
var update = flag.Bool("update", false, "rewrite the decoder golden files (testdata/decode/*.golden)")

// GoldenDecode replays every dir/*.jsonl (captured stdout, one line each)
// through decode and compares what it reads with the .golden beside it,
// one rendered event a line; -update rewrites the golden files.
func GoldenDecode[M comparable](t *testing.T, dir string, decode func([]byte) []cli.Event[M]) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no captures in %s", dir)
	for _, in := range files {
		t.Run(filepath.Base(in), func(t *testing.T) {
			var b strings.Builder
			for i, line := range lines(t, in) {
				for _, ev := range decode(line) {
					fmt.Fprintf(&b, "%d: %s\n", i+1, Render(ev))
				}
			}
			golden := strings.TrimSuffix(in, ".jsonl") + ".golden"
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(b.String()), 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run with -update to write it")
			assert.Equal(t, string(want), b.String(), "%s decodes otherwise than %s says (-update rewrites it)", in, golden)
		})
	}
}

// lines are the non-blank lines of a file.
func lines(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			out = append(out, bytes.Clone(l))
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// Render is a decoded event on one line: the reply, the message's type
// and fields as JSON, or the error; long renderings are cut.
func Render[M comparable](ev cli.Event[M]) string {
	var parts []string
	if ev.Err != nil {
		parts = append(parts, "error "+ev.Err.Error())
	}
	if r := ev.Reply; r != nil {
		s := fmt.Sprintf("reply %s", r.ID)
		if r.Refused {
			s += fmt.Sprintf(" refused code=%s %q", r.Code, r.Message)
		}
		parts = append(parts, s+" "+string(r.Result))
	}
	var zero M
	if ev.Msg != zero {
		parts = append(parts, fmt.Sprintf("%T %s", ev.Msg, nonZero(ev.Msg)))
	}
	s := strings.Join(parts, " | ")
	if len(s) > 400 {
		s = s[:400] + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return s
}

// nonZero is v as JSON without its zero members (null, "", 0, false, {}
// and [] at any depth), so a rendering shows what a line said.
func nonZero(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	var m any
	if json.Unmarshal(b, &m) != nil {
		return string(b)
	}
	out, _ := json.Marshal(prune(m))
	return string(out)
}

func prune(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if x = prune(x); x == nil {
				delete(v, k)
			} else {
				v[k] = x
			}
		}
		if len(v) == 0 {
			return nil
		}
	case []any:
		for i, x := range v {
			if p := prune(x); p != nil {
				v[i] = p
			}
		}
		if len(v) == 0 {
			return nil
		}
	case string:
		if v == "" {
			return nil
		}
	case float64:
		if v == 0 {
			return nil
		}
	case bool:
		if !v {
			return nil
		}
	}
	return v
}

// SeedDecode seeds a FuzzDecode with every line of dir/*.jsonl.
func SeedDecode(f *testing.F, dir string) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no captures in %s (%v)", dir, err)
	}
	for _, in := range files {
		b, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		for l := range bytes.SplitSeq(b, []byte("\n")) {
			f.Add(l)
		}
	}
}

// CheckDecoded holds what every decode of one line must be, whatever the
// line: one event; an error alone, or a reply with an id, or a message.
func CheckDecoded[M comparable](t *testing.T, line []byte, evs []cli.Event[M]) {
	t.Helper()
	if len(evs) != 1 {
		t.Fatalf("one line decoded into %d events: %q", len(evs), line)
	}
	ev, zero := evs[0], *new(M)
	switch {
	case ev.Err != nil:
		if ev.Reply != nil || ev.Msg != zero {
			t.Fatalf("an error with a reply or a message: %q", line)
		}
	case ev.Reply != nil:
		if ev.Reply.Refused != (ev.Reply.Code != "") {
			t.Fatalf("a refusal without a code, or a code without a refusal: %+v", ev.Reply)
		}
	case ev.Msg == zero:
		t.Fatalf("neither an error, nor a reply, nor a message: %q", line)
	}
}
