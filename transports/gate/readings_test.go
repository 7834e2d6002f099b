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

// OpenFile opens what Resolve checked through an os.Root: a directory
// swapped for a link out between the check and the open fails the open
// (O_NOFOLLOW alone guards only the last component), and a file swapped
// for a link is not followed.
func TestOpenFileAfterASwapStaysInside(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	out := filepath.Join(root, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "d"), 0o755))
	require.NoError(t, os.MkdirAll(out, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "d", "f"), []byte("inside"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(out, "f"), []byte("secret"), 0o644))
	w, err := gate.NewWorkspace(ws)
	require.NoError(t, err)

	real, err := w.Resolve("d/f")
	require.NoError(t, err)
	f, err := w.OpenFile(real, os.O_RDONLY, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	// the directory becomes a link out after the check
	require.NoError(t, os.RemoveAll(filepath.Join(ws, "d")))
	require.NoError(t, os.Symlink(out, filepath.Join(ws, "d")))
	f, err = w.OpenFile(real, os.O_RDONLY, 0)
	if err == nil {
		b := make([]byte, 16)
		n, _ := f.Read(b)
		_ = f.Close()
		t.Fatalf("opened %q through a swapped directory", b[:n])
	}
	var ref *gate.Refusal
	assert.True(t, errors.As(err, &ref), "a refusal: %v", err)

	// the file itself becomes a link (inside, even): not followed
	require.NoError(t, os.Remove(filepath.Join(ws, "d")))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "g"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(ws, "g"), filepath.Join(ws, "d", "f")))
	_, err = w.OpenFile(real, os.O_RDONLY, 0)
	assert.Error(t, err)
}

// A path whose only difference from its clean form is "." components and
// extra separators resolves as its clean form does (the same file, or
// the same refusal), through links in and out, a dangling link, a file
// used as a directory and a missing tail: Resolve walks only the clean
// reading of such a path (the one as given has nothing ".." could make
// differ).
func TestDotsAndSeparatorsResolveAsTheCleanPath(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "sub"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "outside"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "sub", "f.txt"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(ws, "sub"), filepath.Join(ws, "in")))
	require.NoError(t, os.Symlink(filepath.Join(root, "outside"), filepath.Join(ws, "out")))
	require.NoError(t, os.Symlink(filepath.Join(ws, "nowhere"), filepath.Join(ws, "dangling")))
	for _, dir := range []string{ws, filepath.Join(root, "wslink")} {
		if dir != ws {
			require.NoError(t, os.Symlink(ws, dir))
		}
		w, err := gate.NewWorkspace(dir)
		require.NoError(t, err)
		for _, p := range []string{".", "./", ".//.", "sub/.", "sub//f.txt", "./sub/./f.txt/", "sub/f.txt/.",
			"in/.", "in//f.txt", "out/.", "out/x/", "dangling/.", "./dangling", "missing/./x/", "sub/f.txt/./x",
			dir + "/./sub/", dir + "//in/f.txt/."} {
			got, err := w.Resolve(p)
			want, wantErr := w.Resolve(filepath.Clean(p))
			if wantErr != nil {
				require.Error(t, err, "%s in %s", p, dir)
				assert.Equal(t, refusal(t, wantErr), refusal(t, err), "%s in %s", p, dir)
				continue
			}
			require.NoError(t, err, "%s in %s", p, dir)
			assert.Equal(t, want, got, "%s in %s", p, dir)
		}
	}
}
