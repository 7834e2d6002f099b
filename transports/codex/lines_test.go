package codex

import (
	"io"
	"strings"
	"testing"
)

func TestLineReader(t *testing.T) {
	in := "short\n" + strings.Repeat("x", 100) + "\nafter\nlast"
	lr := newLineReader(strings.NewReader(in), 10)
	var got []string
	for {
		b, over, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if over > 0 {
			got = append(got, "<dropped "+itoa(over)+">")
			continue
		}
		got = append(got, string(b))
	}
	want := []string{"short", "<dropped 100>", "after", "last"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", got, want)
	}
}
