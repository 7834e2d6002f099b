package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// claudeBin finds the real claude CLI: $CODESESSION_CLAUDE_BIN, else PATH;
// without it the test skips, except under CI=true, where it fails (.ci/run
// installs the pinned version).
func claudeBin(t *testing.T) string {
	t.Helper()
	return subprocesstest.Find(t, claudecode.EnvBinary, "npm install @anthropic-ai/claude-code@"+claudecode.PinnedVersion, "claude")
}

// startModelmockCmd runs `codesession modelmock` in-process until the test
// ends and returns the URL it printed.
func startModelmockCmd(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"modelmock"}, args...), nil, nil, pw, io.Discard)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		assert.Equal(t, exitOK, <-done)
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	url := strings.TrimSpace(line)
	require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, url)
	return url
}

// TestRunClaudeCodeAgainstModelmock is docs/backends.md's manual run, automated:
// `codesession modelmock` serves the reference scenario and `codesession
// run --backend claude-code` drives the real CLI against it.
func TestRunClaudeCodeAgainstModelmock(t *testing.T) {
	t.Parallel()
	bin := claudeBin(t)
	log := filepath.Join(t.TempDir(), "requests.jsonl")
	url := startModelmockCmd(t, "--log", log)
	work := t.TempDir()
	target := filepath.Join(work, "hello.txt")
	res := runCLI(t, invocation{},
		"run", "--backend", "claude-code", "--cwd", work, "--json", "--answer", "allow",
		"--env", "ANTHROPIC_BASE_URL="+url, "--env", "ANTHROPIC_API_KEY=sk-ant-test",
		"--env", "HOME="+t.TempDir(), "--env", claudecode.EnvBinary+"="+bin,
		"TOOL:WRITE "+target+" hello-from-run")
	require.Equal(t, exitOK, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
	results, stopped := jsonLines(t, res.stdout)
	require.Equal(t, []messages.TurnKind{kClar, kDone}, kinds(results), res.stdout)
	assert.Equal(t, "Write", results[0].ToolName)
	assert.Contains(t, results[1].Text, "TOOL_DONE: is_error=false result=File created successfully")
	assert.Equal(t, 2, results[1].NumTurns)
	assert.Equal(t, messages.OutcomeSuccess, stopped.Outcome)
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "hello-from-run\n", string(b))

	// --log wrote every request, secrets redacted
	data, err := os.ReadFile(log)
	require.NoError(t, err)
	var mains int
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r modelmock.Request
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		if r.Kind == modelmock.KindMain {
			mains++
			assert.Equal(t, "REDACTED", r.Header.Get("X-Api-Key"))
		}
	}
	assert.Equal(t, 2, mains, "the tool call and the answer to its result")
	assert.NotContains(t, string(data), "sk-ant-test")
}

func TestModelmockCommand(t *testing.T) {
	t.Parallel()
	sc := writeScenario(t, `{"rules":[{"match":{"text":"hi"},"steps":[{"text":"hello from a file"}]}]}`)
	url := startModelmockCmd(t, "--scenario", sc, "--addr", "127.0.0.1:0")
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	resp, err := httpPost(url+"/v1/messages", body)
	require.NoError(t, err)
	assert.Contains(t, resp, "hello from a file")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"modelmock", "--scenario", filepath.Join(t.TempDir(), "missing.json")}, "cannot open it"},
		{[]string{"modelmock", "--addr", "0.0.0.0:0"}, "not a loopback address"},
		{[]string{"modelmock", "extra"}, "takes no arguments"},
	} {
		res := runCLI(t, invocation{}, tc.args...)
		assert.Equal(t, exitUsage, res.code, tc.args)
		assert.Contains(t, res.stderr, tc.want, tc.args)
		assert.Contains(t, res.stderr, "Try: codesession modelmock --help", tc.args)
	}
}

func httpPost(url, body string) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
