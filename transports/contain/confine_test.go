package contain_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/contain"
	"github.com/codesession/codesession/transports/proc"
)

// stateful is a process backend that declares a state folder and keeps
// the spec it was opened with.
type stateful struct {
	fake
	listsHome bool
	opened    transports.SessionSpec
}

func (s *stateful) Descriptor() transports.Descriptor {
	return transports.Descriptor{ID: "stateful", Containment: &messages.Containment{StateDirs: []string{"~/.state"}, ListsHome: s.listsHome}}
}

func (s *stateful) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	s.opened = spec
	return s.fake.Open(ctx, spec, sink)
}

// TestSessionConfinement: every session of a process backend is opened
// with the runtime's confinement (workspace, own HOME, the declared state
// folder made in it, a private TMPDIR per process, the credential
// folders of both HOMEs denied) and the descriptor reports it.
func TestSessionConfinement(t *testing.T) {
	b := &stateful{}
	tr := contain.Wrap(b, contain.Options{ReadDenied: []string{"/daemon/token"}})
	ws, home := t.TempDir(), t.TempDir()
	_, err := tr.Open(context.Background(), transports.SessionSpec{Cwd: ws, Home: home}, func(int, messages.Event) {})
	require.NoError(t, err)
	c := b.opened.Confine
	require.NotNil(t, c, "a process backend's session is confined")
	assert.True(t, c.OwnTmp)
	assert.Equal(t, []string{ws, home, filepath.Join(home, ".state")}, c.WritableDirs)
	assert.DirExists(t, filepath.Join(home, ".state"), "made before the start: Landlock rules hold on what exists")
	assert.Contains(t, c.ReadDenied, filepath.Join(home, ".ssh"))
	assert.Contains(t, c.ReadDenied, "/daemon/token")
	if d, _ := os.UserHomeDir(); d != "" {
		assert.Contains(t, c.ReadDenied, filepath.Join(d, ".ssh"), "the daemon user's credentials too")
	}
	cont := tr.Descriptor().Containment
	assert.Equal(t, []string{"~/.state"}, cont.StateDirs)
	assert.NotEmpty(t, cont.Filesystem)
	assert.Contains(t, cont.Network, "open by default")
	assert.Nil(t, c.Network, "network open by default")

	lister := &stateful{listsHome: true}
	_, err = contain.Wrap(lister, contain.Options{}).Open(context.Background(), transports.SessionSpec{Cwd: ws, Home: home}, func(int, messages.Event) {})
	require.NoError(t, err)
	assert.Empty(t, lister.opened.Confine.ReadDenied, "a CLI that lists HOME keeps its reads")

	off := &stateful{}
	_, err = contain.Wrap(off, contain.Options{Unconfined: true}).Open(context.Background(), transports.SessionSpec{Cwd: ws}, func(int, messages.Event) {})
	require.NoError(t, err)
	assert.Nil(t, off.opened.Confine)
}

// A session in a linked worktree, or in a subdirectory of a repository, can
// still run its own git: the repository's git directories outside the
// working directory are writable, and nothing more.
func TestConfinementLetsTheAgentsGitWrite(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed")
		}
		t.Skip("git is not installed")
	}
	repo := t.TempDir()
	git := func(dir string, args ...string) {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	git(repo, "init", "-q")
	git(repo, "commit", "-q", "--allow-empty", "-m", "first")
	wt := filepath.Join(t.TempDir(), "wt")
	git(repo, "worktree", "add", "-q", wt)
	sub := filepath.Join(repo, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))

	open := func(cwd string) []string {
		b := &stateful{}
		_, err := contain.Wrap(b, contain.Options{}).Open(context.Background(), transports.SessionSpec{Cwd: cwd, Home: t.TempDir()}, func(int, messages.Event) {})
		require.NoError(t, err)
		return b.opened.Confine.WritableDirs
	}
	assert.Contains(t, open(sub), filepath.Join(repo, ".git"), "a subdirectory's repository")
	w := open(wt)
	assert.Contains(t, w, filepath.Join(repo, ".git"), "the worktree's common directory")
	assert.Contains(t, w, filepath.Join(repo, ".git", "worktrees", "wt"), "the worktree's own git directory")
	assert.NotContains(t, open(repo), filepath.Join(repo, ".git"), "inside the working directory already")
	plain := t.TempDir()
	for _, d := range open(plain) {
		assert.NotEqual(t, ".git", filepath.Base(d), "no repository, no git directory")
	}
}

// A HOME set in the session's environment (config env, --env) is the HOME
// the process sees: its state folders and the HOME itself are writable
// there, and its credentials are denied there.
func TestConfinementFollowsAHomeFromTheEnvironment(t *testing.T) {
	b := &stateful{}
	ws, home := t.TempDir(), t.TempDir()
	_, err := contain.Wrap(b, contain.Options{}).Open(context.Background(),
		transports.SessionSpec{Cwd: ws, Env: []string{"HOME=/elsewhere", "HOME=" + home}}, func(int, messages.Event) {})
	require.NoError(t, err)
	c := b.opened.Confine
	assert.Contains(t, c.WritableDirs, home)
	assert.Contains(t, c.WritableDirs, filepath.Join(home, ".state"))
	assert.DirExists(t, filepath.Join(home, ".state"))
	assert.Contains(t, c.ReadDenied, filepath.Join(home, ".ssh"))
}

// TestSessionNetworkAndDaemonHome: a model-only session may connect only
// to its model endpoint's port and the configured ports (and its
// processes' environment says so, which keeps warm pools apart); the
// daemon's home is denied but for the session's provision folder; the
// backend's first started event carries what applied, for the record.
func TestSessionNetworkAndDaemonHome(t *testing.T) {
	b := &stateful{}
	daemon := t.TempDir()
	prov := filepath.Join(daemon, "sessions", "cs_x", "provision")
	tr := contain.Wrap(b, contain.Options{DaemonHome: daemon, NetworkPorts: []uint16{9999},
		Environ: func() []string { return []string{"PATH=/bin"} }})
	ws, home := t.TempDir(), t.TempDir()
	var got []messages.Event
	_, err := tr.Open(context.Background(), transports.SessionSpec{Cwd: ws, Home: home, Network: messages.NetworkModelOnly,
		Env: []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:4242", "OTHER_URL=http://127.0.0.1:1"}, Provision: &transports.Provision{Dir: prov}},
		func(_ int, ev messages.Event) { got = append(got, ev) })
	require.NoError(t, err)
	c := b.opened.Confine
	require.NotNil(t, c.Network)
	assert.Equal(t, []uint16{4242, 9999}, c.Network.ConnectTCP, "the model port and the configured ones, nothing else")
	assert.Empty(t, c.Network.BindTCP, "no listening")
	assert.Contains(t, c.ReadDenied, daemon)
	assert.Equal(t, []string{prov}, c.ReadableDirs)
	assert.Contains(t, b.opened.Env, contain.EnvNetwork+"=model-only:[4242 9999]")

	b.sink(0, messages.Event{Type: messages.EvStarted})
	b.sink(0, messages.Event{Type: messages.EvStarted})
	require.Len(t, got, 2)
	a := got[0].Containment
	require.NotNil(t, a, "the first started event says what applied")
	assert.Nil(t, got[1].Containment, "once")
	assert.Equal(t, messages.NetworkModelOnly, a.Network)
	assert.Contains(t, a.ReadDenied, daemon)
	assert.Contains(t, a.Writable, ws)
	if proc.LandlockABI() >= proc.NetABI {
		assert.Equal(t, []uint16{4242, 9999}, a.ConnectTCP)
	} else {
		assert.Empty(t, a.ConnectTCP)
		assert.NotEmpty(t, a.BestEffort, "a kernel without TCP rules says the mode does not hold")
	}

	// loopback is enforced per port too, and the record says so; with no
	// *_BASE_URL the CLIs' https default is the model port
	lb := &stateful{}
	_, err = contain.Wrap(lb, contain.Options{Environ: func() []string { return nil }}).Open(context.Background(),
		transports.SessionSpec{Cwd: ws, Home: home, Network: messages.NetworkLoopback}, func(int, messages.Event) {})
	require.NoError(t, err)
	assert.Equal(t, []uint16{443}, lb.opened.Confine.Network.ConnectTCP)
}
