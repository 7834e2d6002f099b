package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/messages"
)

// daemonProc is a `codesession serve` process.
type daemonProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
}

func startDaemonProc(t *testing.T, bin, home, addr, scenario string) *daemonProc {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--addr", addr, "--home", home, "--env", "CODESESSION_SCRIPT="+scenario)
	cmd.Env = append(os.Environ(), "CODESESSION_BACKEND=script", "CODESESSION_LOG_LEVEL=warn", "CODESESSION_ADDR=", "CODESESSION_CONFIG=")
	p := &daemonProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr, cmd.Stdout = p.stderr, p.stderr
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		sweepHome(home)
	})
	got := waitListening(t, p.stderr)
	require.Equal(t, addr, got)
	return p
}

func (p *daemonProc) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("the daemon did not exit; stderr:\n%s", p.stderr.String())
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestDaemonKilledMidTurnIsResumedOnTheSameRecord is the resume story with
// a real daemon process: SIGKILL mid-turn, restart, the record is orphaned,
// resume it, and its log continues gaplessly on the same record with two
// runs; a `tail -f` follows the whole story across the restart with every
// event once; then a SIGTERM shuts the daemon down gracefully, orphaning
// the live session with a released{shutdown} event.
func TestDaemonKilledMidTurnIsResumedOnTheSameRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs daemon processes")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "codesession")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	home := filepath.Join(dir, "home")
	scenario := writeScenario(t, opsScenario)
	addr := freeAddr(t)
	d1 := startDaemonProc(t, bin, home, addr, scenario)
	env := invocation{env: map[string]string{"CODESESSION_HOME": home, "CODESESSION_ADDR": addr}}

	r := runCLI(t, env, "start", "--json", "--cwd", t.TempDir(), "SLOW task")
	require.Equal(t, 0, r.code, r.stderr)
	var st messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	sid := st.SessionID

	// tail -f follows the session from its first event, across the
	// restart, named by a prefix of its id as a person types it
	tailCtx, stopTail := context.WithCancel(context.Background())
	defer stopTail()
	tailOut, tailErr := &syncBuffer{}, &syncBuffer{}
	tailDone := make(chan int, 1)
	go func() {
		tailDone <- run(tailCtx, []string{"tail", "-f", "--json", sid[3:15]}, func(k string) string { return env.env[k] }, nil, tailOut, tailErr)
	}()

	show := func() sessionDetail {
		t.Helper()
		r := runCLI(t, env, "show", "--json", "--events", "5000", sid)
		require.Equal(t, 0, r.code, r.stderr)
		var d sessionDetail
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &d))
		return d
	}
	waitUntil(t, "the slow turn to be under way (and durable)", func() bool {
		for _, ev := range show().Events {
			if ev.Event.Type == messages.EvText && !ev.Event.Delta && ev.Event.Text == "working on it" {
				return true
			}
		}
		return false
	})
	waitUntil(t, "tail to have printed the turn so far", func() bool { return strings.Contains(tailOut.String(), "working on it") })
	before := show()
	assert.Equal(t, messages.StatusRunning, before.Record.Status)

	require.NoError(t, d1.cmd.Process.Signal(syscall.SIGKILL))
	d1.wait(t, time.Minute) // only stops a hang

	d2 := startDaemonProc(t, bin, home, addr, scenario)
	after := show()
	assert.Equal(t, messages.StatusOrphaned, after.Record.Status, "the restarted daemon marked the dead one's session")
	last := after.Events[len(after.Events)-1]
	assert.Equal(t, messages.EvOrphaned, last.Event.Type)
	assert.Equal(t, before.LastSeq+1, last.Seq, "the orphan event follows the last durable one")

	r = runCLI(t, env, "resume", "--brief", "carry on", sid)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "session "+sid+" resumed")
	r = runCLI(t, env, "read", "--json", sid)
	require.Equal(t, 0, r.code, r.stderr)
	var tr messages.TurnResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &tr))
	assert.Equal(t, messages.KindTurnComplete, tr.Kind)
	assert.Contains(t, tr.Text, "carry on")
	assert.Equal(t, 2, tr.Turn, "the killed turn 1 was closed as orphaned at the resume, so the next turn is 2, never a second turn 1")
	r = runCLI(t, env, "stop", sid)
	require.Equal(t, 0, r.code, r.stderr)

	final := show()
	assert.Equal(t, sid, final.Record.SessionID)
	assert.Equal(t, messages.StatusEnded, final.Record.Status)
	require.Len(t, final.Record.Runs, 2, "one record, two runs")
	assert.Equal(t, final.Record.Runs[0].ExternalSessionID, final.Record.Runs[1].ExternalSessionID, "the backend resumed its own session")
	var types []messages.EventType
	for i, ev := range final.Events {
		require.Equal(t, uint64(i+1), ev.Seq, "one gapless log across the crash")
		types = append(types, ev.Event.Type)
	}
	assert.Contains(t, types, messages.EvOrphaned)
	ends := map[int]messages.TurnState{}
	for _, ev := range final.Events {
		if ev.Event.Type == messages.EvTurnEnd {
			_, dup := ends[ev.Turn]
			assert.False(t, dup, "one turn_end per turn number, turn %d", ev.Turn)
			ends[ev.Turn] = ev.Event.State
		}
	}
	assert.Equal(t, messages.TurnInterrupted, ends[1], "the killed turn ends as interrupted (orphaned)")
	assert.Contains(t, types, messages.EvAdopted)
	assert.Equal(t, messages.EvReleased, types[len(types)-1])

	// tail -f saw every event once, in order, across the restart, and
	// ended by itself (exit 0) after `released`
	select {
	case code := <-tailDone:
		assert.Equal(t, exitOK, code, tailErr.String())
	case <-time.After(5 * time.Minute): // only stops a hang
		t.Fatal("tail -f did not end after the released event")
	}
	assert.Contains(t, tailOut.String(), controlplane.EventID(sid, final.LastSeq)+`"`)
	var seqs []uint64
	for _, line := range strings.Split(strings.TrimSpace(tailOut.String()), "\n") {
		var m struct {
			Event string                 `json:"event"`
			ID    string                 `json:"id"`
			Data  controlplane.EventData `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		require.Equal(t, controlplane.TopicEvent, m.Event)
		if len(seqs) > 0 {
			require.Greater(t, m.Data.Seq, seqs[len(seqs)-1], "no duplicate, in order")
		}
		seqs = append(seqs, m.Data.Seq)
	}
	got := map[uint64]bool{}
	for _, s := range seqs {
		got[s] = true
	}
	for _, ev := range final.Events {
		if ev.Event.Type == messages.EvText && ev.Event.Delta {
			continue // coalescing may replace deltas on the live path
		}
		assert.True(t, got[ev.Seq], "tail missed event %d (%s)", ev.Seq, ev.Event.Type)
	}
	assert.Contains(t, tailErr.String(), "reconnecting")

	// a graceful stop orphans the live session with a final released{shutdown}
	r = runCLI(t, env, "start", "--json", "--cwd", t.TempDir(), "SLOW again")
	require.Equal(t, 0, r.code, r.stderr)
	var st2 messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st2))
	waitUntil(t, "the second session's turn to run", func() bool {
		r := runCLI(t, env, "show", "--json", st2.SessionID)
		return r.code == 0 && strings.Contains(r.stdout, "working on it")
	})
	require.NoError(t, d2.cmd.Process.Signal(syscall.SIGTERM))
	d2.wait(t, 2*time.Minute) // a graceful stop under the race detector; only stops a hang
	assert.Equal(t, 0, d2.cmd.ProcessState.ExitCode(), d2.stderr.String())
	assert.Contains(t, d2.stderr.String(), "codesession serve: stopped")

	fs, err := filestore.Open(home)
	require.NoError(t, err)
	defer fs.Close()
	rec, err := fs.GetMeta(context.Background(), st2.SessionID)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusOrphaned, rec.Status)
	evs, err := fs.ReadEvents(context.Background(), st2.SessionID, 0, 0)
	require.NoError(t, err)
	lastEv := evs[len(evs)-1].Event
	assert.Equal(t, messages.EvReleased, lastEv.Type)
	assert.Equal(t, messages.ReleaseShutdown, lastEv.ReleaseReason)
	assert.Contains(t, evsTypes(evs), messages.EvInterrupt, "the running turn was interrupted first")
}

func evsTypes(evs []messages.PersistedEvent) []messages.EventType {
	var out []messages.EventType
	for _, e := range evs {
		out = append(out, e.Event.Type)
	}
	return out
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
