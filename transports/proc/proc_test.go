package proc_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/proc/proctest"
)

const helperEnv = "CODESESSION_PROC_TEST_RUNTIME"

// TestMain lets this test binary play a runtime that gets SIGKILLed: with
// helperEnv set it starts a contained tree and waits to be killed.
func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		runtimeHelper(v)
		return
	}
	os.Exit(m.Run())
}

// runtimeHelper starts `sh` running a backgrounded sleep, a setsid'd sleep
// and a foreground sleep, all carrying marker in argv, prints the group,
// and blocks until killed.
func runtimeHelper(spec string) {
	marker, home, _ := strings.Cut(spec, ",")
	kit, err := proc.NewKit(filepath.Join(home, "procs"), "rt-helper")
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	g := kit.Group("sess-1")
	script := fmt.Sprintf("sleep %[1]s & setsid sleep %[1]s & sleep %[1]s; wait", marker)
	cmd := exec.Command("sh", "-c", script)
	h, err := g.Start(cmd, proc.Options{})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Printf("PGID %d CGROUP %s\n", h.Pgid, g.Cgroup())
	select {}
}

func marker() string { return strconv.Itoa(3_000_000 + rand.IntN(900_000)) }

// TestWatchdogKillsTheGroupWhenTheRuntimeIsKilled SIGKILLs a runtime with a
// contained tree and finds nothing of the tree alive once the watchdog has
// run: not by its process group, not by the marker in argv, and (where a
// cgroup v2 is writable) not the setsid child either.
func TestWatchdogKillsTheGroupWhenTheRuntimeIsKilled(t *testing.T) {
	m, home := marker(), t.TempDir()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+m+","+home)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the helper runtime printed nothing")
	var pgid int
	var cg string
	_, err = fmt.Sscanf(line, "PGID %d CGROUP %s", &pgid, &cg)
	if err != nil {
		_, err = fmt.Sscanf(line, "PGID %d CGROUP", &pgid)
	}
	require.NoError(t, err, "helper said %q", line)
	kit, err := proc.NewKit(filepath.Join(home, "procs"), "rt-sweeper")
	require.NoError(t, err)
	t.Cleanup(kit.Close) // the home's cgroup subtree, should the test stop before its sweep
	cgroups := kit.Cgroups()

	// the tree is up: three sleeps with the marker
	require.Eventually(t, func() bool { return len(proctest.WithMarker(m)) >= 3 }, time.Minute, 20*time.Millisecond,
		"the contained tree did not start")
	require.NotEmpty(t, proctest.InGroup(pgid))

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	// the watcher is a shell that must be scheduled to read EOF and kill:
	// on a loaded machine that can take seconds, so the wait is a minute,
	// which only stops a hang (5 s was a verdict on the machine's speed)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		left := proctest.WithMarker(m)
		if cgroups.Root == "" {
			left = filterGroup(left, pgid) // the setsid child escapes without a cgroup
		}
		if len(left) == 0 && len(proctest.InGroup(pgid)) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	assert.Empty(t, proctest.InGroup(pgid), "processes of the group outlived the runtime")
	if cgroups.Root != "" {
		assert.Empty(t, proctest.WithMarker(m), "processes with the marker outlived the runtime (cgroup %s)", cg)
	} else {
		t.Logf("no writable cgroup v2 (%s): the setsid child is outside this test's claim", cgroups.Reason)
		proctest.KillMarker(m)
	}

	// the boot sweep finds the record, sees the group is gone and cleans up
	rep, err := kit.Sweep(func(id string) bool { return id == "rt-sweeper" })
	require.NoError(t, err)
	assert.Empty(t, rep.Killed, "the watchdog already killed the group")
	ents, _ := os.ReadDir(filepath.Join(home, "procs"))
	assert.Empty(t, ents, "the sweep removes the records")
	if cg != "" {
		assert.NoDirExists(t, cg)
	}
}

func filterGroup(pids []int, pgid int) []int {
	var out []int
	for _, p := range pids {
		if proctest.Pgid(p) == pgid {
			out = append(out, p)
		}
	}
	return out
}

// TestReleaseLetsTheWatcherGo: a command that ends normally leaves no
// watcher, no record and no group behind, and its exit status is its own.
func TestReleaseLetsTheWatcherGo(t *testing.T) {
	home := t.TempDir()
	kit, err := proc.NewKit(filepath.Join(home, "procs"), "rt-release")
	require.NoError(t, err)
	defer kit.Close()
	g := kit.Group("s")
	defer g.Close()
	var out bytes.Buffer
	cmd := exec.Command("sh", "-c", "echo hi; exit 3")
	cmd.Stdout = &out
	h, err := g.Start(cmd, proc.Options{})
	require.NoError(t, err)
	ents, _ := os.ReadDir(filepath.Join(home, "procs"))
	assert.Len(t, ents, 1, "a live group is recorded")
	err = cmd.Wait()
	require.Error(t, err)
	assert.Equal(t, 3, cmd.ProcessState.ExitCode(), "the exit status is the command's, not the watchdog's")
	assert.Equal(t, "hi\n", out.String())
	h.Release()
	require.Eventually(t, func() bool { return len(proctest.InGroup(h.Pgid)) == 0 }, time.Minute, 10*time.Millisecond)
	ents, _ = os.ReadDir(filepath.Join(home, "procs"))
	assert.Empty(t, ents)
}

// TestSweepKillsARecordedGroupAndSparesAReusedPid: the boot sweep kills a
// live group of a dead runtime, and leaves alone a record whose pid now
// belongs to another process (another start time).
func TestSweepKillsARecordedGroupAndSparesAReusedPid(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "procs")
	kit, err := proc.NewKit(dir, "rt-dead")
	require.NoError(t, err)
	defer kit.Close()
	m := marker()
	cmd := exec.Command("sleep", m)
	h, err := kit.Group("s").Start(cmd, proc.Options{})
	require.NoError(t, err)
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() { h.Kill(true) })

	// a record for this test process with a wrong start time: a reused pid
	fake := proc.Record{Runtime: "rt-dead", Pgid: os.Getpid(), StartTime: 1, Argv: []string{"x"}}
	require.NoError(t, proctest.WriteRecord(filepath.Join(dir, "rt-dead.reused.json"), fake))
	// records of a live runtime are not touched
	live := proc.Record{Runtime: "rt-live", Pgid: h.Pgid, StartTime: 1, Argv: []string{"x"}}
	require.NoError(t, proctest.WriteRecord(filepath.Join(dir, "rt-live.1.json"), live))

	rep, err := proc.Sweep(dir, "", func(id string) bool { return id == "rt-live" })
	require.NoError(t, err)
	require.Len(t, rep.Killed, 1)
	assert.Equal(t, h.Pgid, rep.Killed[0].Pgid)
	assert.Contains(t, strings.Join(rep.Skipped, "\n"), "reused")
	require.Eventually(t, func() bool { return len(proctest.WithMarker(m)) == 0 }, time.Minute, 10*time.Millisecond)
	assert.FileExists(t, filepath.Join(dir, "rt-live.1.json"))
	assert.NoFileExists(t, filepath.Join(dir, "rt-dead.reused.json"))
}

// TestSweepRemovesADeadRuntimesTmp: a group started with its own TMPDIR
// by a runtime that died (no Release) leaves that TMPDIR; the boot sweep
// removes it with the group, and a record naming a folder Start did not
// make removes nothing.
func TestSweepRemovesADeadRuntimesTmp(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "procs")
	kit, err := proc.NewKit(dir, "rt-dead")
	require.NoError(t, err)
	defer kit.Close()
	m := marker()
	cmd := exec.Command("sh", "-c", `echo left > "$TMPDIR/scratch"; exec sleep `+m)
	h, err := kit.Group("s").Start(cmd, proc.Options{Confine: &proc.Confinement{OwnTmp: true}})
	require.NoError(t, err)
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() { h.Kill(true); h.Release() })
	tmp := h.TempDir()
	require.NotEmpty(t, tmp)
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(tmp, "scratch")); return err == nil },
		time.Minute, 10*time.Millisecond, "the command writes in its TMPDIR")

	// a record whose Tmp is a folder Start did not make
	keep := filepath.Join(home, "keep")
	require.NoError(t, os.Mkdir(keep, 0o700))
	forged := proc.Record{Runtime: "rt-dead", Pgid: os.Getpid(), StartTime: 1, Argv: []string{"x"}, Tmp: keep}
	require.NoError(t, proctest.WriteRecord(filepath.Join(dir, "rt-dead.forged.json"), forged))

	rep, err := proc.Sweep(dir, "", func(string) bool { return false })
	require.NoError(t, err)
	require.Len(t, rep.Killed, 1)
	assert.Equal(t, tmp, rep.Killed[0].Tmp, "the record names the TMPDIR")
	assert.NoDirExists(t, tmp, "the dead runtime's TMPDIR is gone")
	assert.DirExists(t, keep, "a folder Start did not make stays")
	require.Eventually(t, func() bool { return len(proctest.WithMarker(m)) == 0 }, time.Minute, 10*time.Millisecond)
}

// TestGroupTempDirIsRecordedAndSwept: a session's TMPDIR made by the group
// is recorded beside its processes; remove deletes both; a runtime that
// dies without removing it has it removed by the next Sweep, and a live
// runtime's is left alone.
func TestGroupTempDirIsRecordedAndSwept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "procs")
	kit, err := proc.NewKit(dir, "rt-a")
	require.NoError(t, err)
	defer kit.Close()
	records := func() int { ents, _ := os.ReadDir(dir); return len(ents) }

	tmp, remove, err := kit.Group("s1").TempDir()
	require.NoError(t, err)
	assert.DirExists(t, tmp)
	assert.Equal(t, 1, records(), "the TMPDIR is recorded")
	remove()
	assert.NoDirExists(t, tmp)
	assert.Equal(t, 0, records(), "remove takes its record too")

	left, _, err := kit.Group("s2").TempDir()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(left, "scratch"), []byte("x"), 0o600))
	rep, err := proc.Sweep(dir, "", func(id string) bool { return id == "rt-a" })
	require.NoError(t, err)
	assert.Empty(t, rep.Removed, "a live runtime's TMPDIR stays")
	assert.DirExists(t, left)

	rep, err = proc.Sweep(dir, "", func(string) bool { return false })
	require.NoError(t, err)
	assert.Equal(t, []string{left}, rep.Removed)
	assert.NoDirExists(t, left, "a dead runtime's TMPDIR is removed")
	assert.Equal(t, 0, records())
	assert.Empty(t, rep.Killed, "no process to kill")

	// without a kit the folder is made, unrecorded
	var none *proc.Group
	tmp, remove, err = none.TempDir()
	require.NoError(t, err)
	assert.DirExists(t, tmp)
	remove()
	assert.NoDirExists(t, tmp)
}

// TestSweepKeepsTheRecordOfAFolderItCouldNotRemove: when a dead runtime's
// TMPDIR cannot be removed (the disk refuses), its record stays and the
// next sweep removes both.
func TestSweepKeepsTheRecordOfAFolderItCouldNotRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "procs")
	kit, err := proc.NewKit(dir, "rt-gone")
	require.NoError(t, err)
	defer kit.Close()
	tmp, _, err := kit.Group("s").TempDir()
	require.NoError(t, err)
	dead := func(string) bool { return false }

	restore := proc.RefuseRemoval(errors.New("input/output error"))
	rep, err := proc.Sweep(dir, "", dead)
	restore()
	require.NoError(t, err)
	assert.Empty(t, rep.Removed)
	assert.Contains(t, strings.Join(rep.Skipped, "\n"), "input/output error")
	assert.DirExists(t, tmp)
	assert.Len(t, proctest.Tmps(t, dir), 1, "the record stays for the next sweep")

	rep, err = proc.Sweep(dir, "", dead)
	require.NoError(t, err)
	assert.Equal(t, []string{tmp}, rep.Removed)
	assert.NoDirExists(t, tmp)
	assert.Empty(t, proctest.Records(t, dir))

	// a killed group's own TMPDIR: the group is killed, its record stays
	// until its folder is gone
	m := marker()
	cmd := exec.Command("sleep", m)
	h, err := kit.Group("s2").Start(cmd, proc.Options{Confine: &proc.Confinement{OwnTmp: true}})
	require.NoError(t, err)
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() { h.Kill(true); h.Release() })
	restore = proc.RefuseRemoval(errors.New("input/output error"))
	rep, err = proc.Sweep(dir, "", dead)
	restore()
	require.NoError(t, err)
	require.Len(t, rep.Killed, 1)
	require.Eventually(t, func() bool { return len(proctest.WithMarker(m)) == 0 }, time.Minute, 10*time.Millisecond)
	assert.Len(t, proctest.Records(t, dir), 1, "the group's record stays while its TMPDIR does")
	rep, err = proc.Sweep(dir, "", dead)
	require.NoError(t, err)
	assert.Empty(t, rep.Killed, "nothing of the group is left to kill")
	assert.Equal(t, []string{h.TempDir()}, rep.Removed)
	assert.Empty(t, proctest.Records(t, dir))
}
