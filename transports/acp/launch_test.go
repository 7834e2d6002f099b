package acp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// TestLaunchArgvIsWhatTheProcessStartsWith: the argv LaunchArgv says for a
// spec, known before any process runs, is the argv the agent's process
// then starts with (a stand-in binary writes down its argv and exits, so
// the start fails after the process ran).
func TestLaunchArgvIsWhatTheProcessStartsWith(t *testing.T) {
	dir := t.TempDir()
	got := filepath.Join(dir, "argv")
	bin := filepath.Join(dir, "agent")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" > "+got+"\nexit 3\n"), 0o755))
	agent := Agent{Descriptor: messages.Descriptor{ID: "argv"}, Command: "argv-agent",
		Launch: func(spec transports.SessionSpec, scratch string) ([]string, []string, error) {
			// a per-session file in scratch, as gemini's settings: the
			// argv must not depend on where scratch is
			if err := os.WriteFile(filepath.Join(scratch, "cfg"), []byte("x"), 0o600); err != nil {
				return nil, nil, err
			}
			return []string{"acp", "--cwd", spec.Cwd, "-m", spec.Model}, nil, nil
		}}
	tr := New(agent, WithBinary(bin), WithStartTimeout(time.Minute))
	spec := transports.SessionSpec{SessionID: "s1", Cwd: t.TempDir(), Model: "m1", Posture: messages.PostureDefault}

	want := tr.LaunchArgv(spec)
	require.Equal(t, []string{bin, "acp", "--cwd", spec.Cwd, "-m", "m1"}, want)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := tr.Open(ctx, spec, func(int, messages.Event) {})
	require.Error(t, err, "the stand-in exits before initialize")
	b, err := os.ReadFile(got)
	require.NoError(t, err, "the stand-in ran")
	assert.Equal(t, want, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"), "LaunchArgv is the argv the process started with")
}
