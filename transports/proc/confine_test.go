package proc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports/proc"
)

// TestConfineWrites: under Landlock a command writes in the workspace,
// reads outside it, and cannot write outside it, while the test process
// (the daemon) keeps writing wherever it likes.
func TestConfineWrites(t *testing.T) {
	if proc.LandlockABI() < 1 {
		t.Skip("this kernel has no Landlock: confinement is best effort and off here")
	}
	ws := t.TempDir()
	outside := t.TempDir()
	for i := 0; i < 5; i++ { // several starts: no thread of ours stays restricted
		cmd := exec.Command("sh", "-c", "touch ./inside && cat /etc/hostname >/dev/null && cd / && touch "+filepath.Join(outside, "x"))
		cmd.Dir = ws
		h, err := (*proc.Group)(nil).Start(cmd, proc.Options{Confine: &proc.Confinement{WritableDirs: []string{ws}}})
		require.NoError(t, err)
		_ = cmd.Wait()
		h.Release()
		assert.Contains(t, h.Confined, "landlock")
		assert.Equal(t, 1, cmd.ProcessState.ExitCode(), "touch outside the workspace must fail")
		assert.FileExists(t, filepath.Join(ws, "inside"))
		assert.NoFileExists(t, filepath.Join(outside, "x"))
		require.NoError(t, os.WriteFile(filepath.Join(outside, "daemon-writes"), []byte("ok"), 0o600),
			"the daemon itself must never be confined")
	}
}
