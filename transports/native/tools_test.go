package native

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codesession/codesession/transports/gate/gatetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func toolEnvFor(t *testing.T, f gatetest.Fixture) *toolEnv {
	t.Helper()
	return &toolEnv{ws: f.Workspace(t, true), outputCap: 4096, env: []string{"PATH=" + os.Getenv("PATH")}}
}

func call(t *testing.T, env *toolEnv, tool string, input any) toolResult {
	t.Helper()
	b, err := json.Marshal(input)
	require.NoError(t, err)
	return tools[tool].run(context.Background(), env, b)
}

func TestReadTool(t *testing.T) {
	t.Parallel()
	f := gatetest.New(t)
	env := toolEnvFor(t, f)
	r := call(t, env, ToolRead, map[string]any{"path": "file.txt"})
	assert.False(t, r.isError, r.output)
	assert.Equal(t, "     1\thello\n     2\tworld\n", r.output)

	r = call(t, env, ToolRead, map[string]any{"path": "file.txt", "offset": 2, "limit": 1})
	assert.Equal(t, "     2\tworld\n", r.output)
	r = call(t, env, ToolRead, map[string]any{"path": "file.txt", "limit": 1})
	assert.Contains(t, r.output, "[showed lines 1-1 of 2; read on with offset 2]")

	for _, p := range []string{"escape.txt", "../../outside/secret.txt", "dangling-in", "link-out/secret.txt"} {
		r = call(t, env, ToolRead, map[string]any{"path": p})
		assert.True(t, r.isError, p)
		assert.True(t, strings.HasPrefix(r.output, "refused: "), r.output)
		assert.NotContains(t, r.output, "secret\n")
	}
	r = call(t, env, ToolRead, map[string]any{"path": "sub"})
	assert.True(t, r.isError)
	assert.Contains(t, r.output, "is a directory")
	r = call(t, env, ToolRead, map[string]any{"path": "missing.go"})
	assert.True(t, r.isError)
	assert.Contains(t, r.output, "no such file")
	r = call(t, env, ToolRead, map[string]any{"file": "x"})
	assert.True(t, r.isError)
	assert.Contains(t, r.output, "invalid input")

	require.NoError(t, os.WriteFile(filepath.Join(f.Real, "bin.dat"), []byte("a\x00b"), 0o644))
	r = call(t, env, ToolRead, map[string]any{"path": "bin.dat"})
	assert.Contains(t, r.output, "binary file")
}

func TestWriteAndEditTools(t *testing.T) {
	t.Parallel()
	f := gatetest.New(t)
	env := toolEnvFor(t, f)

	r := call(t, env, ToolWrite, map[string]any{"path": "pkg/new/a.go", "content": "package a\n\nvar x = 1\nvar y = 1\n"})
	require.False(t, r.isError, r.output)
	assert.Equal(t, "created pkg/new/a.go (31 bytes)", r.output)
	r = call(t, env, ToolWrite, map[string]any{"path": "pkg/new/a.go", "content": "package a\n\nvar x = 1\nvar y = 1\n"})
	assert.Equal(t, "updated pkg/new/a.go (31 bytes)", r.output)

	r = call(t, env, ToolEdit, map[string]any{"path": "pkg/new/a.go", "old_string": "var x = 1", "new_string": "var x = 2"})
	require.False(t, r.isError, r.output)
	b, _ := os.ReadFile(filepath.Join(f.Real, "pkg/new/a.go"))
	assert.Equal(t, "package a\n\nvar x = 2\nvar y = 1\n", string(b))

	r = call(t, env, ToolEdit, map[string]any{"path": "pkg/new/a.go", "old_string": "var ", "new_string": "const "})
	assert.True(t, r.isError)
	assert.Contains(t, r.output, "occurs 2 times")
	assert.Contains(t, r.output, "exactly once")
	r = call(t, env, ToolEdit, map[string]any{"path": "pkg/new/a.go", "old_string": "var z", "new_string": "var w"})
	assert.True(t, r.isError)
	assert.Contains(t, r.output, "was not found in pkg/new/a.go")
	r = call(t, env, ToolEdit, map[string]any{"path": "pkg/new/a.go", "old_string": "", "new_string": "x"})
	assert.True(t, r.isError)
	b2, _ := os.ReadFile(filepath.Join(f.Real, "pkg/new/a.go"))
	assert.Equal(t, b, b2, "failed edits change nothing")

	// Writes through links stay inside or are refused; nothing is created outside.
	r = call(t, env, ToolWrite, map[string]any{"path": "link-in/via.txt", "content": "x"})
	require.False(t, r.isError, r.output)
	assert.FileExists(t, filepath.Join(f.Real, "sub", "via.txt"))
	for _, p := range []string{"dangling-in", "dangling-out", "link-out/new.txt", "../../outside/new.txt", "escape.txt", "sub/deep-dangling/x"} {
		r = call(t, env, ToolWrite, map[string]any{"path": p, "content": "pwned"})
		assert.True(t, r.isError, p)
		assert.True(t, strings.HasPrefix(r.output, "refused: "), r.output)
	}
	assert.NoFileExists(t, filepath.Join(f.Real, "nonexistent.txt"), "a write through a dangling link pointing inside creates nothing")
	assert.NoFileExists(t, filepath.Join(f.Root, "outside", "new.txt"))
	s, _ := os.ReadFile(filepath.Join(f.Root, "outside", "secret.txt"))
	assert.Equal(t, "secret\n", string(s))
	r = call(t, env, ToolWrite, map[string]any{"path": ".", "content": "x"})
	assert.True(t, r.isError)
	r = call(t, env, ToolWrite, map[string]any{"path": "sub", "content": "x"})
	assert.True(t, r.isError)
	assert.Contains(t, r.output, "is a directory")
	r = call(t, env, ToolEdit, map[string]any{"path": "escape.txt", "old_string": "secret", "new_string": "x"})
	assert.True(t, strings.HasPrefix(r.output, "refused: "), r.output)
}

func TestListGlobGrepTools(t *testing.T) {
	t.Parallel()
	f := gatetest.New(t)
	env := toolEnvFor(t, f)
	r := call(t, env, ToolLs, map[string]any{})
	require.False(t, r.isError, r.output)
	assert.Contains(t, r.output, "sub/\n")
	assert.Contains(t, r.output, "link-out@\n")
	assert.Contains(t, r.output, "file.txt\n")
	r = call(t, env, ToolLs, map[string]any{"path": "link-out"})
	assert.True(t, strings.HasPrefix(r.output, "refused: "), r.output)

	r = call(t, env, ToolGlob, map[string]any{"pattern": "**/*.txt"})
	assert.Equal(t, "file.txt\nsub/inner.txt\n[2 match(es) left out: they resolve outside the workspace or through a dangling symlink]\n", r.output)
	r = call(t, env, ToolGlob, map[string]any{"pattern": "../*"})
	assert.True(t, r.isError)
	assert.True(t, strings.HasPrefix(r.output, "refused: "), r.output)

	r = call(t, env, ToolGrep, map[string]any{"pattern": "secret|world|inner"})
	require.False(t, r.isError, r.output)
	assert.Contains(t, r.output, "file.txt:2: world\n")
	assert.Contains(t, r.output, "sub/inner.txt:1: inner\n")
	assert.NotContains(t, r.output, "secret", "a link out is never read")
	assert.Contains(t, r.output, "left out")
	r = call(t, env, ToolGrep, map[string]any{"pattern": "WORLD", "ignore_case": true, "path": "file.txt"})
	assert.Equal(t, "file.txt:2: world\n", r.output)
	r = call(t, env, ToolGrep, map[string]any{"pattern": "x", "path": "link-out"})
	assert.True(t, strings.HasPrefix(r.output, "refused: "), r.output)
	r = call(t, env, ToolGrep, map[string]any{"pattern": "(", "path": "."})
	assert.Contains(t, r.output, "bad pattern")
}

func TestBashTool(t *testing.T) {
	t.Parallel()
	f := gatetest.New(t)
	env := toolEnvFor(t, f)

	r := call(t, env, ToolBash, map[string]any{"command": "pwd; echo $CODESESSION_SECRET_TEST; exit 3"})
	assert.True(t, r.isError)
	assert.Equal(t, f.Real+"\n\n[exit code 3]", r.output, "runs in the workspace's real path with the given env only")

	r = call(t, env, ToolBash, map[string]any{"command": "head -c 10000 /dev/zero | tr '\\0' a"})
	assert.False(t, r.isError, r.output)
	assert.True(t, r.truncated)
	assert.Equal(t, 10000, r.original)
	assert.Contains(t, r.output, "[output truncated: 4096 of 10000 bytes shown]")

	// The commands below would run for an hour: each returns at all only
	// because the tool ended it (guard, a hang stopper, interrupts one
	// otherwise, and its output then says so).
	guard := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		return ctx
	}
	bash := func(ctx context.Context, input any) toolResult {
		b, err := json.Marshal(input)
		require.NoError(t, err)
		return tools[ToolBash].run(ctx, env, b)
	}
	r = bash(guard(), map[string]any{"command": "echo started; sleep 3600", "timeout_seconds": 1})
	assert.True(t, r.isError)
	assert.Contains(t, r.output, "started\n")
	assert.Contains(t, r.output, "killed: the command ran past its wall clock of 1s")

	// A background job holding the output pipe is killed with the group.
	r = bash(guard(), map[string]any{"command": "sleep 3600 & echo bg"})
	assert.False(t, r.isError, r.output)
	assert.Equal(t, "bg\n[exit code 0]", r.output)

	// An interrupt (the turn's context) kills the command.
	ctx, cancel := context.WithCancel(guard())
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	r = bash(ctx, map[string]any{"command": "sleep 3600"})
	assert.True(t, r.isError)
	assert.Contains(t, r.output, "killed: the turn was interrupted")
}
