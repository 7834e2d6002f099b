package actors

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// The crash suite: a child process (this test binary, re-executed) drives
// sessions on a file store and prints every acknowledgement it gets (an
// event the live seam saw, a read-turn result, a stop's answer). The parent
// SIGKILLs it at a random point, opens the home again (WAL replay, boot
// sweep) and checks that everything acknowledged is in the store, every
// log is gapless with no seq reused, and every record is orphaned or final.
// With faults on, the child's store refuses writes (ENOSPC) in bursts.

const (
	crashHomeEnv   = "CODESESSION_CRASH_HOME"
	crashFaultsEnv = "CODESESSION_CRASH_FAULTS"
)

func crashConfig(home string) config.Config {
	cfg := config.Default()
	cfg.Home = home
	cfg.DefaultBackend = "script"
	cfg.Supervision.ShutdownTimeout = config.Duration(2 * time.Second)
	return cfg
}

func crashScenario(events int) *script.Scenario {
	steps := make([]script.Step, events)
	for i := range steps {
		steps[i] = script.Text(fmt.Sprintf("e%d", i))
	}
	return &script.Scenario{Fallback: &script.Turn{Steps: steps}}
}

// TestCrashChild is the child's side; it runs only when re-executed.
func TestCrashChild(t *testing.T) {
	home := os.Getenv(crashHomeEnv)
	if home == "" {
		t.Skip("the crash suite's child process")
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...) // unbuffered: printed means acknowledged
	}
	fs, err := filestore.Open(home)
	require.NoError(t, err)
	var st store.Store = fs
	faulty := store.NewFaulty(fs)
	if os.Getenv(crashFaultsEnv) != "" {
		st = faulty
		go func() {
			for {
				time.Sleep(time.Duration(100+rand.IntN(200)) * time.Millisecond)
				faulty.NoSpace(2 + rand.IntN(4))
				// and the disk has room again: a burst no write used up
				// ends by itself. Re-armed without an end, a lone session's
				// retries (seconds apart once backed off) each met a fresh
				// burst, for ever: its writes never landed.
				time.Sleep(50 * time.Millisecond)
				faulty.NoSpace(0)
			}
		}()
	}
	rt, err := New(crashConfig(home), WithStore(st), WithPersistLimits(0, 1<<30),
		WithBackends(transports.NewRegistry(script.New(script.WithScenario(crashScenario(30))))),
		WithEventListener(func(sid string, ev messages.PersistedEvent) { say("ev %s %d", sid, ev.Seq) }))
	require.NoError(t, err)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := rt.Start(ctx, "crash", messages.Start{Brief: "go", Cwd: home})
			if err != nil {
				return
			}
			for turn := range 3 {
				for {
					r, err := rt.ReadTurn(ctx, "crash", messages.ReadTurn{SessionID: s.SessionID})
					if messages.IsCode(err, messages.CodeUnavailable) {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					if err != nil {
						return
					}
					say("res %s %d", s.SessionID, r.Turn)
					break
				}
				if turn < 2 {
					for {
						_, err := rt.Guide(ctx, "crash", messages.Guide{SessionID: s.SessionID, Text: "more"})
						if messages.IsCode(err, messages.CodeUnavailable) {
							time.Sleep(10 * time.Millisecond)
							continue
						}
						break
					}
				}
			}
			if i%2 == 0 {
				if _, err := rt.Stop(ctx, "crash", messages.Stop{SessionID: s.SessionID}); err == nil {
					say("stop %s", s.SessionID)
				}
			}
		}()
	}
	wg.Wait()
	say("done")
	time.Sleep(time.Hour) // wait for the kill
}

func TestCrashSuite(t *testing.T) {
	if os.Getenv(crashHomeEnv) != "" {
		t.Skip("in the child")
	}
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	for round := range rounds {
		for _, faults := range []bool{false, true} {
			t.Run(fmt.Sprintf("round%d/faults=%v", round, faults), func(t *testing.T) {
				crashRound(t, faults, 20+rand.IntN(600))
			})
		}
	}
}

func crashRound(t *testing.T, faults bool, killAfter int) {
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashHomeEnv+"="+home)
	// its own process group: the kill takes the git processes of its diff
	// capture with it, as a machine's crash would
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if faults {
		cmd.Env = append(cmd.Env, crashFaultsEnv+"=1")
	}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr lockedWriter
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())

	acked := map[string]uint64{} // highest acknowledged seq per session
	stopped := map[string]bool{}
	lines := 0
	sc := bufio.NewScanner(stdout)
	// only stops a hang (generous: a loaded machine is slow, not wrong);
	// the kill point is chosen by killAfter
	deadline := time.AfterFunc(10*time.Minute, func() { _ = cmd.Process.Kill() })
	defer deadline.Stop()
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "ev":
			seq, _ := strconv.ParseUint(f[2], 10, 64)
			acked[f[1]] = max(acked[f[1]], seq)
		case len(f) == 2 && f[0] == "stop":
			stopped[f[1]] = true
		}
		lines++
		// the kill waits for a first acknowledgement, however slow the
		// machine: a round with nothing acknowledged would check nothing
		if (lines >= killAfter && len(acked) > 0) || (len(f) == 1 && f[0] == "done") {
			break
		}
	}
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL))
	_ = cmd.Wait()
	requireLeasesFree(t, home)
	if len(acked) == 0 {
		t.Fatalf("the child acknowledged nothing in %d lines before it ended or hung; its stderr:\n%s", lines, stderr.String())
	}

	// the next boot: WAL replay, then the boot sweep
	rt, err := New(crashConfig(home), WithBackends(transports.NewRegistry(script.New())))
	require.NoError(t, err)
	defer rt.Close(context.Background())
	ctx := ctxT(t)
	recs, err := rt.Store().List(ctx)
	require.NoError(t, err)
	for _, rec := range recs {
		assert.False(t, rec.Status.Live(), "session %s is %s after the boot sweep", rec.SessionID, rec.Status)
	}
	for sid, seq := range acked {
		evs, err := rt.Store().ReadEvents(ctx, sid, 0, 0)
		require.NoError(t, err, "session %s", sid)
		require.GreaterOrEqual(t, uint64(len(evs)), seq, "session %s: acknowledged seq %d is in the store", sid, seq)
		for i, e := range evs {
			require.Equal(t, uint64(i+1), e.Seq, "session %s: gapless, no seq reused", sid)
		}
		if stopped[sid] {
			var released int
			for _, e := range evs {
				if e.Event.Type == messages.EvReleased {
					released++
				}
			}
			assert.Equal(t, 1, released, "session %s: its stop was answered, so released is durable", sid)
		}
	}
}

// lockedWriter collects the child's stderr.
type lockedWriter struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// requireLeasesFree waits until no process holds a runtime lease of home:
// the boot sweep rightly spares the sessions of a runtime whose lease is
// held, and a killed process's lock is released only once the kernel has
// torn down every process that shared its descriptors. A lease still held
// after a minute names its holders and fails the round.
func requireLeasesFree(t *testing.T, home string) {
	t.Helper()
	locks, _ := filepath.Glob(filepath.Join(home, runtimesDir, "*.lock"))
	deadline := time.Now().Add(time.Minute)
	for _, l := range locks {
		id := strings.TrimSuffix(filepath.Base(l), ".lock")
		for leaseHeld(home, id) {
			if time.Now().After(deadline) {
				out, _ := exec.Command("sh", "-c", "ls -l /proc/[0-9]*/fd 2>/dev/null | grep -F "+id).CombinedOutput()
				t.Fatalf("runtime %s's lease is still held a minute after the kill:\n%s", id, out)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
