package actors

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/driver"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/learning/loop"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/script"
)

// The driver's kill: a child process (this test binary, re-executed) runs
// a delegation whose driven session is mid-turn, says so, and is SIGKILLed
// with its whole process group; the next start on its home releases the
// driven session (released{sweep}, a reason naming the delegation) rather
// than leaving it orphaned, and marks the delegation killed.

const driverKillHomeEnv = "CODESESSION_DRIVER_KILL_HOME"

// TestDriverKillChild is the child's side; it runs only when re-executed.
func TestDriverKillChild(t *testing.T) {
	home := os.Getenv(driverKillHomeEnv)
	if home == "" {
		t.Skip("the driver kill test's child process")
	}
	// the driven session's turn outlasts the child: it is mid-turn when killed
	turns := &script.Scenario{Turns: []script.Turn{{Steps: []script.Step{script.Delay(10 * time.Minute), script.Text("never")}}}}
	f := newDriverFixture(t, driverScenario(map[string]any{"backend": "script"}), turns, func(c *config.Config) { c.Home = home })
	rec := f.delegate(t, driver.Request{Brief: "DRIVE the scripted agent", Overrides: driver.Overrides{Backend: "script"}})
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		cur, err := f.rt.Delegation(rec.ID)
		require.NoError(t, err)
		if len(cur.Sessions) > 0 {
			m, err := f.rt.Store().GetMeta(context.Background(), cur.Sessions[0])
			if err == nil && m.Status.Live() {
				fmt.Fprintf(os.Stdout, "driving %s %s\n", rec.ID, cur.Sessions[0])
				time.Sleep(5 * time.Minute) // the parent kills it long before
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the driver never started its session")
}

// killADriver runs a delegation in a child process, SIGKILLs the child's
// whole process group mid-turn and returns the home it left, its
// delegation and its driven session.
func killADriver(t *testing.T) (home, dl, sid string) {
	t.Helper()
	home = t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDriverKillChild$", "-test.count=1")
	// the child's own temporary directories go under ours: killed, it
	// never removes them, and ours are removed when this test ends
	cmd.Env = append(os.Environ(), driverKillHomeEnv+"="+home, "TMPDIR="+t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the kill takes the whole process
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr lockedWriter
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	hang := time.AfterFunc(5*time.Minute, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer hang.Stop()

	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "driving" {
			dl, sid = f[1], f[2]
			break
		}
	}
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL))
	_ = cmd.Wait()
	if sid == "" {
		var out strings.Builder
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
		}
		t.Fatalf("the child never drove a session; its output:\n%s\nstderr:\n%s", out.String(), stderr.String())
	}
	requireLeasesFree(t, home)
	return home, dl, sid
}

func TestKilledDriversSessionsAreReleasedAtTheNextStart(t *testing.T) {
	home, dl, sid := killADriver(t)
	cfg := testConfig(t)
	cfg.Home = home
	rt := newRuntime(t, cfg, &script.Scenario{})
	rec, err := rt.Store().GetMeta(context.Background(), sid)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusEnded, rec.Status, "released, not orphaned")
	assert.Equal(t, messages.OutcomeAborted, rec.Outcome)
	last := lastReleased(t, rt, sid)
	assert.Equal(t, messages.ReleaseSweep, last.ReleaseReason)
	assert.Contains(t, last.Text, "its driver (delegation "+dl+") died with its process")
	evs, err := rt.Store().ReadEvents(context.Background(), sid, 0, 0)
	require.NoError(t, err)
	for i, ev := range evs {
		assert.Equal(t, uint64(i+1), ev.Seq, "the log stays gapless")
		assert.NotEqual(t, messages.EvOrphaned, ev.Event.Type)
	}
	d, err := rt.Delegation(dl)
	require.NoError(t, err)
	assert.Equal(t, driver.StateKilled, d.State)
	assert.Equal(t, []string{sid}, d.Sessions)

	requireSweptOutcome(t, rt.Learning(), sid)
}

// An embedder that brings its own learning loop (WithLearning) gets the
// swept session's outcome too: the sweep hands its releases to whichever
// loop the runtime runs, not only to the reconcile of a loop it opened.
func TestKilledDriversSessionsGetAnOutcomeWithAnEmbeddersLoop(t *testing.T) {
	home, _, sid := killADriver(t)
	cfg := testConfig(t)
	cfg.Home = home
	st, err := filestore.Open(home)
	require.NoError(t, err)
	lp, err := loop.Open(home, cfg.Learning, st, loop.Options{})
	require.NoError(t, err)
	rt := newRuntime(t, cfg, &script.Scenario{}, WithStore(st), WithLearning(lp))
	requireSweptOutcome(t, rt.Learning(), sid)
}

// requireSweptOutcome waits for exactly one outcome record, the swept
// session's: the sweep's abort (its driver died before any verdict).
func requireSweptOutcome(t *testing.T, l *loop.Loop, sid string) {
	t.Helper()
	require.NotNil(t, l)
	log := l.Outcomes()
	require.Eventually(t, func() bool {
		if log.Refresh() != nil {
			return false
		}
		outs, _ := log.All()
		return len(outs) > 0
	}, time.Minute, 20*time.Millisecond, "the swept session's outcome is recorded")
	l.Close() // any second (duplicate) record would be written by now
	require.NoError(t, log.Refresh())
	outs, _ := log.All()
	require.Len(t, outs, 1, "one outcome per driven session")
	assert.Equal(t, sid, outs[0].SessionID)
	assert.Equal(t, messages.OutcomeAborted, outs[0].Outcome)
	assert.Equal(t, messages.ReleaseSweep, outs[0].ReleaseReason)
}
