package gate_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codesession/codesession/transports/gate"
	"github.com/codesession/codesession/transports/gate/gatetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A want is either a path relative to the workspace (allowed) or a refusal
// whose text contains refuse.
type gateWant struct {
	rel    string
	refuse string
}

func ok(rel string) gateWant     { return gateWant{rel: rel} }
func no(reason string) gateWant  { return gateWant{refuse: reason} }
func (w gateWant) allowed() bool { return w.refuse == "" }
func (w gateWant) String() string {
	return map[bool]string{true: "allow " + w.rel, false: "refuse: " + w.refuse}[w.allowed()]
}
func same(w gateWant) [2]gateWant          { return [2]gateWant{w, w} }
func pair(real, link gateWant) [2]gateWant { return [2]gateWant{real, link} }

// TestGate holds every case of seed 002's gate. want[0] is the answer with
// the workspace opened by its real path, want[1] through the symlink
// home/wslink. {root}, {real} and {given} in a path are the fixture's.
func TestGate(t *testing.T) {
	t.Parallel()
	f := gatetest.New(t)
	cases := []struct {
		name string
		path string
		want [2]gateWant
	}{
		{"plain file", "file.txt", same(ok("file.txt"))},
		{"dot slash", "./file.txt", same(ok("file.txt"))},
		{"nested", "sub/inner.txt", same(ok("sub/inner.txt"))},
		{"the workspace itself", ".", same(ok("."))},
		{"dot dot inside a real dir", "sub/../file.txt", same(ok("file.txt"))},
		{"new file in new dirs", "new/dir/file.go", same(ok("new/dir/file.go"))},
		{"climb out of a missing dir back in", "new/../file.txt", same(ok("file.txt"))},
		{"empty", "", same(no(gate.ReasonEmpty))},
		{"NUL byte", "file\x00.txt", same(no(gate.ReasonNUL))},

		// Escapes by "..".
		{"parent", "..", same(no(gate.ReasonEscapes))},
		{"up two to outside", "../../outside/secret.txt", same(no(gate.ReasonEscapes))},
		{"deep climb", "sub/../../../../../../etc/passwd", same(no(gate.ReasonEscapes))},
		{"missing dir then climb out", "new/../../other/x.txt", same(no(gate.ReasonEscapes))},
		{"missing dir then climb into a link out", "new/../link-out/secret.txt", same(no(gate.ReasonEscapes))},
		// Out and back in through the real path's parents: inside for the
		// kernel working in the real path, outside as given. Refused when the
		// workspace is behind a symlink; the same file when it is not.
		{"out and back in through the real parent", "../ws/file.txt", pair(ok("file.txt"), no("refused: "))},
		// Out and back in through the given path's parents: inside as given,
		// outside from the real path.
		{"out and back in through the given parent", "../wslink/file.txt", same(no("refused: "))},
		{"out to a sibling", "../other/x.txt", same(no(gate.ReasonEscapes))},

		// Absolute paths.
		{"absolute outside", "/etc/passwd", same(no(gate.ReasonEscapes))},
		{"absolute root", "/", same(no(gate.ReasonEscapes))},
		{"absolute real path", "{real}/file.txt", same(ok("file.txt"))},
		{"absolute given path", "{given}/file.txt", same(ok("file.txt"))},
		{"absolute given path climbing out and in", "{given}/../wslink/file.txt", same(no("refused: "))},
		{"absolute real path climbing out", "{real}/../other/x.txt", same(no(gate.ReasonEscapes))},
		{"absolute outside file", "{root}/outside/secret.txt", same(no(gate.ReasonEscapes))},

		// Symlinks inside the workspace.
		{"link to a dir inside", "link-in/inner.txt", same(ok("sub/inner.txt"))},
		{"link to a file inside", "link-in-file", same(ok("file.txt"))},
		{"link to a link", "chain/inner.txt", same(ok("sub/inner.txt"))},
		{"link up to the workspace", "sub/up/file.txt", same(ok("file.txt"))},
		{"absolute link through the given path", "abs-in", same(ok("file.txt"))},
		{"link that climbs out and back in", "climb-in", same(ok("file.txt"))},
		{"link then dot dot", "link-in/../file.txt", same(ok("file.txt"))},
		{"new file under a link inside", "link-in/new.txt", same(ok("sub/new.txt"))},

		// Symlinks out.
		{"link to a dir outside", "link-out/secret.txt", same(no(gate.ReasonEscapes))},
		{"link to a dir outside itself", "link-out", same(no(gate.ReasonEscapes))},
		{"new file under a link out", "link-out/new.txt", same(no(gate.ReasonEscapes))},
		{"absolute link to a file outside", "link-out-file", same(no(gate.ReasonEscapes))},
		{"link up two", "sub/upup/other/x.txt", same(no(gate.ReasonEscapes))},
		{"link up then dot dot (kernel climbs the target)", "sub/up/../outside", same(no("refused: "))},
		{"named like a text file, pointing out", "escape.txt", same(no(gate.ReasonEscapes))},

		// Dangling symlinks at any depth, even pointing inside.
		{"dangling, pointing inside", "dangling-in", same(no(gate.ReasonDangling))},
		{"dangling, pointing outside", "dangling-out", same(no(gate.ReasonDangling))},
		{"below a dangling link", "dangling-in/x", same(no(gate.ReasonDangling))},
		{"dangling one level down", "sub/deep-dangling", same(no(gate.ReasonDangling))},
		{"far below a dangling link", "sub/deep-dangling/a/b/c", same(no(gate.ReasonDangling))},
		{"link to a dangling link", "deep-chain", same(no(gate.ReasonDangling))},
		{"dangling through a link to a dir", "link-in/deep-dangling", same(no(gate.ReasonDangling))},
		{"dangling named .txt", "dangling.txt", same(no(gate.ReasonDangling))},
		{"absolute to a dangling link", "{real}/dangling-in", same(no(gate.ReasonDangling))},

		// Other failures.
		{"symlink loop", "loop1", same(no(gate.ReasonLoop))},
		{"a file used as a directory", "file.txt/x", same(no("not a directory"))},
	}
	for _, c := range cases {
		for i, viaLink := range []bool{false, true} {
			name := c.name + map[bool]string{false: " (real)", true: " (via link)"}[viaLink]
			t.Run(name, func(t *testing.T) {
				w := f.Workspace(t, viaLink)
				p := strings.NewReplacer("{root}", f.Root, "{real}", f.Real, "{given}", f.Given).Replace(c.path)
				want := c.want[i]
				got, err := w.Resolve(p)
				if want.allowed() {
					require.NoError(t, err, "want %s", want)
					assert.Equal(t, filepath.Join(f.Real, want.rel), got)
					assertInside(t, f.Real, got)
					return
				}
				require.Error(t, err, "want %s, got %q", want, got)
				var ref *gate.Refusal
				require.True(t, errors.As(err, &ref), "a refusal, not %T", err)
				assert.Contains(t, err.Error(), want.refuse)
				assert.True(t, strings.HasPrefix(err.Error(), "refused: "), err.Error())
			})
		}
	}
}

// within is the lexical containment check, written apart from the gate's.
func within(base, p string) bool {
	rel, err := filepath.Rel(base, p)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// assertInside checks, independently of the gate, that p is inside real:
// lexically, and after resolving the symlinks of its longest existing
// prefix (which must have none left: the gate returns real paths).
func assertInside(t testing.TB, real, p string) {
	t.Helper()
	if !within(real, p) {
		t.Fatalf("allowed path %q is not inside %q", p, real)
	}
	cur := p
	for {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			if r != cur {
				t.Fatalf("allowed path %q still holds a symlink: %q resolves to %q", p, cur, r)
			}
			if !within(real, r) {
				t.Fatalf("allowed path %q resolves outside: %q", p, r)
			}
			return
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("allowed path %q cannot be checked: %v", p, err)
		}
		if _, lerr := os.Lstat(cur); lerr == nil {
			t.Fatalf("allowed path %q goes through a dangling symlink at %q", p, cur)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			t.Fatalf("allowed path %q has no existing prefix", p)
		}
		cur = parent
	}
}

func TestGlobGate(t *testing.T) {
	t.Parallel()
	f := gatetest.New(t)
	cases := []struct {
		pattern string
		want    []string // relative to the workspace; nil with refuse set
		leftOut int
		refuse  string
	}{
		{pattern: "*.txt", want: []string{"file.txt"}, leftOut: 2}, // escape.txt out, dangling.txt dangling
		{pattern: "**/*.txt", want: []string{"file.txt", "sub/inner.txt"}, leftOut: 2},
		{pattern: "sub/*", want: []string{"sub/inner.txt", "sub/up"}, leftOut: 2}, // upup out, deep-dangling
		{pattern: "link-in/*.txt", want: []string{"sub/inner.txt"}},
		{pattern: "{file,escape}.txt", want: []string{"file.txt"}, leftOut: 1},
		{pattern: "file.txt", want: []string{"file.txt"}},
		{pattern: "{real}/sub/*.txt", want: []string{"sub/inner.txt"}},
		{pattern: "{given}/sub/*.txt", want: []string{"sub/inner.txt"}},
		{pattern: "missing/*.go", want: nil},
		{pattern: "../*", refuse: gate.ReasonEscapes},
		{pattern: "../../outside/*", refuse: gate.ReasonEscapes},
		{pattern: "/etc/*", refuse: gate.ReasonEscapes},
		{pattern: "/*", refuse: gate.ReasonEscapes},
		{pattern: "link-out/*", refuse: gate.ReasonEscapes},
		{pattern: "sub/upup/*", refuse: gate.ReasonEscapes},
		{pattern: "dangling-in/*", refuse: gate.ReasonDangling},
		{pattern: "*/../../*", refuse: `".."`},
		{pattern: "**/../*", refuse: `".."`},
		{pattern: "{..,sub}/*", refuse: gate.ReasonEscapes},
		{pattern: "{real}/../*", refuse: gate.ReasonEscapes},
		{pattern: "../wslink/*", refuse: gate.ReasonEscapes},
	}
	for _, c := range cases {
		for _, viaLink := range []bool{false, true} {
			t.Run(c.pattern+map[bool]string{false: " (real)", true: " (via link)"}[viaLink], func(t *testing.T) {
				w := f.Workspace(t, viaLink)
				p := strings.NewReplacer("{real}", f.Real, "{given}", f.Given).Replace(c.pattern)
				got, leftOut, _, err := gate.Glob(context.Background(), w, p, 200_000)
				if c.refuse != "" {
					require.Error(t, err)
					assert.Contains(t, err.Error(), c.refuse)
					assert.True(t, strings.HasPrefix(err.Error(), "refused: "), err.Error())
					return
				}
				require.NoError(t, err)
				var rels []string
				for _, m := range got {
					assertInside(t, f.Real, mustResolve(t, w, m))
					rels = append(rels, w.Rel(m))
				}
				assert.Equal(t, c.want, rels)
				assert.Equal(t, c.leftOut, leftOut, "matches left out")
			})
		}
	}
}

func mustResolve(t testing.TB, w gate.Workspace, p string) string {
	t.Helper()
	r, err := w.Resolve(p)
	require.NoError(t, err)
	return r
}

// FuzzGate holds the gate's one promise: whatever path or pattern the model
// sends, an allowed path (and every glob match) is inside the workspace and
// crosses no dangling symlink. Plain `go test` runs the seeds.
func FuzzGate(f *testing.F) {
	for _, s := range []string{
		"file.txt", ".", "..", "../ws/file.txt", "../wslink/file.txt", "link-out/secret.txt",
		"dangling-in", "sub/deep-dangling/a", "sub/up/../outside", "new/../link-out/x", "loop1",
		"/etc/passwd", "{real}/file.txt", "{given}/../wslink/file.txt", "sub/upup/other", "**/*.txt",
		"{..,sub}/*", "*/../../*", "link-in/../../outside", "climb-in", "abs-in", "./sub/./up/./file.txt",
		"sub//up//..//file.txt", "new/a/../../../outside", "escape.txt", "{file,escape}.txt", "link-in/*",
	} {
		f.Add(s)
	}
	fx := gatetest.New(f)
	wss := []gate.Workspace{fx.Workspace(f, false), fx.Workspace(f, true)}
	f.Fuzz(func(t *testing.T, s string) {
		s = strings.NewReplacer("{root}", fx.Root, "{real}", fx.Real, "{given}", fx.Given).Replace(s)
		for _, w := range wss {
			if got, err := w.Resolve(s); err == nil {
				assertInside(t, fx.Real, got)
			} else {
				var ref *gate.Refusal
				if !errors.As(err, &ref) {
					t.Fatalf("Resolve(%q) failed with %T, not a refusal: %v", s, err, err)
				}
			}
			if len(s) > 200 || strings.Count(s, "{") > 4 {
				continue // keep brace expansion and walks small
			}
			matches, _, _, err := gate.Glob(context.Background(), w, s, 200_000)
			if err != nil {
				continue
			}
			for _, m := range matches {
				r, err := w.Resolve(m)
				if err != nil {
					t.Fatalf("glob %q matched %q, which the gate refuses: %v", s, m, err)
				}
				assertInside(t, fx.Real, r)
			}
		}
	})
}
