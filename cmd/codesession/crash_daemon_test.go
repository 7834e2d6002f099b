package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// The crash suite through the daemon (issue 10): N sessions x M events are
// driven through a real `codesession serve` process over HTTP, the way a
// client does (start, read-turn, answer, guide, stop, and the SSE feed).
// Everything the daemon acknowledged is written down on the client's side:
// every feed event, every read-turn result, every op's ok. The daemon is
// SIGKILLed at a random point, restarted (WAL replay, boot sweep) and shut
// down; then the store must hold every acknowledged event, every log must be
// gapless with no seq reused, and every record must be orphaned or final.
// As root, one more round runs the home on a small tmpfs filled to ENOSPC
// around the kill.
//
// Small by default (seconds to a minute); CODESESSION_CRASH_SESSIONS,
// CODESESSION_CRASH_EVENTS and CODESESSION_CRASH_ROUNDS make it larger.

// crashSize is the size of one crash round.
type crashSize struct {
	sessions int // driven at once
	events   int // text events per turn
	turns    int
	rounds   int
}

func crashSizeFromEnv(t *testing.T) crashSize {
	sz := crashSize{sessions: 4, events: 20, turns: 3, rounds: 2}
	for name, p := range map[string]*int{"CODESESSION_CRASH_SESSIONS": &sz.sessions,
		"CODESESSION_CRASH_EVENTS": &sz.events, "CODESESSION_CRASH_ROUNDS": &sz.rounds} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			require.NoError(t, err, name)
			require.Positive(t, n, name)
			*p = n
		}
	}
	return sz
}

// crashScenarioJSON: every turn writes `events` texts, asks permission for a
// command (an answer op per turn) and ends.
func crashScenarioJSON(events int) string {
	steps := make([]string, 0, events+2)
	for i := range events {
		steps = append(steps, fmt.Sprintf(`{"text": "t{{turn}} e%d"}`, i))
	}
	steps = append(steps, `{"tool": {"name": "Bash", "input": {"command": "go test ./..."}, "output": "ok", "ask": true}}`,
		`{"text": "done {{turn}}"}`)
	return `{"fallback": {"steps": [` + strings.Join(steps, ", ") + `]}}`
}

func TestCrashThroughTheDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills daemon processes")
	}
	sz := crashSizeFromEnv(t)
	bin := filepath.Join(t.TempDir(), "codesession")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	scenario := writeScenario(t, crashScenarioJSON(sz.events))

	for round := range sz.rounds {
		t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) {
			crashDaemonRound(t, bin, scenario, sz, filepath.Join(t.TempDir(), "home"), nil)
		})
	}
	t.Run("enospc", func(t *testing.T) {
		mnt := smallTmpfs(t, "8m")
		crashDaemonRound(t, bin, scenario, sz, filepath.Join(mnt, "home"), &diskFiller{dir: mnt})
	})
}

// smallTmpfs mounts a tmpfs of the given size at a temporary directory
// (as root, else through passwordless sudo, owned by this user) and
// unmounts it at cleanup. Where neither can mount, the round is skipped
// (the same faults come from the faulty store in actors.TestCrashSuite,
// faults=true), except under CI=true, where it fails: .ci/run's machine
// can mount one.
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	opts := "size=" + size + ",mode=0700"
	var sudo []string
	if os.Geteuid() != 0 {
		sudo = []string{"sudo", "-n"}
		opts += fmt.Sprintf(",uid=%d,gid=%d", os.Geteuid(), os.Getegid())
	}
	run := func(args ...string) ([]byte, error) {
		args = append(slices.Clone(sudo), args...)
		return exec.Command(args[0], args[1:]...).CombinedOutput()
	}
	if out, err := run("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir); err != nil {
		subprocesstest.Missing(t, "cannot mount a tmpfs to fill (%v: %s); actors.TestCrashSuite/faults=true covers ENOSPC with the faulty store", err, out)
	}
	t.Cleanup(func() {
		if out, err := run("umount", dir); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// diskFiller fills a filesystem to ENOSPC and frees it again.
type diskFiller struct {
	dir  string
	full bool
}

func (d *diskFiller) path() string { return filepath.Join(d.dir, "filler") }

func (d *diskFiller) fill(t *testing.T) {
	f, err := os.OpenFile(d.path(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "filling the tmpfs: %v", err)
			break
		}
	}
	for _, n := range []int{4096, 512, 1} { // the last pages too
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	d.full = true
}

func (d *diskFiller) free(t *testing.T) {
	require.NoError(t, os.Remove(d.path()))
	d.full = false
}

// acks is what the client saw acknowledged. Every entry is a promise the
// daemon made: the store must keep it across the kill.
type acks struct {
	mu       sync.Mutex
	n        int
	started  map[string]bool
	feed     map[string]map[uint64]messages.PersistedEvent // sid -> seq -> event the feed sent
	results  map[string][]messages.TurnResult
	answered map[string][]string // sid -> clarification ids answered ok
	guided   map[string][]string // sid -> guidance texts answered ok
	stopped  map[string]bool
	errs     []string // unexpected op errors, for the log
	refused  int      // ops answered unavailable (retried)
	killed   bool     // errors after the kill are expected
	notify   chan struct{}
}

func newAcks() *acks {
	return &acks{started: map[string]bool{}, feed: map[string]map[uint64]messages.PersistedEvent{},
		results: map[string][]messages.TurnResult{}, answered: map[string][]string{}, guided: map[string][]string{},
		stopped: map[string]bool{}, notify: make(chan struct{}, 1)}
}

func (a *acks) add(f func()) {
	a.mu.Lock()
	f()
	a.n++
	a.mu.Unlock()
	select {
	case a.notify <- struct{}{}:
	default:
	}
}

func (a *acks) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

func crashDaemonRound(t *testing.T, bin, scenario string, sz crashSize, home string, filler *diskFiller) {
	require.NoError(t, os.MkdirAll(home, 0o700))
	addr := freeAddr(t)
	d := startDaemonProc(t, bin, home, addr, scenario)
	cl, err := (&clientFlags{addr: addr, home: home}).client("crash", func(string) string { return "" })
	require.NoError(t, err)

	ack := newAcks()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); followFeed(ctx, t, cl, ack) }()
	var drivers sync.WaitGroup
	total := 0
	for i := range sz.sessions {
		// 1..turns turns, so some sessions stop early and the kill can land
		// on a stop; even ones are stopped, odd ones left live
		turns := 1 + i%sz.turns
		// a turn is about two feed events per scripted text (the deltas and
		// the whole text), a dozen more events and op answers
		total += turns*(2*sz.events+13) + 3
		drivers.Add(1)
		go func() {
			defer drivers.Done()
			driveCrashSession(ctx, cl, ack, t.TempDir(), turns, i%2 == 0)
		}()
	}
	allDone := make(chan struct{})
	go func() { drivers.Wait(); close(allDone) }()

	killAt := 1 + rand.IntN(total)
	target := killAt
	if filler != nil {
		target = killAt / 2 // the disk fills halfway to the kill
	}
	deadline := time.After(3 * time.Minute) // only stops a hang
	waitFor := func(n int, upTo <-chan time.Time) {
		for ack.count() < n {
			select {
			case <-ack.notify:
			case <-allDone:
				return
			case <-upTo:
				return
			case <-deadline:
				t.Logf("daemon stderr:\n%s", d.stderr.String())
				t.Fatalf("only %d of %d acknowledgements in three minutes", ack.count(), n)
			}
		}
	}
	waitFor(target, nil)
	if filler != nil {
		filler.fill(t)
		t.Logf("the tmpfs is full after %d acknowledgements", ack.count())
		time.Sleep(time.Duration(200+rand.IntN(1800)) * time.Millisecond) // ops meet the full disk
		if rand.IntN(2) == 0 {
			filler.free(t) // room again: the held events go out, then the kill
			t.Logf("the tmpfs has room again after %d acknowledgements", ack.count())
			waitFor(killAt, time.After(10*time.Second))
		}
	}
	ack.mu.Lock()
	ack.killed = true
	ack.mu.Unlock()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGKILL))
	d.wait(t, time.Minute) // only stops a hang
	cancel()
	wg.Wait()
	drivers.Wait()
	if filler != nil && filler.full {
		filler.free(t)
	}
	ack.mu.Lock()
	defer ack.mu.Unlock()
	t.Logf("killed after %d acknowledgements (aimed at %d of ~%d): %d sessions started, %d stopped, %d ops refused as unavailable",
		ack.n, killAt, total, len(ack.started), len(ack.stopped), ack.refused)
	for _, e := range ack.errs {
		t.Logf("op error before the kill: %s", e)
	}
	if filler != nil {
		t.Logf("the daemon logged %d writes refused for want of space", strings.Count(d.stderr.String(), "no space left on device"))
	}

	// the next boot replays the WAL and sweeps the dead runtime's sessions;
	// a graceful stop then leaves the store to be read directly
	d2 := startDaemonProc(t, bin, home, freeAddr(t), scenario)
	require.NoError(t, d2.cmd.Process.Signal(syscall.SIGTERM))
	d2.wait(t, 2*time.Minute)
	require.Equal(t, 0, d2.cmd.ProcessState.ExitCode(), d2.stderr.String())

	st, err := filestore.Open(home)
	require.NoError(t, err)
	defer st.Close()
	checkAcknowledged(t, st, ack)
}

// checkAcknowledged holds the store to every acknowledgement (ack.mu held).
func checkAcknowledged(t *testing.T, st *filestore.Store, ack *acks) {
	ctx := context.Background()
	recs, err := st.List(ctx)
	require.NoError(t, err)
	byID := map[string]messages.SessionRecord{}
	for _, rec := range recs {
		byID[rec.SessionID] = rec
		assert.False(t, rec.Status.Live(), "session %s is %s after the restart: neither orphaned nor final", rec.SessionID, rec.Status)
	}
	for sid := range ack.started {
		_, ok := byID[sid]
		assert.True(t, ok, "session %s was started (acknowledged) but has no record", sid)
	}
	for _, rec := range recs {
		sid := rec.SessionID
		evs, err := st.ReadEvents(ctx, sid, 0, 0)
		require.NoError(t, err, "session %s", sid)
		bySeq := map[uint64]messages.PersistedEvent{}
		for i, ev := range evs {
			require.Equal(t, uint64(i+1), ev.Seq, "session %s: gapless from 1, no seq reused", sid)
			bySeq[ev.Seq] = ev
		}
		for seq, seen := range ack.feed[sid] {
			got, ok := bySeq[seq]
			if !assert.True(t, ok, "session %s: the feed sent seq %d (%s) but the store ends at %d", sid, seq, seen.Event.Type, len(evs)) {
				continue
			}
			assert.Equal(t, seen.Event.Type, got.Event.Type, "session %s seq %d: the feed sent another event than the store holds (seq reused)", sid, seq)
			assert.Equal(t, seen.Turn, got.Turn, "session %s seq %d", sid, seq)
			if !(seen.Event.Type == messages.EvText && seen.Event.Delta) { // deltas are coalesced on the feed
				assert.Equal(t, seen.Event.Text, got.Event.Text, "session %s seq %d", sid, seq)
				assert.Equal(t, seen.Event.ClarificationID, got.Event.ClarificationID, "session %s seq %d", sid, seq)
			}
		}
		has := func(f func(messages.PersistedEvent) bool) bool {
			for _, ev := range evs {
				if f(ev) {
					return true
				}
			}
			return false
		}
		for _, r := range ack.results[sid] {
			switch r.Kind {
			case messages.KindClarification:
				assert.True(t, has(func(ev messages.PersistedEvent) bool {
					return ev.Event.Type == messages.EvClarification && ev.Event.ClarificationID == r.ClarificationID
				}), "session %s: the question %s a read-turn returned is not in the log", sid, r.ClarificationID)
			case messages.KindTurnComplete:
				assert.True(t, has(func(ev messages.PersistedEvent) bool {
					return ev.Event.Type == messages.EvTurnEnd && ev.Turn == r.Turn
				}), "session %s: turn %d's result was returned but its end is not in the log", sid, r.Turn)
			}
		}
		for _, id := range ack.answered[sid] {
			assert.True(t, has(func(ev messages.PersistedEvent) bool {
				return ev.Event.Type == messages.EvClarification && ev.Event.ClarificationID == id && ev.Event.Decision != ""
			}), "session %s: the answer to %s was acknowledged but is not in the log", sid, id)
		}
		for _, text := range ack.guided[sid] {
			assert.True(t, has(func(ev messages.PersistedEvent) bool {
				return ev.Event.Type == messages.EvGuidance && ev.Event.Text == text
			}), "session %s: the guidance %q was acknowledged but is not in the log", sid, text)
		}
		if ack.stopped[sid] {
			// the record's own status after a stop under faults is
			// actors.TestStopWaitsForTheFinalRecord's concern
			assert.True(t, has(func(ev messages.PersistedEvent) bool {
				return ev.Event.Type == messages.EvReleased && ev.Event.ReleaseReason == messages.ReleaseExplicit
			}), "session %s: stop answered ok but released is not in the log", sid)
		}
	}
	for sid := range ack.feed {
		_, ok := byID[sid]
		assert.True(t, ok, "the feed sent events of session %s, which has no record", sid)
	}
}

// retryable tells the errors a client retries: the store is refusing
// writes for now (a full disk) or a long poll ended without a result.
func retryable(err error) bool {
	return messages.IsCode(err, messages.CodeUnavailable) || messages.IsCode(err, messages.CodeTimeout)
}

// driveCrashSession runs one session through its turns until ctx ends or an
// op fails for good, recording every ok.
func driveCrashSession(ctx context.Context, cl *daemonClient, ack *acks, cwd string, turns int, stop bool) {
	call := func(path string, body, out any) error {
		for {
			err := cl.do(ctx, http.MethodPost, path, body, out)
			if err == nil || !retryable(err) || ctx.Err() != nil {
				if err != nil {
					ack.mu.Lock()
					if !ack.killed {
						ack.errs = append(ack.errs, fmt.Sprintf("%s: %v", path, err))
					}
					ack.mu.Unlock()
				}
				return err
			}
			if messages.IsCode(err, messages.CodeUnavailable) {
				ack.mu.Lock()
				ack.refused++
				ack.mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var st messages.StartResult
	if call("/api/code-sessions", map[string]any{"backend": "script", "brief": "go", "cwd": cwd}, &st) != nil {
		return
	}
	sid := st.SessionID
	ack.add(func() { ack.started[sid] = true })
	base := "/api/code-sessions/" + sid
	for turn := 1; turn <= turns; turn++ {
		for done := false; !done; {
			var r messages.TurnResult
			if call(base+"/read-turn", map[string]any{"timeoutMs": 60000}, &r) != nil {
				return
			}
			ack.add(func() { ack.results[sid] = append(ack.results[sid], r) })
			switch r.Kind {
			case messages.KindClarification:
				if call(base+"/answer", map[string]any{"clarificationId": r.ClarificationID, "decision": messages.DecisionAllowOnce}, nil) != nil {
					return
				}
				ack.add(func() { ack.answered[sid] = append(ack.answered[sid], r.ClarificationID) })
			case messages.KindTurnComplete:
				done = true
			default:
				return
			}
		}
		if turn < turns {
			text := fmt.Sprintf("more %d", turn)
			if call(base+"/guidance", map[string]any{"text": text}, nil) != nil {
				return
			}
			ack.add(func() { ack.guided[sid] = append(ack.guided[sid], text) })
		}
	}
	if stop && call(base+"/stop", map[string]any{}, nil) == nil {
		ack.add(func() { ack.stopped[sid] = true })
	}
}

// followFeed reads the SSE feed of every session, reconnecting when a
// stream ends, and records every event it is sent.
func followFeed(ctx context.Context, t *testing.T, cl *daemonClient, ack *acks) {
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cl.base+"/api/events?topics="+controlplane.TopicEvent, nil)
		if err != nil {
			t.Errorf("the feed's request: %v", err)
			return
		}
		req.Header.Set("Authorization", "Bearer "+cl.token)
		res, err := cl.hc.Do(req)
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		readFeed(res, ack)
		res.Body.Close()
	}
}

func readFeed(res *http.Response, ack *acks) {
	if res.StatusCode != http.StatusOK {
		time.Sleep(20 * time.Millisecond)
		return
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var event, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		case line == "":
			if event == controlplane.TopicEvent {
				var d controlplane.EventData
				if json.Unmarshal([]byte(data), &d) == nil && d.SessionID != "" {
					ack.add(func() {
						if ack.feed[d.SessionID] == nil {
							ack.feed[d.SessionID] = map[uint64]messages.PersistedEvent{}
						}
						ack.feed[d.SessionID][d.Seq] = d.PersistedEvent
					})
				}
			}
			event, data = "", ""
		}
	}
}

// TestCorruptStoreThroughTheDaemon: a meta.json that does not parse and an
// event log with a corrupt middle line are said as corrupt by GET and by
// resume alike (a garbage record used to be a 500 on GET and not_found on
// resume), and the daemon never appends to the corrupt log.
func TestCorruptStoreThroughTheDaemon(t *testing.T) {
	home := t.TempDir()
	scenario := writeScenario(t, `{"fallback": {"steps": [{"text": "a"}, {"text": "b"}, {"text": "c"}]}}`)
	ctx := context.Background()
	stopped := func(addr string) (string, *daemonClient) {
		cl, err := (&clientFlags{addr: addr, home: home}).client("corrupt", func(string) string { return "" })
		require.NoError(t, err)
		var st messages.StartResult
		require.NoError(t, cl.do(ctx, http.MethodPost, "/api/code-sessions", map[string]any{"backend": "script", "brief": "go", "cwd": t.TempDir()}, &st))
		var r messages.TurnResult
		require.NoError(t, cl.do(ctx, http.MethodPost, "/api/code-sessions/"+st.SessionID+"/read-turn", map[string]any{}, &r))
		require.NoError(t, cl.do(ctx, http.MethodPost, "/api/code-sessions/"+st.SessionID+"/stop", map[string]any{}, nil))
		return st.SessionID, cl
	}
	addr, _, stop := inProcessDaemon(t, home, scenario)
	badRecord, _ := stopped(addr)
	badLog, _ := stopped(addr)
	require.Equal(t, exitOK, stop())

	require.NoError(t, os.WriteFile(filestore.MetaPath(home, badRecord), []byte(`{"sessionId": "cs_`), 0o600))
	logPath := filestore.EventsPath(home, badLog)
	data, err := os.ReadFile(logPath)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(data), "\n")
	require.Greater(t, len(lines), 4)
	lines[2] = "{not json\n"
	corrupted := strings.Join(lines, "")
	require.NoError(t, os.WriteFile(logPath, []byte(corrupted), 0o600))

	addr, _, stop = inProcessDaemon(t, home, scenario)
	cl, err := (&clientFlags{addr: addr, home: home}).client("corrupt", func(string) string { return "" })
	require.NoError(t, err)
	for _, sid := range []string{badRecord, badLog} {
		err := cl.do(ctx, http.MethodGet, "/api/code-sessions/"+sid, nil, &json.RawMessage{})
		assert.Equal(t, messages.CodeCorrupt, messages.ErrorCode(err), "GET %s: %v", sid, err)
		err = cl.do(ctx, http.MethodPost, "/api/code-sessions/"+sid+"/resume", map[string]any{}, nil)
		assert.Equal(t, messages.CodeCorrupt, messages.ErrorCode(err), "resume %s: %v", sid, err)
	}
	require.Equal(t, exitOK, stop())
	after, err := os.ReadFile(logPath)
	require.NoError(t, err)
	assert.Equal(t, corrupted, string(after), "the corrupt log was neither appended to nor cut")
}
