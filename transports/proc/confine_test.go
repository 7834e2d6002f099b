package proc_test

import (
	"context"
	"fmt"
	"net"
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
	// the grandchild left the group: wait for its marker (the minute only
	// stops a hang; the marker is asserted below)
	deadline := time.Now().Add(time.Minute)
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

// listenTCP accepts on a loopback port until the test ends.
func listenTCP(t *testing.T) (net.Listener, uint16) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return ln, uint16(ln.Addr().(*net.TCPAddr).Port)
}

// TestConfineNetwork: with network rules (Landlock ABI 4) the tree
// connects to an allowed loopback port and not to another one, and binds
// no port it was not given, over plain or multipath TCP (which Landlock
// does not see: seccomp refuses it), while the daemon connects anywhere.
// Without the seccomp filter the multipath bind and dial succeed.
func TestConfineNetwork(t *testing.T) {
	needLandlock(t)
	if proc.LandlockABI() < proc.NetABI {
		t.Skipf("Landlock ABI %d has no TCP rules", proc.LandlockABI())
	}
	_, allowed := listenTCP(t)
	_, denied := listenTCP(t)
	helper := func(what string) string {
		return fmt.Sprintf("PROC_TEST_NET=%s %q -test.run=TestHelperNet >/dev/null 2>&1 && echo %s-OK\n", what, os.Args[0], what)
	}
	script := fmt.Sprintf("echo > /dev/tcp/127.0.0.1/%d && echo ALLOWED-OK\necho > /dev/tcp/127.0.0.1/%d && echo DENIED-OK\n", allowed, denied) +
		helper("listen-tcp") + helper("listen-mptcp") + helper(fmt.Sprintf("dial-mptcp:%d", denied)) +
		helper(fmt.Sprintf("dial-tcp:%d", allowed)) + "true"
	cmd := exec.Command("bash", "-c", script)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	h, err := (*proc.Group)(nil).Start(cmd, proc.Options{Confine: &proc.Confinement{
		WritableDirs: []string{t.TempDir()}, Network: &proc.NetRules{ConnectTCP: []uint16{allowed}}}})
	require.NoError(t, err)
	_ = cmd.Wait()
	h.Release()
	o := out.String()
	assert.Contains(t, o, "ALLOWED-OK", "the allowed port is reachable")
	assert.Contains(t, o, fmt.Sprintf("dial-tcp:%d-OK", allowed), "from Go too")
	assert.NotContains(t, o, "DENIED-OK", "a port not allowed is not")
	assert.NotContains(t, o, "listen-tcp-OK", "no bind without a rule")
	assert.NotContains(t, o, "listen-mptcp-OK", "no multipath bind either")
	assert.NotContains(t, o, "dial-mptcp", "no multipath connect to a port not allowed")
	assert.Contains(t, h.Confined, fmt.Sprintf("TCP connect only to ports [%d]", allowed))
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", denied))
	require.NoError(t, err, "the daemon itself is never confined")
	_ = c.Close()

	// the same command unconfined reaches both and binds (the checks can fail)
	b, _ := exec.Command("bash", "-c", script).CombinedOutput()
	assert.Contains(t, string(b), "DENIED-OK")
	assert.Contains(t, string(b), "listen-tcp-OK")
	assert.Contains(t, string(b), "listen-mptcp-OK")
	assert.Contains(t, string(b), fmt.Sprintf("dial-mptcp:%d-OK", denied))
}

// TestHelperNet is TestConfineNetwork's child: it binds or dials a TCP
// port, plain or multipath, as PROC_TEST_NET says, and fails when it
// cannot (a kernel without multipath TCP falls back to plain TCP).
func TestHelperNet(t *testing.T) {
	what := os.Getenv("PROC_TEST_NET")
	if what == "" {
		t.Skip("a helper of TestConfineNetwork")
	}
	ctx := context.Background()
	kind, port, _ := strings.Cut(what, ":")
	var err error
	switch kind {
	case "listen-tcp", "listen-mptcp":
		var lc net.ListenConfig
		lc.SetMultipathTCP(kind == "listen-mptcp")
		var ln net.Listener
		if ln, err = lc.Listen(ctx, "tcp", "127.0.0.1:0"); err == nil {
			_ = ln.Close()
		}
	case "dial-tcp", "dial-mptcp":
		var d net.Dialer
		d.SetMultipathTCP(kind == "dial-mptcp")
		var c net.Conn
		if c, err = d.DialContext(ctx, "tcp", "127.0.0.1:"+port); err == nil {
			_ = c.Close()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestConfineReadableUnderDenied: a folder under a denied one stays
// readable when named in ReadableDirs (a session's provision folder under
// the daemon's home), while the rest of the denied folder (its token, the
// store, other sessions) stays unreadable.
func TestConfineReadableUnderDenied(t *testing.T) {
	needLandlock(t)
	daemon, ws := t.TempDir(), t.TempDir()
	mine := filepath.Join(daemon, "sessions", "cs_mine", "provision")
	other := filepath.Join(daemon, "sessions", "cs_other", "provision")
	for _, d := range []string{mine, other} {
		require.NoError(t, os.MkdirAll(d, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(d, "mcp.json"), []byte("PLAN-"+filepath.Base(filepath.Dir(d))), 0o600))
	}
	require.NoError(t, os.WriteFile(filepath.Join(daemon, "token"), []byte("DAEMON-TOKEN"), 0o600))
	cmd := exec.Command("sh", "-c", "cat "+filepath.Join(mine, "mcp.json")+"; cat "+filepath.Join(other, "mcp.json")+
		"; cat "+filepath.Join(daemon, "token")+"; ls "+daemon+" && echo LISTED")
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	h, err := (*proc.Group)(nil).Start(cmd, proc.Options{Confine: &proc.Confinement{
		WritableDirs: []string{ws}, ReadDenied: []string{daemon}, ReadableDirs: []string{mine}}})
	require.NoError(t, err)
	_ = cmd.Wait()
	h.Release()
	o := out.String()
	assert.Contains(t, o, "PLAN-cs_mine", "the session's own folder is readable")
	assert.NotContains(t, o, "PLAN-cs_other", "another session's is not")
	assert.NotContains(t, o, "DAEMON-TOKEN", "nor the token")
	assert.NotContains(t, o, "LISTED", "nor a listing of the daemon's home")
}

// serveLine accepts on addr until the test ends, writing line to each
// connection.
func serveLine(t *testing.T, addr, line string) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(line + "\n"))
			_ = c.Close()
		}
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// TestConfineLoopbackOnly: with LoopbackOnly the tree reaches the model
// endpoint on the host's loopback (through the relay) and nothing else,
// not even another host address on the same, allowed, port; under the
// port rules alone (model-only) that other address is reachable, which is
// the difference loopback makes.
func TestConfineLoopbackOnly(t *testing.T) {
	needLandlock(t)
	if ok, why := proc.LoopbackHolds(); !ok {
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	port := serveLine(t, "127.0.0.1:0", "MODEL-REACHED")
	serveLine(t, fmt.Sprintf("127.0.0.2:%d", port), "OTHER-REACHED")
	script := fmt.Sprintf("cat < /dev/tcp/127.0.0.1/%d; cat < /dev/tcp/127.0.0.2/%d; true", port, port)
	start := func(loopback bool) (string, *proc.Handle) {
		cmd := exec.Command("bash", "-c", script)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		rules := &proc.NetRules{ConnectTCP: []uint16{port}}
		if loopback {
			rules.LoopbackOnly, rules.Forward = true, []string{fmt.Sprintf("127.0.0.1:%d", port)}
		}
		h, err := (*proc.Group)(nil).Start(cmd, proc.Options{Confine: &proc.Confinement{WritableDirs: []string{t.TempDir()}, Network: rules}})
		require.NoError(t, err)
		_ = cmd.Wait()
		h.Release()
		return out.String(), h
	}
	o, h := start(true)
	assert.Contains(t, o, "MODEL-REACHED", "the model endpoint, relayed")
	assert.NotContains(t, o, "OTHER-REACHED", "no other address, even on the allowed port")
	assert.Contains(t, h.Confined, "a network namespace with only loopback")
	if proc.LandlockABI() >= proc.NetABI {
		o, _ = start(false)
		assert.Contains(t, o, "MODEL-REACHED")
		assert.Contains(t, o, "OTHER-REACHED", "the port rules alone are per port, not per address")
	}
}
