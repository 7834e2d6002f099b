package gate_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports/gate"
)

func refusal(t *testing.T, err error) string {
	t.Helper()
	var r *gate.Refusal
	require.True(t, errors.As(err, &r), "a refusal, got %v", err)
	return r.Reason
}

// A relative path whose readings from the workspace as given and from its
// real path both stay inside but name different files is refused as
// differing: root/g/ws is a link to the real root/r/ws, and "../n" is
// root/g/n (a link to ws/sub) as given but root/r/n (a link to ws) for
// the kernel. Through the real path the same path is one file.
func TestReadingsThatDifferAreRefused(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "r", "ws")
	require.NoError(t, os.MkdirAll(filepath.Join(real, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(real, "sub", "inner.txt"), []byte("x"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "g"), 0o755))
	require.NoError(t, os.Symlink(real, filepath.Join(root, "g", "ws")))
	require.NoError(t, os.Symlink(filepath.Join(real, "sub"), filepath.Join(root, "g", "n")))
	require.NoError(t, os.Symlink(real, filepath.Join(root, "r", "n")))

	given, err := gate.NewWorkspace(filepath.Join(root, "g", "ws"))
	require.NoError(t, err)
	_, err = given.Resolve("../n/inner.txt")
	require.Error(t, err)
	assert.Equal(t, gate.ReasonDiffers, refusal(t, err))

	byReal, err := gate.NewWorkspace(real)
	require.NoError(t, err)
	got, err := byReal.Resolve("../n/inner.txt")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(real, "inner.txt"), got)
}

// "link/missing/../../x" where link points into the workspace: the kernel
// climbs out of the missing tail from the link's target, not from link, so
// it reaches ws/sub/x, not ws/x. When that is itself a link out, the path
// escapes (and is refused as escaping, not merely as differing: the
// kernel's reading is resolved again once ".." has climbed back into what
// exists). When it is not, the two readings differ.
func TestClimbingOutOfAMissingTailThroughALink(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	out := filepath.Join(root, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "sub", "deep"), 0o755))
	require.NoError(t, os.MkdirAll(out, 0o755))
	require.NoError(t, os.Symlink("sub/deep", filepath.Join(ws, "link")))
	require.NoError(t, os.Symlink(out, filepath.Join(ws, "sub", "esc")))
	w, err := gate.NewWorkspace(ws)
	require.NoError(t, err)

	_, err = w.Resolve("link/missing/../../esc/secret")
	require.Error(t, err)
	assert.Equal(t, gate.ReasonEscapes, refusal(t, err))

	_, err = w.Resolve("link/missing/../../x")
	require.Error(t, err)
	assert.Equal(t, gate.ReasonDiffers, refusal(t, err))

	got, err := w.Resolve("link/missing/../x")
	require.NoError(t, err, "one level up stays in the link's target: both readings agree")
	assert.Equal(t, filepath.Join(ws, "sub", "deep", "x"), got)
}
