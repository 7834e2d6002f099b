package codex

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// TestFailedOpenLeavesNoCodexHome: an app-server that dies before it has
// a thread leaves no CODEX_HOME under the home root (nothing could ever
// resume from it), but a CODEX_HOME that was there before the failed open
// (a resume's, with its threads) stays, and so does one the user named.
func TestFailedOpenLeavesNoCodexHome(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "codex")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho 'no app-server today' >&2\nexit 3\n"), 0o755))
	root := t.TempDir()
	tr := New(WithBinary(bin), WithHomeRoot(root))
	open := func(spec transports.SessionSpec) {
		t.Helper()
		spec.Cwd = t.TempDir()
		_, err := tr.Open(context.Background(), spec, func(int, messages.Event) {})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no app-server today", "the stderr tail says why")
	}

	open(transports.SessionSpec{SessionID: "fresh"})
	assert.NoDirExists(t, filepath.Join(root, "fresh"), "a CODEX_HOME made for a session that never had a thread")

	kept := filepath.Join(root, "resumed")
	require.NoError(t, os.MkdirAll(filepath.Join(kept, "sessions"), 0o700))
	open(transports.SessionSpec{SessionID: "resumed", ResumeExternalID: "thread-1"})
	assert.DirExists(t, filepath.Join(kept, "sessions"), "a CODEX_HOME from before holds threads")

	own := t.TempDir()
	open(transports.SessionSpec{SessionID: "own", Env: []string{"CODEX_HOME=" + own}})
	assert.DirExists(t, own, "the user's own CODEX_HOME")
	assert.NoDirExists(t, filepath.Join(root, "own"))
}
