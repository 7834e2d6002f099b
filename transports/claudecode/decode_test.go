package claudecode

import (
	"testing"

	"github.com/codesession/codesession/transports/cli/clitest"
)

// TestDecodeGolden replays the captured stdout in testdata/decode through
// Decode and compares what it reads with the golden files (-update
// rewrites them).
func TestDecodeGolden(t *testing.T) { clitest.GoldenDecode(t, "testdata/decode", Decode) }

// FuzzDecode holds Decode to one well-formed event a line, whatever the
// line, seeded from the captures.
func FuzzDecode(f *testing.F) {
	clitest.SeedDecode(f, "testdata/decode")
	f.Fuzz(func(t *testing.T, line []byte) { clitest.CheckDecoded(t, line, Decode(line)) })
}
