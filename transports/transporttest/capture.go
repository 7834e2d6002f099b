package transporttest

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// CaptureLine is one line of a host-driven capture (the format of the
// reference captures of a CLI's protocol): who wrote it ("<<" the agent,
// ">>" the host; "argv", "stderr" and "exit" say how it ran) and what.
type CaptureLine struct {
	Dir string          `json:"dir"`
	Msg json.RawMessage `json:"msg"`
}

// ReadCapture reads the capture at path, one CaptureLine a line, failing
// t on a line that does not decode.
func ReadCapture(t testing.TB, path string) []CaptureLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []CaptureLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for i := 1; sc.Scan(); i++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var l CaptureLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s line %d: %v", path, i, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}
