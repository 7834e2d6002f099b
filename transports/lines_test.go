package transports

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAll reads every line with the cap, as strings; a dropped line is
// "<over N: head>".
func readAll(t testing.TB, r io.Reader, max int) []string {
	lr := NewLineReader(r, max)
	var out []string
	for {
		line, over, err := lr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		if over > 0 {
			out = append(out, "<over "+itoa(over)+": "+string(line)+">")
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
		{"one over the cap", "123456\nok\n", 5, []string{"<over 6: 123456>", "ok"}},
		{"over the cap at the end", "ok\n123456", 5, []string{"ok", "<over 6: 123456>"}},
		{"huge line then more", big + "\nafter\n", 1 << 10, []string{"<over " + itoa(len(big)) + ": " + big[:HeadBytes] + ">", "after"}},
		{"huge line under a huge cap", big + "\n", 1 << 20, []string{big}},
		{"empty", "", 5, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, readAll(t, strings.NewReader(tc.in), tc.max))
			// byte at a time gives the same lines
			assert.Equal(t, tc.want, readAll(t, iotest.OneByteReader(strings.NewReader(tc.in)), tc.max))
		})
	}
	lr := NewLineReader(iotest.ErrReader(io.ErrUnexpectedEOF), 10)
	_, _, err := lr.Next()
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}
