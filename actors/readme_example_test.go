package actors_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's "Embedded" example is Example's body, word for word, so the
// example a newcomer copies compiles and ends in success (go test runs it).
func TestREADMEQuotesTheExample(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	body, ok := strings.CutPrefix(string(src)[strings.Index(string(src), "func Example() {\n"):], "func Example() {\n")
	require.True(t, ok)
	body = body[:strings.Index(body, "\t// Output:")]
	var quoted strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		quoted.WriteString(strings.TrimPrefix(line, "\t"))
	}
	assert.Contains(t, string(readme), "```go\n"+quoted.String()+"```\n", "README.md's Embedded block must be Example's body (actors/example_test.go)")
}
