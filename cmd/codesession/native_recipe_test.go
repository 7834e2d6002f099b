package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports/modelmock"
)

// The README's native recipe, as written: the built-in scenario's
// TOOL:WRITE_NATIVE names native's own write tool (TOOL:WRITE names
// Claude's Write, which native refuses), so the run writes the file and
// ends a success.
func TestREADMENativeRecipe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mock, err := modelmock.Start(ctx, modelmock.Reference())
	require.NoError(t, err)
	work := t.TempDir()
	res := runCLI(t, invocation{}, "run", "--backend", "native", "--cwd", work,
		"--env", "ANTHROPIC_BASE_URL="+mock.URL(), "--env", "ANTHROPIC_API_KEY=mock", "--answer", "allow",
		"TOOL:WRITE_NATIVE hello.txt hello")
	require.Equal(t, exitOK, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
	got, err := os.ReadFile(filepath.Join(work, "hello.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(got))
	assert.Contains(t, res.stdout, "success")
}
