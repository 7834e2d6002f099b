package contain_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// TestListingCLIGetsAHomeOfItsOwn: a CLI that lists HOME (copilot, gemini,
// qwen) runs in a HOME of its own, under the daemon's home, holding links
// to its declared state and the user's git config and nothing else, so
// the user's credential folders are denied to it like to every backend
// (on the old code its reads were left open). Two sessions share it, so
// the warm pool, keyed by HOME, still matches.
func TestListingCLIGetsAHomeOfItsOwn(t *testing.T) {
	daemon, ws, user := t.TempDir(), t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(user, ".ssh"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(user, ".gitconfig"), []byte("[user]\n"), 0o600))
	lister := &stateful{listsHome: true}
	tr := contain.Wrap(lister, contain.Options{DaemonHome: daemon})
	_, err := tr.Open(context.Background(), transports.SessionSpec{Cwd: ws, Env: []string{"HOME=" + user}}, func(int, messages.Event) {})
	require.NoError(t, err)
	own := lister.opened.Home
	require.NotEqual(t, user, own)
	assert.True(t, strings.HasPrefix(own, filepath.Join(daemon, "homes")+"/"), own)
	assert.Equal(t, "HOME="+own, lister.opened.Env[len(lister.opened.Env)-1], "the last HOME wins in the process's environment")
	ents, err := os.ReadDir(own)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{".state", ".gitconfig"}, names, "only the CLI's state and the git config")
	link, err := os.Readlink(filepath.Join(own, ".state"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(user, ".state"), link)
	assert.DirExists(t, filepath.Join(user, ".state"))

	c := lister.opened.Confine
	assert.Contains(t, c.ReadDenied, filepath.Join(user, ".ssh"), "the user's credentials are denied")
	assert.Contains(t, c.WritableDirs, own)
	assert.Contains(t, c.WritableDirs, filepath.Join(own, ".state"), "its state, through the link (Landlock resolves it)")
	cont := tr.Descriptor().Containment
	assert.Contains(t, cont.Filesystem, "a HOME of its own")
	assert.NotContains(t, cont.Filesystem, "reads not restricted")

	again := &stateful{listsHome: true}
	_, err = contain.Wrap(again, contain.Options{DaemonHome: daemon}).Open(context.Background(),
		transports.SessionSpec{Cwd: t.TempDir(), Env: []string{"HOME=" + user}}, func(int, messages.Event) {})
	require.NoError(t, err)
	assert.Equal(t, own, again.opened.Home, "one per backend and user HOME: the warm pool still matches")
}

// starter is a process backend that, like codex (CODEX_HOME) and the ACP
// agents (their scratch folder), adds a writable folder at its start,
// starts its process and only then says it started.
type starter struct {
	fake
	added  string
	handle *proc.Handle
	cgroup string
	out    []byte
}

func (s *starter) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	spec.Confine = spec.Confine.WithWritable(s.added)
	// the process writes in the added folder: the rules hold it
	cmd := exec.Command("/bin/sh", "-c", "echo x > "+filepath.Join(s.added, "state")+" && echo ok")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var out strings.Builder
	cmd.Stdout = &out
	h, err := spec.Procs.Start(cmd, proc.Options{Confine: spec.Confine})
	if err != nil {
		return nil, err
	}
	s.handle, s.cgroup = h, spec.Procs.Cgroup()
	err = cmd.Wait()
	s.out = []byte(out.String())
	h.Release()
	if err != nil {
		return nil, err
	}
	sink(0, messages.Event{Type: messages.EvStarted})
	return s.fake.Open(ctx, spec, sink)
}

// TestRecordSaysWhatTheRulesWereBuiltFrom: the record's writable list is
// the one the started process's Landlock rules were built from, with the
// folder the backend added at its start, the process's private TMPDIR and
// the session's cgroup (the old record had only the runtime's own list,
// so the added folder was missing).
func TestRecordSaysWhatTheRulesWereBuiltFrom(t *testing.T) {
	if proc.LandlockABI() < 1 {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Landlock on this kernel: CI must run the confinement tests")
		}
		t.Skip("no Landlock on this kernel")
	}
	kit, err := proc.NewKit(t.TempDir(), "rt-record")
	require.NoError(t, err)
	t.Cleanup(kit.Close)
	b := &starter{added: t.TempDir()}
	var got []messages.Event
	ws := t.TempDir()
	_, err = contain.Wrap(b, contain.Options{Kit: kit}).Open(context.Background(),
		transports.SessionSpec{SessionID: "cs_record", Cwd: ws, Home: t.TempDir()}, func(_ int, ev messages.Event) { got = append(got, ev) })
	require.NoError(t, err)
	require.Equal(t, "ok\n", string(b.out), "the added folder is writable")
	require.Len(t, got, 1)
	a := got[0].Containment
	require.NotNil(t, a)
	assert.Equal(t, b.handle.Writable, a.Writable, "exactly the list the rules were built from")
	assert.Contains(t, a.Writable, b.added, "the folder the backend added at its start")
	assert.Contains(t, a.Writable, ws)
	assert.Contains(t, a.Writable, "/dev/null")
	var tmp bool
	for _, w := range a.Writable {
		tmp = tmp || strings.Contains(filepath.Base(w), "codesession-tmp-")
	}
	assert.True(t, tmp, "the process's private TMPDIR: %v", a.Writable)
	if b.cgroup != "" {
		assert.Contains(t, a.Writable, b.cgroup, "the session's cgroup (the watcher writes cgroup.kill)")
	}
}

// TestLoopbackSession: network loopback asks proc for a namespace of the
// session's own relaying the model endpoint on the host's loopback and
// networkPorts; a remote model endpoint is named unreachable on the record;
// and the record says whether the namespace holds here or what it fell
// back to (before, loopback was model-only, said so, and relayed nothing).
func TestLoopbackSession(t *testing.T) {
	b := &stateful{}
	tr := contain.Wrap(b, contain.Options{NetworkPorts: []uint16{9999}, Environ: func() []string { return nil }})
	var got []messages.Event
	_, err := tr.Open(context.Background(), transports.SessionSpec{Cwd: t.TempDir(), Home: t.TempDir(), Network: messages.NetworkLoopback,
		Env: []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:4242", "OPENAI_BASE_URL=https://api.example.com/v1"}},
		func(_ int, ev messages.Event) { got = append(got, ev) })
	require.NoError(t, err)
	n := b.opened.Confine.Network
	require.NotNil(t, n)
	assert.True(t, n.LoopbackOnly)
	assert.Equal(t, []string{"127.0.0.1:4242", "127.0.0.1:9999"}, n.Forward, "the loopback model endpoint and networkPorts")
	assert.Equal(t, []uint16{443, 4242, 9999}, n.ConnectTCP)

	b.sink(0, messages.Event{Type: messages.EvStarted})
	a := got[0].Containment
	require.NotNil(t, a)
	if proc.LandlockABI() < proc.NetABI {
		return // the mode does not hold at all, as TestSessionNetworkAndDaemonHome checks
	}
	best := strings.Join(a.BestEffort, "\n")
	if ok, why := proc.LoopbackHolds(); ok {
		assert.Equal(t, n.Forward, a.Relayed)
		assert.Contains(t, best, "api.example.com:443 is not on the host's loopback")
		assert.NotContains(t, best, "UDP")
		assert.Contains(t, tr.Descriptor().Containment.Network, "a network namespace of its own")
	} else {
		assert.Empty(t, a.Relayed)
		assert.Contains(t, best, "loopback fell back to model-only")
		assert.Contains(t, best, why)
	}
}
