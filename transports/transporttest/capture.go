package transporttest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
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

// Golden compares got with the golden file at path, or rewrites the file
// with got when update is set (each package has its own -update flag: two
// test helpers defining one would clash in a test binary importing both).
func Golden(t *testing.T, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(want) != got {
		t.Errorf("the output differs from %s (-update rewrites it):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff is the first line where want and got differ, with both sides.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  want %q\n  got  %q", i+1, wl, gl)
		}
	}
	return ""
}
