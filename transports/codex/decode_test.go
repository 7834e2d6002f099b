package codex

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/transporttest"
)

var update = flag.Bool("update", false, "rewrite the decoder's golden files under testdata/decode")

// decodeSeeds are hand-written server lines beside the capture's: the
// edges of each shape (a change outside the workspace, a request without
// params, a negative token count, a failed turn, malformed messages).
var decodeSeeds = []string{
	`{"method":"item/started","params":{"turnId":"t","item":{"type":"fileChange","id":"i","changes":[{"path":"../x","kind":"add"}]}}}`,
	`{"id":9,"method":"item/fileChange/requestApproval","params":{"itemId":"i"}}`,
	`{"method":"turn/diff/updated","params":{"turnId":"t","diff":"diff --git a/x b/x\n+++ b/x\n+y\n"}}`,
	`{"method":"thread/tokenUsage/updated","params":{"tokenUsage":{"total":{"inputTokens":-5}}}}`,
	`{"method":"turn/completed","params":{"turn":{"id":"t","status":"failed","error":{"message":"boom"}}}}`,
	`{"id":1,"error":{"code":1,"message":"x"}}`, `{"method":"x","params":[1,2]}`, `{"id":1.5e300,"result":null}`,
	`{"id":{},"result":1}`, `{"method":""}`, `not json`,
}

// serverLines are the lines the app-server wrote in the capture.
func serverLines(t testing.TB) [][]byte {
	var out [][]byte
	for _, l := range transporttest.ReadCapture(t, "testdata/codex/codex_appserver.jsonl") {
		if l.Dir == "<<" {
			out = append(out, l.Msg)
		}
	}
	return out
}

// TestDecodeGolden decodes every line of the capture and every seed on its
// own (Decode: a fresh session, turn 1 running) and holds the events to
// testdata/decode/<method>.golden, one file per method, each input line
// ("<< ...") followed by its events ("turn N {...}") or its error
// ("error ..."); responses decode to nothing and are left out. -update
// rewrites the files.
func TestDecodeGolden(t *testing.T) {
	files := map[string]*bytes.Buffer{}
	lines := serverLines(t)
	for _, s := range decodeSeeds {
		lines = append(lines, []byte(s))
	}
	for _, line := range lines {
		var head struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(line, &head)
		evs, err := Decode(line)
		if err == nil && head.Method == "" {
			if len(evs) != 0 {
				t.Errorf("the response %s decoded to %d events: want none", line, len(evs))
			}
			continue
		}
		name := strings.ReplaceAll(head.Method, "/", "_")
		if err != nil {
			name = "malformed"
		}
		b := files[name]
		if b == nil {
			b = &bytes.Buffer{}
			files[name] = b
		}
		fmt.Fprintf(b, "<< %s\n", bytes.TrimSpace(line))
		if err != nil {
			fmt.Fprintf(b, "error %v\n", err)
		}
		for _, e := range evs {
			if !e.Event.Type.Valid() {
				t.Errorf("%s: event of invalid type %q", line, e.Event.Type)
			}
			j, _ := json.Marshal(e.Event)
			fmt.Fprintf(b, "turn %d %s\n", e.Turn, j)
		}
	}
	dir := filepath.Join("testdata", "decode")
	if *update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, name+".golden"), b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	have, _ := filepath.Glob(filepath.Join(dir, "*.golden"))
	var names []string
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(have) != len(names) {
		t.Errorf("%d golden files in %s, %d methods decoded (%v): run with -update after checking", len(have), dir, len(names), names)
	}
	for _, name := range names {
		path := filepath.Join(dir, name+".golden")
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (run with -update after checking)", err)
			continue
		}
		if got := files[name].String(); got != string(want) {
			t.Errorf("%s differs (run with -update after checking):\n%s", path, got)
		}
	}
}

// TestDecodeStreamKeepsState: a Decoder carries a stream's state from line
// to line, as the session does: a command's output deltas are one tool
// result when its item completes, and the turn's completion names turn 1.
func TestDecodeStreamKeepsState(t *testing.T) {
	d := NewDecoder(0)
	var got []TurnEvent
	for _, l := range []string{
		`{"method":"turn/started","params":{"turn":{"id":"t1","status":"inProgress"}}}`,
		`{"method":"item/started","params":{"turnId":"t1","item":{"type":"commandExecution","id":"c1","command":"echo hi","cwd":"/w","status":"inProgress"}}}`,
		`{"method":"item/commandExecution/outputDelta","params":{"turnId":"t1","itemId":"c1","delta":"hi\n"}}`,
		`{"method":"item/completed","params":{"turnId":"t1","item":{"type":"commandExecution","id":"c1","command":"echo hi","status":"completed","exitCode":0}}}`,
		`{"method":"turn/completed","params":{"turn":{"id":"t1","status":"completed"}}}`,
	} {
		evs, err := d.Decode([]byte(l))
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		got = append(got, evs...)
	}
	var result, end bool
	for _, e := range got {
		switch {
		case e.Event.Type == messages.EvToolResult:
			result = e.Event.Output == "hi\n" && e.Turn == 1
		case e.Event.Type == messages.EvTurnEnd:
			end = e.Turn == 1 && e.Event.State == messages.TurnCompleted
		}
	}
	if !result || !end {
		t.Errorf("the stream decoded to %+v: want the command's output as its result and turn 1 completed", got)
	}
}

// FuzzDecode holds Decode's promise on any line: it never panics; a line
// is an error exactly when parseMessage refuses it; every event has a
// valid type and a turn of 0 or 1; a tool result stays near the cap.
// Seeded from the reference capture and decodeSeeds.
func FuzzDecode(f *testing.F) {
	for _, l := range serverLines(f) {
		f.Add(l)
	}
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		d := NewDecoder(64)
		evs, err := d.Decode(line)
		if _, perr := parseMessage(line); (err != nil) != (perr != nil) {
			t.Fatalf("Decode error %v, parseMessage error %v", err, perr)
		}
		more, _ := d.Decode(line) // a repeat finds the state the first left
		for _, e := range append(evs, more...) {
			if !e.Event.Type.Valid() {
				t.Fatalf("event of invalid type %q", e.Event.Type)
			}
			if e.Turn != 0 && e.Turn != 1 {
				t.Fatalf("event of turn %d: only turn 1 ran", e.Turn)
			}
			if e.Event.Type == messages.EvToolResult && len(e.Event.Output) > 64+100 {
				t.Fatalf("tool result over the cap: %d bytes", len(e.Event.Output))
			}
		}
	})
}
