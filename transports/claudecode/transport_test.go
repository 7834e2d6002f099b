package claudecode

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

func TestBuildArgs(t *testing.T) {
	spec := transports.SessionSpec{Posture: messages.PostureAcceptEdits, Model: "claude-mock-1", Effort: messages.EffortLow,
		AllowedTools: []string{"Read", "Bash(git *)", "mcp__srv__tool", "Bash"}, AppendSystemPrompt: "be brief"}
	assert.Equal(t, []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--include-partial-messages",
		"--permission-prompt-tool", "stdio", "--permission-mode", "acceptEdits",
		"--model", "claude-mock-1", "--effort", "low",
		"--allowedTools", "Read,Bash(git *),mcp__srv__tool,Bash", "--tools", "Read,Bash",
		"--append-system-prompt", "be brief", "--session-id", "ID"}, buildArgs(spec, "ID", false))
	args := buildArgs(transports.SessionSpec{Posture: messages.PostureFull}, "ID", true)
	assert.Equal(t, []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--include-partial-messages",
		"--permission-prompt-tool", "stdio", "--permission-mode", "default",
		"--resume", "ID"}, args, "no model, effort or tools flags when the spec names none; full never bypasses the prompts")
	// an empty (not nil) allowedTools list allows nothing
	args = buildArgs(transports.SessionSpec{Posture: messages.PosturePlan, AllowedTools: []string{}}, "ID", false)
	assert.Contains(t, strings.Join(args, " "), "--allowedTools  --tools ")
}

func TestBuildEnv(t *testing.T) {
	buildEnv := func(base []string, spec transports.SessionSpec, extra []string) []string {
		return New(WithEnv(extra...)).Cfg.Environ(base, spec)
	}
	base := []string{"PATH=/bin", "HOME=/root", "NODE_OPTIONS=--inspect", "OPENAI_API_KEY=sk-other", "CLAUDECODE=1",
		"ANTHROPIC_API_KEY=from-the-caller", "GITEA_TOKEN=founder", "UNRELATED=1"}
	env := buildEnv(base, transports.SessionSpec{Home: "/tmp/h", Env: []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:1", "DISABLE_AUTOUPDATER=0"}},
		[]string{"EXTRA=1"})
	assert.Equal(t, []string{"PATH=/bin", "HOME=/tmp/h", "ANTHROPIC_API_KEY=from-the-caller", "DISABLE_AUTOUPDATER=0",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_SDK_READS_SESSION_STATE=1", "EXTRA=1",
		"ANTHROPIC_BASE_URL=http://127.0.0.1:1"}, env, "an allowlist, defaulted, the session's entries win, one entry per key")
	env = buildEnv([]string{"HOME=/root"}, transports.SessionSpec{}, nil)
	assert.Contains(t, env, "HOME=/root", "no Home: the caller's")
	env = buildEnv(base, transports.SessionSpec{PassEnv: []string{"GITEA_TOKEN"}}, nil)
	assert.Contains(t, env, "GITEA_TOKEN=founder", "passed by name for this backend")
}

func TestTranscriptExists(t *testing.T) {
	home := t.TempDir()
	_, known := transcriptExists(nil, "x")
	assert.False(t, known)
	exists, known := transcriptExists([]string{"HOME=" + home}, "abc")
	assert.True(t, known)
	assert.False(t, exists)
	dir := filepath.Join(home, ".claude", "projects", "-w-repo")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "abc.jsonl"), []byte("{}\n"), 0o644))
	exists, _ = transcriptExists([]string{"HOME=" + home}, "abc")
	assert.True(t, exists)
	exists, _ = transcriptExists([]string{"HOME=" + home, "CLAUDE_CONFIG_DIR=" + t.TempDir()}, "abc")
	assert.False(t, exists, "CLAUDE_CONFIG_DIR moves it")
}

func TestDescriptorMatchesSeed003(t *testing.T) {
	d := New().Descriptor()
	assert.Equal(t, ID, d.ID)
	assert.True(t, d.ClarifySupport)
	assert.True(t, d.HonorsAllowed)
	assert.Equal(t, messages.GranularityStream, d.Granularity)
	assert.Equal(t, messages.ResumeNative, d.Resume)
	assert.Equal(t, messages.ModelPerTurn, d.ModelSelection)
	assert.Equal(t, messages.EffortAtStart, d.EffortSupport)
	assert.Equal(t, map[messages.Posture]string{messages.PosturePlan: "plan", messages.PostureDefault: "default",
		messages.PostureAcceptEdits: "acceptEdits", messages.PostureFull: "default, every question the workspace gate admits allowed by the runtime"}, d.PostureMap)
	assert.Equal(t, messages.GateQuestions, d.Gate)
	assert.Equal(t, []string{"Write", "Edit", "MultiEdit", "NotebookEdit"}, d.EditToolNames)
	assert.Equal(t, "claude --resume {sessionId}", d.ExternalAttach.CommandTemplate)
	for _, m := range []messages.GuideMode{messages.GuideSteer, messages.GuideQueue, messages.GuideInterrupt} {
		assert.True(t, d.SupportsGuideMode(m), m)
	}
	assert.True(t, d.Live.Interrupt)
	assert.True(t, d.Live.SetPosture)
	assert.Contains(t, d.BriefingNotes, "workspace gate")
	assert.Equal(t, PinnedVersion, d.CLIVersion)
	for p := range d.PostureMap {
		if p != messages.PostureFull {
			assert.Equal(t, d.PostureMap[p], PermissionMode(p))
		}
	}
	assert.Equal(t, "default", PermissionMode(messages.PostureFull))
	assert.Empty(t, PermissionMode(messages.Posture("bogus")))
}

// TestCIPinsTheSameVersion keeps .ci/run's install and PinnedVersion equal.
func TestCIPinsTheSameVersion(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^CLAUDE_CODE_VERSION=(\S+)`).FindSubmatch(data)
	require.NotNil(t, m, ".ci/run sets CLAUDE_CODE_VERSION")
	assert.Equal(t, PinnedVersion, string(m[1]))
}

func TestProbe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	script := filepath.Join(t.TempDir(), "claude")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho '9.9.9 (Claude Code)'\n"), 0o755))
	a := New(WithBinary(script)).Probe(ctx)
	assert.True(t, a.Available)
	assert.Equal(t, "9.9.9", a.Version)
	assert.Equal(t, script, a.Binary)
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho 'broken install' >&2\nexit 2\n"), 0o755))
	a = New(WithBinary(script)).Probe(ctx)
	assert.False(t, a.Available)
	assert.Contains(t, a.Reason, "broken install")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755))
	a = New(WithBinary(script)).Probe(ctx)
	assert.False(t, a.Available)
	assert.Contains(t, a.Reason, "printed nothing")

	// the binary: the option, else the session's env, else the process's, else PATH
	tr := New()
	t.Setenv(EnvBinary, "/from/process")
	b, err := tr.Binary([]string{EnvBinary + "=/from/session"})
	require.NoError(t, err)
	assert.Equal(t, "/from/session", b)
	b, _ = tr.Binary(nil)
	assert.Equal(t, "/from/process", b)
	t.Setenv(EnvBinary, "")
	t.Setenv("PATH", t.TempDir())
	_, err = tr.Binary(nil)
	assert.ErrorContains(t, err, "not installed")
	a = tr.Probe(ctx)
	assert.False(t, a.Available)
	assert.Contains(t, a.Reason, "npm install @anthropic-ai/claude-code@"+PinnedVersion)
}

func TestNewUUID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		u := transports.NewUUID()
		assert.Regexp(t, re, u)
		assert.False(t, seen[u])
		seen[u] = true
	}
	assert.Equal(t, "a | b", transports.TailText([]byte("\n  a  \r\n\n b \n"), 100))
	assert.Equal(t, "cd", transports.TailText([]byte("ab\ncd"), 3), "cut at a line start")
}
