package main

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The CLI commands are quiet by default: no runtime log lines between the
// turns; --verbose (or the config's logLevel) turns them on.
//
// Not parallel: it captures the process's default logger, which the old
// runtime logged through when given no logger.
func TestRunIsQuietByDefault(t *testing.T) {
	var global bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&global, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	sc := writeScenario(t, clarifyScenario)
	args := []string{"run", "--backend", "script", "--guide", "the second file", "--env", "CODESESSION_SCRIPT=" + sc}

	quiet := runCLI(t, invocation{}, append(args, "--cwd", t.TempDir(), "write hello")...)
	require.Equal(t, exitOK, quiet.code, "stderr: %s", quiet.stderr)
	assert.NotContains(t, quiet.stderr, "level=INFO", "run logs nothing at info by default")
	assert.NotContains(t, quiet.stdout, "level=INFO")
	assert.NotContains(t, quiet.stdout+quiet.stderr, "code_session_")
	assert.NotContains(t, global.String(), "code_session_", "nor through slog's default logger")

	loud := runCLI(t, invocation{}, append(args, "--cwd", t.TempDir(), "-v", "write hello")...)
	require.Equal(t, exitOK, loud.code, "stderr: %s", loud.stderr)
	assert.Contains(t, loud.stderr, "level=INFO")
	assert.Contains(t, loud.stderr, "code_session_read_turn")

	byConfig := runCLI(t, invocation{env: map[string]string{"CODESESSION_LOG_LEVEL": "info"}}, append(args, "--cwd", t.TempDir(), "write hello")...)
	require.Equal(t, exitOK, byConfig.code, "stderr: %s", byConfig.stderr)
	assert.Contains(t, byConfig.stderr, "code_session_read_turn", "logLevel info in the config turns them on")
}

func TestDemoIsQuietByDefault(t *testing.T) {
	t.Parallel()
	res := runCLI(t, invocation{}, "demo", "--yes", "--home", t.TempDir())
	require.Equal(t, exitOK, res.code, "stderr: %s", res.stderr)
	assert.NotContains(t, res.stderr, "level=INFO")
	assert.NotContains(t, res.stdout, "level=INFO")
}
