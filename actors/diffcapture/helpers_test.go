package diffcapture

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// TestMain keeps every git the tests run away from the user's
// configuration: HOME is a temporary directory and system config is off.
// The captures' scratch folders go under a TMPDIR of the package's own,
// removed at the end: many tests drop a capture without Close, and its
// folder would otherwise wait for a collection that a test binary's exit
// never runs.
func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "diffcapture-tmp-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("TMPDIR", tmp)
	home, err := os.MkdirTemp("", "diffcapture-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("HOME", home)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Unsetenv("XDG_CONFIG_HOME")
	os.Unsetenv("GIT_CONFIG_GLOBAL")
	code := m.Run()
	os.RemoveAll(home)
	if benchRepo.dir != "" {
		os.RemoveAll(benchRepo.dir)
	}
	os.RemoveAll(tmp)
	os.Exit(code)
}

func requireGit(tb testing.TB) {
	tb.Helper()
	subprocesstest.Git(tb)
}

// testRepo is a real temporary git repository.
type testRepo struct {
	tb  testing.TB
	dir string
}

// newRepo makes an empty repository (HEAD unborn) with its own identity.
func newRepo(tb testing.TB) *testRepo {
	tb.Helper()
	requireGit(tb)
	r := &testRepo{tb: tb, dir: tb.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.git("config", "user.name", "Diff Test")
	r.git("config", "user.email", "diff@test.invalid")
	r.git("config", "commit.gpgsign", "false")
	r.git("config", "core.autocrlf", "false")
	return r
}

// git runs a setup command (the tests' git, not the capture's).
func (r *testRepo) git(args ...string) string {
	r.tb.Helper()
	out, err := r.gitErr(args...)
	require.NoError(r.tb, err, "git %v: %s", args, out)
	return out
}

func (r *testRepo) gitErr(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (r *testRepo) path(p string) string { return filepath.Join(r.dir, filepath.FromSlash(p)) }

func (r *testRepo) write(p, content string) {
	r.tb.Helper()
	full := r.path(p)
	require.NoError(r.tb, os.MkdirAll(filepath.Dir(full), 0o755))
	require.NoError(r.tb, os.WriteFile(full, []byte(content), 0o644))
}

func (r *testRepo) remove(p string) {
	r.tb.Helper()
	require.NoError(r.tb, os.RemoveAll(r.path(p)))
}

func (r *testRepo) commitAll(msg string) {
	r.tb.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "--no-verify", "-m", msg)
}

// lines returns n numbered lines.
func lines(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s %d\n", prefix, i)
	}
	return b.String()
}

// generate commits n small files in directories of 100 (on top of HEAD,
// if any) and checks them out: fast-import writes one pack, so a
// 10,000-file repository takes about a second.
func (r *testRepo) generate(n int) {
	r.tb.Helper()
	var stream bytes.Buffer
	stream.WriteString("commit refs/heads/main\ncommitter Diff Test <diff@test.invalid> 0 +0000\ndata 9\ngenerated\n")
	if _, err := r.gitErr("rev-parse", "-q", "--verify", "HEAD"); err == nil {
		stream.WriteString("from main^0\n")
	}
	for i := range n {
		content := genContent(i)
		fmt.Fprintf(&stream, "M 100644 inline %s\ndata %d\n%s\n", genPath(i), len(content), content)
	}
	stream.WriteString("\n")
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
	cmd.Stdin = &stream
	out, err := cmd.CombinedOutput()
	require.NoError(r.tb, err, "fast-import: %s", out)
	r.git("reset", "-q", "--hard", "main")
}

func genPath(i int) string { return fmt.Sprintf("pkg%03d/f%04d.go", i/100, i) }

func genContent(i int) string {
	return fmt.Sprintf("package p%d\n\n// file %d\nfunc F%d() int { return %d }\n", i/100, i, i, i)
}

func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	return ctx
}
