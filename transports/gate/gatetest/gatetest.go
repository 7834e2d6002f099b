// Package gatetest builds the symlink tree the workspace gate is tested in:
// links that stay inside, climb out, dangle or loop. Backends use it to run
// the seed 002 gate table against their own permission questions.
package gatetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/codesession/codesession/transports/gate"
	"github.com/stretchr/testify/require"
)

// Fixture is the tree every gate test runs in (root is Root, data/ws is
// Real, home/wslink is Given):
//
//	root/
//	  data/ws/                 the workspace's real path
//	    file.txt
//	    sub/inner.txt
//	    sub/up -> ..           (the workspace itself)
//	    sub/upup -> ../..      (data/: outside)
//	    sub/deep-dangling -> ../missing/thing
//	    link-in -> sub         link-in-file -> file.txt    chain -> link-in
//	    link-out -> ../../outside                          link-out-file -> <root>/outside/secret.txt
//	    dangling-in -> nonexistent.txt                     dangling-out -> /nonexistent-codesession/x
//	    deep-chain -> sub/deep-dangling                    loop1 -> loop2 -> loop1
//	    escape.txt -> ../../outside/secret.txt             dangling.txt -> missing.txt
//	    abs-in -> <root>/home/wslink/file.txt (inside, through the given path)
//	    climb-in -> ../ws/file.txt (inside, climbing out and back in)
//	  data/other/x.txt
//	  outside/secret.txt
//	  home/wslink -> ../data/ws  the workspace as given, when "given" is the symlink
type Fixture struct {
	Root, Real, Given string
}

// New builds the tree under t.TempDir().
func New(t testing.TB) Fixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	f := Fixture{Root: root, Real: filepath.Join(root, "data", "ws"), Given: filepath.Join(root, "home", "wslink")}
	mk := func(p, content string) {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	ln := func(target, p string) {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.Symlink(target, full))
	}
	mk("data/ws/file.txt", "hello\nworld\n")
	mk("data/ws/sub/inner.txt", "inner\n")
	mk("data/other/x.txt", "other\n")
	mk("outside/secret.txt", "secret\n")
	ln("..", "data/ws/sub/up")
	ln("../..", "data/ws/sub/upup")
	ln("../missing/thing", "data/ws/sub/deep-dangling")
	ln("sub", "data/ws/link-in")
	ln("file.txt", "data/ws/link-in-file")
	ln("link-in", "data/ws/chain")
	ln("../../outside", "data/ws/link-out")
	ln(filepath.Join(root, "outside", "secret.txt"), "data/ws/link-out-file")
	ln("nonexistent.txt", "data/ws/dangling-in")
	ln("/nonexistent-codesession/x", "data/ws/dangling-out")
	ln("sub/deep-dangling", "data/ws/deep-chain")
	ln("loop2", "data/ws/loop1")
	ln("loop1", "data/ws/loop2")
	ln("../../outside/secret.txt", "data/ws/escape.txt")
	ln("missing.txt", "data/ws/dangling.txt")
	ln(filepath.Join(root, "home", "wslink", "file.txt"), "data/ws/abs-in")
	ln("../ws/file.txt", "data/ws/climb-in")
	ln("../data/ws", "home/wslink")
	return f
}

// Workspace opens the workspace as given (through home/wslink) or by its real path.
func (f Fixture) Workspace(t testing.TB, viaLink bool) gate.Workspace {
	t.Helper()
	dir := f.Real
	if viaLink {
		dir = f.Given
	}
	w, err := gate.NewWorkspace(dir)
	require.NoError(t, err)
	require.Equal(t, f.Real, w.Real())
	return w
}
