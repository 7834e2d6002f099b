package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// tunRelay is the lab's cluster network when it needs delay and loss: a
// tunrelay process (internal/tunrelay: the kernel here has no netem)
// between the nodes' TUN devices. It runs apart from the test's process:
// inside it, a loaded test process delayed the network itself.
type tunRelay struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	// stats is what the relay reported when it stopped.
	stats relayStats
}

// relayStats is tunrelay's Stats.
type relayStats struct {
	Relayed   int64   `json:"relayed"`
	Dropped   int64   `json:"dropped"`
	Overflow  int64   `json:"overflow"`
	MaxLateMs float64 `json:"maxLateMs"`
	Late      int64   `json:"late"`
}

// openTUN creates a TUN device named name in this process's namespace and
// returns its file (non-blocking: the relay reads it through its poller).
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// buildRelay builds the tunrelay helper into dir.
func buildRelay(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "tunrelay")
	out, err := exec.Command("go", "build", "-o", bin, "./internal/tunrelay").CombinedOutput()
	require.NoError(t, err, "go build tunrelay: %s", out)
	return bin
}

// startRelay runs the relay over the TUN files (node i+1's is tuns[i]);
// they are the relay's from then on, and closed here.
func startRelay(t *testing.T, bin string, tuns []*os.File, delay time.Duration, loss float64) *tunRelay {
	t.Helper()
	cmd := exec.Command(bin, "-nodes", strconv.Itoa(len(tuns)), "-delay", delay.String(), "-loss", strconv.FormatFloat(loss, 'f', -1, 64))
	cmd.ExtraFiles = tuns
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	for _, f := range tuns {
		_ = f.Close()
	}
	r := &tunRelay{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	line, err := r.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("tunrelay did not start: %q %v", line, err)
	}
	return r
}

// stop ends the relay (its stdin closes) and reads its counts.
func (r *tunRelay) stop() {
	if r.cmd.ProcessState != nil {
		return
	}
	_ = r.stdin.Close()
	done := make(chan struct{})
	go func() {
		if line, err := r.out.ReadString('\n'); err == nil {
			_ = json.Unmarshal([]byte(line), &r.stats)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // only stops a hang
		_ = r.cmd.Process.Kill()
	}
	_ = r.cmd.Wait()
}

// newRelayLab is newNetnsLab whose cluster network is a tunrelay process
// with the given delay and loss instead of a bridge.
func newRelayLab(t *testing.T, n int, delay time.Duration, loss float64) (*netnsLab, *tunRelay) {
	l := newLab(t)
	bin := buildRelay(t, t.TempDir())
	var tuns []*os.File
	for i := 1; i <= n; i++ {
		ns := l.addNode(i)
		name := fmt.Sprintf("t%d%s", i, l.tag)
		f, err := openTUN(name)
		require.NoError(t, err)
		tuns = append(tuns, f)
		// the device moves into the node's namespace; the file still
		// reads and writes it
		l.ip("link", "set", name, "netns", ns)
		l.ip("-n", ns, "addr", "add", fmt.Sprintf("10.77.0.%d/24", i), "dev", name)
		l.ip("-n", ns, "link", "set", name, "up")
	}
	r := startRelay(t, bin, tuns, delay, loss)
	t.Cleanup(r.stop) // runs before the namespaces go (cleanups run last first)
	return l, r
}
