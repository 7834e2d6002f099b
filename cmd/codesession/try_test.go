package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/codex"
	"github.com/codesession/codesession/transports/copilot"
	"github.com/codesession/codesession/transports/droid"
	"github.com/codesession/codesession/transports/gemini"
	"github.com/codesession/codesession/transports/kilo"
	"github.com/codesession/codesession/transports/opencode"
	"github.com/codesession/codesession/transports/qwen"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// requireTry checks what every `try` prints: the one turn, the file the
// agent wrote in its diff, the success verdict, and the scratch
// repository gone afterwards.
func requireTry(t *testing.T, res result) {
	t.Helper()
	require.Equal(t, exitOK, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
	for _, want := range []string{"SCRIPTED model server on http://127.0.0.1:", "== turn 1: turn_complete",
		"answered allow_once", "== diff of turn 1", "+hello from codesession try", "outcome success",
		"removed the temporary directories"} {
		assert.Contains(t, res.stdout, want)
	}
	assert.NotContains(t, res.stdout, "== turn 2", "try is one turn")
	repo := field(res.stdout, "repository:")
	require.NotEmpty(t, repo)
	assert.NoDirExists(t, repo, "the scratch repository is removed")
	assert.NoDirExists(t, field(res.stdout, "home:"), "the scratch home is removed")
}

func TestTryNative(t *testing.T) {
	t.Parallel()
	requireTry(t, runCLI(t, invocation{}, "try", "--backend", "native"))
}

// TestTryClaudeCode drives the real claude CLI (skips without it, fails
// under CI=true).
func TestTryClaudeCode(t *testing.T) {
	t.Parallel()
	bin := claudeBin(t)
	res := runCLIWithin(t, 10*time.Minute, invocation{env: map[string]string{claudecode.EnvBinary: bin}}, "try", "--backend", "claude-code")
	requireTry(t, res)
	assert.Contains(t, res.stdout, "the real claude-code CLI ("+claudecode.PinnedVersion+")")
}

// TestTryCLIBackends drives each other agent's real CLI through try
// (each skips without its CLI, and fails under CI=true).
func TestTryCLIBackends(t *testing.T) {
	for _, b := range []struct{ id, envVar, install, command string }{
		{opencode.ID, opencode.Agent().EnvBinary, opencode.Agent().Install, "opencode"},
		{copilot.ID, copilot.Agent().EnvBinary, copilot.Agent().Install, "copilot"},
		{gemini.ID, gemini.Agent().EnvBinary, gemini.Agent().Install, "gemini"},
		{codex.ID, codex.EnvBinary, "npm install @openai/codex@" + codex.PinnedVersion, "codex"},
		{droid.ID, droid.EnvBinary, "npm install droid@" + droid.PinnedVersion, "droid"},
		{qwen.ID, qwen.Agent().EnvBinary, qwen.Agent().Install, "qwen"},
		{kilo.ID, kilo.Agent().EnvBinary, kilo.Agent().Install, "kilo"},
	} {
		t.Run(b.id, func(t *testing.T) {
			t.Parallel()
			bin := subprocesstest.Find(t, b.envVar, b.install, b.command)
			res := runCLIWithin(t, 10*time.Minute, invocation{env: map[string]string{b.envVar: bin}}, "try", "--backend", b.id)
			requireTry(t, res)
			assert.Contains(t, res.stdout, "the real "+b.id+" CLI (")
		})
	}
}

// runCLIWithin is runCLI with a longer deadline, for agent CLIs whose boot
// on a loaded machine can take minutes (the deadline only stops a hang).
func runCLIWithin(t *testing.T, d time.Duration, inv invocation, args ...string) result {
	t.Helper()
	env := map[string]string{"CODESESSION_HOME": t.TempDir()}
	for k, v := range inv.env {
		env[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, func(k string) string { return env[k] }, strings.NewReader(inv.stdin), &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestTryJSONKeepsOneObjectPerLine(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	res := runCLI(t, invocation{}, "try", "--json", "--home", home)
	require.Equal(t, exitOK, res.code, "stderr: %s", res.stderr)
	results, stopped := jsonLines(t, res.stdout)
	assert.Equal(t, []messages.TurnKind{kClar, kDone}, kinds(results))
	assert.Equal(t, messages.OutcomeSuccess, stopped.Outcome)
	assert.FileExists(t, filepath.Join(home, "sessions", stopped.SessionID, "meta.json"), "a --home given is kept")
}

// TestTryNamesWhatIsMissing: a CLI that is not there is a typed error that
// says which variable to set and what to install, exit 1, not a usage error.
func TestTryNamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-claude-here")
	res := runCLI(t, invocation{env: map[string]string{claudecode.EnvBinary: missing}}, "try", "--backend", "claude-code")
	assert.Equal(t, exitFailed, res.code, res.stderr)
	assert.Contains(t, res.stderr, "codesession try: backend: claude-code is not available here")
	assert.Contains(t, res.stderr, "set "+claudecode.EnvBinary+" to its executable")
	assert.Contains(t, res.stderr, "npm install @anthropic-ai/claude-code@"+claudecode.PinnedVersion)
	assert.Contains(t, res.stderr, "[unavailable]", "the error is typed")
	assert.NotContains(t, res.stderr, "Try: codesession try --help")

	res = runCLI(t, invocation{}, "try", "--backend", "grok")
	assert.Equal(t, exitUsage, res.code)
	assert.Contains(t, res.stderr, "try drives claude-code, codex, copilot, droid, gemini, kilo, native, opencode, qwen")
	assert.Contains(t, res.stderr, "docs/backends.md")
}

// TestDemoClaudeCode is the quick start's `demo --yes --backend
// claude-code`: the real claude CLI fixes the typo, then adds the test.
func TestDemoClaudeCode(t *testing.T) {
	t.Parallel()
	bin := claudeBin(t)
	res := runCLIWithin(t, 10*time.Minute, invocation{env: map[string]string{claudecode.EnvBinary: bin}}, "demo", "--yes", "--json", "--backend", "claude-code")
	require.Equal(t, exitOK, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
	results, stopped := jsonLines(t, res.stdout)
	assert.Equal(t, []messages.TurnKind{kClar, kDone, kClar, kDone}, kinds(results))
	assert.Equal(t, messages.OutcomeSuccess, stopped.Outcome)
	assert.Contains(t, res.stderr, "the real claude-code CLI ("+claudecode.PinnedVersion+")")
	assert.Contains(t, res.stderr, `+func greeting() string { return "hello, world" }`, "the CLI's edit is in the turn's diff")
	assert.Contains(t, res.stderr, "hello_test.go")
}
