package proc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports/proc"
)

// needLandlock skips where the kernel has no Landlock, and fails under
// CI=true: CI must run the confinement tests, never skip them.
func needLandlock(t *testing.T) {
	t.Helper()
	if proc.LandlockABI() >= 1 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this kernel has no Landlock: CI must run the confinement tests")
	}
	t.Skip("this kernel has no Landlock: confinement is best effort and off here")
}

// TestConfineWrites: under Landlock a command writes in the workspace,
// reads outside it, and cannot write outside it, while the test process
// (the daemon) keeps writing wherever it likes.
func TestConfineWrites(t *testing.T) {
	needLandlock(t)
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

// TestConfineReadsAndTree: a denied credential folder cannot be read or
// listed, even where it lies inside a writable HOME; its siblings can; the
// private TMPDIR is set, writable and removed at Release; and a setsid
// grandchild that outlives its parent is confined too.
func TestConfineReadsAndTree(t *testing.T) {
	needLandlock(t)
	ws, home, outside := t.TempDir(), t.TempDir(), t.TempDir()
	ssh := filepath.Join(home, ".ssh")
	require.NoError(t, os.MkdirAll(ssh, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(ssh, "id_test"), []byte("PRIVATE"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(home, "notes"), []byte("public"), 0o600))
	script := `set -u
cat "$HOME/.ssh/id_test" && echo READ-SECRET
ls "$HOME/.ssh" && echo LISTED-SECRET
cat "$HOME/notes" >/dev/null && echo READ-SIBLING
echo t > "$TMPDIR/t" && echo TMP-WRITE
echo "$TMPDIR" > tmpdir
echo h > "$HOME/state" && echo HOME-WRITE
setsid sh -c 'sleep 0.2; echo x > ` + outside + `/y; echo done > ./grandchild-ran' &
wait`
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir, cmd.Env = ws, append(os.Environ(), "HOME="+home)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	h, err := (*proc.Group)(nil).Start(cmd, proc.Options{Confine: &proc.Confinement{
		WritableDirs: []string{ws, home}, ReadDenied: proc.CredentialPaths(home), OwnTmp: true}})
	require.NoError(t, err)
	require.NotEmpty(t, h.TempDir())
	_ = cmd.Wait()
	// the grandchild left the group: wait for its marker, bounded
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(ws, "grandchild-ran")); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	tmp := h.TempDir()
	assert.FileExists(t, filepath.Join(tmp, "t"))
	h.Release()
	o := out.String()
	assert.NotContains(t, o, "READ-SECRET")
	assert.NotContains(t, o, "PRIVATE")
	assert.NotContains(t, o, "LISTED-SECRET")
	assert.Contains(t, o, "READ-SIBLING")
	assert.Contains(t, o, "TMP-WRITE")
	assert.Contains(t, o, "HOME-WRITE")
	assert.Contains(t, h.Confined, "no reads under "+ssh)
	got, _ := os.ReadFile(filepath.Join(ws, "tmpdir"))
	assert.Equal(t, tmp, strings.TrimSpace(string(got)))
	assert.FileExists(t, filepath.Join(ws, "grandchild-ran"), "the setsid grandchild ran: %s", o)
	assert.NoFileExists(t, filepath.Join(outside, "y"), "the setsid grandchild is confined too")
	assert.NoDirExists(t, tmp, "Release removes the private TMPDIR")
}

func TestReadAllowSet(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/b/secret", "a/b/keep", "a/c", "d"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o700))
	}
	allow := proc.ReadAllowSet([]string{filepath.Join(root, "a/b/secret")})
	assert.Contains(t, allow, filepath.Join(root, "a/b/keep"))
	assert.Contains(t, allow, filepath.Join(root, "a/c"))
	assert.Contains(t, allow, filepath.Join(root, "d"))
	for _, a := range allow {
		assert.False(t, strings.HasPrefix(filepath.Join(root, "a/b/secret"), a), "%s holds the denied path", a)
	}
}
