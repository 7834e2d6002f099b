package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// Each suite runs small here: its correctness checks must pass, and a
// deliberately broken input (a store that loses an event, a server that
// skips one) must make it fail. Nothing here looks at how fast anything
// was.

func small(t *testing.T) Options {
	t.Helper()
	progress := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(progress.String())
		}
	})
	return Options{Sessions: 30, Turns: 2, StoreSessions: 4, StoreAppends: 10, RoutingReads: 40,
		Subscribers: 6, SlowSubscribers: 1, FeedEvents: 1500, Rate: 20000,
		Concurrency: []int{1, 2}, NativeTurns: 2, DiffFiles: 60, Home: t.TempDir(), Progress: progress}
}

// lockedBuffer is the progress writer of a small run: the suites' progress
// lines and the control plane's log lines reach it from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func run(t *testing.T, suite string, o Options) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, suite, o)
	require.NoError(t, err)
	require.NotNil(t, res)
	return res
}

func requirePassed(t *testing.T, res *Result) {
	t.Helper()
	require.True(t, res.Passed(), "failures: %v", res.Failures())
	n := len(res.Checks)
	for _, p := range res.Parts {
		n += len(p.Checks)
	}
	require.NotZero(t, n, "a suite with no checks cannot fail")
}

// failed returns the names of the failed checks.
func failed(res *Result) []string {
	var out []string
	for _, c := range res.Checks {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

// swallowReleased acknowledges the first released event appended to it
// without writing it: a store that loses a session's last event.
type swallowReleased struct {
	store.Store
	done *atomic.Bool
}

func (s swallowReleased) Append(ctx context.Context, sid string, evs []messages.PersistedEvent) error {
	if n := len(evs); n > 0 && evs[n-1].Event.Type == messages.EvReleased && s.done.CompareAndSwap(false, true) {
		if n == 1 {
			return nil
		}
		return s.Store.Append(ctx, sid, evs[:n-1])
	}
	return s.Store.Append(ctx, sid, evs)
}

func (s swallowReleased) AppendRecord(ctx context.Context, sid string, evs []messages.PersistedEvent, rec messages.SessionRecord) error {
	if n := len(evs); n > 0 && evs[n-1].Event.Type == messages.EvReleased && s.done.CompareAndSwap(false, true) {
		return s.Store.AppendRecord(ctx, sid, evs[:n-1], rec)
	}
	return s.Store.AppendRecord(ctx, sid, evs, rec)
}

func swallowingStore() func(string) (store.Store, error) {
	done := new(atomic.Bool)
	return func(dir string) (store.Store, error) {
		st, err := filestore.Open(dir)
		return swallowReleased{Store: st, done: done}, err
	}
}

// hideEvent reads back every log but one without its third event: a store
// that lost a line in the middle of a log.
type hideEvent struct {
	store.Store
	victim *sync.Once
}

func (h hideEvent) ReadEvents(ctx context.Context, sid string, after uint64, limit int) ([]messages.PersistedEvent, error) {
	evs, err := h.Store.ReadEvents(ctx, sid, after, limit)
	if err == nil && len(evs) > 3 {
		h.victim.Do(func() { evs = append(evs[:2:2], evs[3:]...) })
	}
	return evs, err
}

func hidingStore() func(string) (store.Store, error) {
	once := new(sync.Once)
	return func(dir string) (store.Store, error) {
		st, err := filestore.Open(dir)
		return hideEvent{Store: st, victim: once}, err
	}
}

func TestSessions(t *testing.T) {
	t.Parallel()
	o := small(t)
	res := run(t, SuiteSessions, o)
	requirePassed(t, res)
	figures := map[string]bool{}
	for _, r := range res.Rows {
		figures[r.Figure] = true
	}
	for _, f := range []string{"sessions started", "start p50", "read-turn p99", "answer max", "guide p50", "stop p99",
		"events persisted", "heap per live session", "RSS per live session", "goroutines per live session",
		"CPU per event persisted, turns phase", "cores busy, turns phase (process CPU / wall)",
		"page faults per event persisted, turns phase", "voluntary context switches per event persisted, turns phase"} {
		assert.True(t, figures[f], "missing figure %q", f)
	}
	var live float64
	for _, r := range res.Rows {
		switch r.Figure {
		case "live sessions at the memory snapshot":
			live = r.Value
		case "CPU per event persisted, turns phase":
			// both sides spend CPU on every event: a zero is a reading that failed
			assert.Greater(t, r.Value, 0.0, "the sessions' CPU per event")
			if assert.NotNil(t, r.Baseline) {
				assert.Greater(t, r.Baseline.Value, 0.0, "the plain-file appends' CPU per event")
			}
		case "voluntary context switches per event persisted, turns phase":
			// every event waits for an fsync on both sides: some thread slept
			assert.Greater(t, r.Value, 0.0, "the sessions' context switches per event")
			if assert.NotNil(t, r.Baseline) {
				assert.Greater(t, r.Baseline.Value, 0.0, "the plain-file appends' context switches per event")
			}
		}
	}
	assert.Equal(t, float64(o.Sessions), live, "the memory snapshot sees every session live")
}

func TestSessionsFailsOnALostReleasedEvent(t *testing.T) {
	t.Parallel()
	o := small(t)
	o.Sessions = 10
	o.Store = swallowingStore()
	res := run(t, SuiteSessions, o)
	assert.False(t, res.Passed())
	assert.Equal(t, []string{"sessions released"}, failed(res))
}

func TestSessionsFailsOnAGap(t *testing.T) {
	t.Parallel()
	o := small(t)
	o.Sessions = 10
	o.Store = hidingStore()
	res := run(t, SuiteSessions, o)
	assert.False(t, res.Passed())
	assert.Contains(t, failed(res), "logs gapless")
}

func TestStore(t *testing.T) {
	t.Parallel()
	requirePassed(t, run(t, SuiteStore, small(t)))
}

func TestStoreFailsOnALostEvent(t *testing.T) {
	t.Parallel()
	o := small(t)
	o.Store = hidingStore()
	res := run(t, SuiteStore, o)
	assert.False(t, res.Passed())
	assert.Equal(t, []string{"batch 1: every event read back"}, failed(res))
}

func TestRouting(t *testing.T) {
	t.Parallel()
	res := run(t, SuiteRouting, small(t))
	requirePassed(t, res)
	assert.Equal(t, "read-turn (buffered) p50", res.Rows[0].Figure)
	require.NotNil(t, res.Rows[0].Ratio, "the figure comes with its ratio to hollywood's own request")
}

func TestRoutingFailsOnALostReleasedEvent(t *testing.T) {
	t.Parallel()
	o := small(t)
	o.Store = swallowingStore()
	res := run(t, SuiteRouting, o)
	assert.Equal(t, []string{"sessions released"}, failed(res))
}

func TestFeed(t *testing.T) {
	t.Parallel()
	o := small(t)
	res := run(t, SuiteFeed, o)
	requirePassed(t, res)
	rows := map[string]float64{}
	for _, r := range res.Rows {
		rows[r.Figure] = r.Value
	}
	assert.Zero(t, rows["events missed by subscribers that kept up"])
	// the slow subscriber never reads while 1,500 events go by: more than
	// its queue and socket buffers hold, so it is dropped (told to
	// reconnect) or cut by the write deadline, however fast the machine
	slow := rows["slow subscribers dropped (queue full, told to reconnect; of 1)"] + rows["slow subscribers cut by the write deadline (of 1)"]
	assert.Equal(t, 1.0, slow, "%+v", rows)
}

// dropOneFrame makes the first subscriber's stream skip its fifth event:
// a server that loses an event for a subscriber that keeps up.
func dropOneFrame(h http.Handler) http.Handler {
	var first atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/events" && first.CompareAndSwap(false, true) {
			w = &frameDropper{ResponseWriter: w, drop: 5}
		}
		h.ServeHTTP(w, r)
	})
}

type frameDropper struct {
	http.ResponseWriter
	n, drop int
}

func (d *frameDropper) Write(b []byte) (int, error) {
	if bytes.HasPrefix(b, []byte("id: ")) {
		d.n++
		if d.n == d.drop {
			return len(b), nil
		}
	}
	return d.ResponseWriter.Write(b)
}

func (d *frameDropper) Unwrap() http.ResponseWriter { return d.ResponseWriter }

func TestFeedFailsWhenASubscriberMissesAnEvent(t *testing.T) {
	t.Parallel()
	o := small(t)
	o.SlowSubscribers = -1
	o.FeedEvents = 200
	o.WrapHandler = dropOneFrame
	res := run(t, SuiteFeed, o)
	assert.Equal(t, []string{"subscribers that kept up got every event"}, failed(res))
	for _, c := range res.Checks {
		if !c.OK {
			assert.Contains(t, c.Detail, "a gap of 1")
		}
	}
}

func TestNative(t *testing.T) {
	t.Parallel()
	res := run(t, SuiteNative, small(t))
	requirePassed(t, res)
	// a turn splits into its three parts at every rung
	for _, c := range []int{1, 2} {
		for _, part := range []string{"part 1", "part 2", "part 3"} {
			found := false
			for _, r := range res.Rows {
				if strings.HasPrefix(r.Figure, fmt.Sprintf("c=%d: turn, %s:", c, part)) {
					found = true
					assert.Positive(t, r.Value, r.Figure)
				}
			}
			assert.True(t, found, "c=%d: no row for the turn's %s", c, part)
		}
		// a session's first turn (its start included) on a row of its own
		first := false
		for _, r := range res.Rows {
			if strings.HasPrefix(r.Figure, fmt.Sprintf("c=%d: a session's first turn, its start included", c)) {
				first = true
				assert.Positive(t, r.Value, r.Figure)
			}
		}
		assert.True(t, first, "c=%d: no row for a session's first turn", c)
		// and the process's CPU per turn, beside the replay's
		found := false
		for _, r := range res.Rows {
			if r.Figure == fmt.Sprintf("c=%d: process CPU per turn (runtime + model server)", c) {
				found = true
				assert.Positive(t, r.Value, r.Figure)
				require.NotNil(t, r.Baseline, r.Figure)
				assert.Positive(t, r.Baseline.Value, r.Figure)
			}
		}
		assert.True(t, found, "c=%d: no row of process CPU per turn", c)
		// the native backend alone (no runtime): against the bare client,
		// and the runtime against it; and what each side asked of the kernel
		for _, f := range []string{
			fmt.Sprintf("c=%d: page faults per turn (the process: runtime + model server)", c),
			fmt.Sprintf("c=%d: voluntary context switches per turn (the process: runtime + model server)", c),
		} {
			row := findRow(res, f)
			if assert.NotNil(t, row, "no row %q", f) {
				assert.GreaterOrEqual(t, row.Value, 0.0, f)
				require.NotNil(t, row.Baseline, f)
				assert.GreaterOrEqual(t, row.Baseline.Value, 0.0, f)
			}
		}
		// a runtime's turn waits on the disk, so some thread slept
		if row := findRow(res, fmt.Sprintf("c=%d: voluntary context switches per turn (the process: runtime + model server)", c)); row != nil {
			assert.Positive(t, row.Value, "voluntary context switches at c=%d", c)
		}
		for _, f := range []string{
			fmt.Sprintf("c=%d: the native backend alone per turn (turn - model server; no runtime)", c),
			fmt.Sprintf("c=%d: runtime per turn against the native backend alone (what the actors and the store add)", c),
			fmt.Sprintf("c=%d: process CPU per turn, the native backend alone (+ model server)", c),
		} {
			row := findRow(res, f)
			if assert.NotNil(t, row, "no row %q", f) {
				assert.Positive(t, row.Value, f)
				require.NotNil(t, row.Baseline, f)
				assert.Positive(t, row.Baseline.Value, f)
			}
		}
	}
	// a figure names one row: the reports' readers key on it
	seen := map[string]bool{}
	for _, r := range res.Rows {
		assert.False(t, seen[r.Figure], "two rows named %q", r.Figure)
		seen[r.Figure] = true
	}
	// at c=1, the turn less the one flush the contract holds it for
	floor := false
	for _, r := range res.Rows {
		if r.Figure == "c=1: runtime per turn less one device flush (the contract's floor)" {
			floor = true
			require.NotNil(t, r.Baseline, r.Figure)
			assert.Positive(t, r.Baseline.Value, r.Figure)
		}
		if strings.HasPrefix(r.Figure, "c=1: one device flush") {
			assert.Positive(t, r.Value, r.Figure)
		}
		assert.False(t, strings.HasPrefix(r.Figure, "c=2: one device flush"), "a flush row at c=2, where sessions share their flushes")
	}
	assert.True(t, floor, "c=1: no row of the runtime per turn less one device flush")
	// and, at c=1, what a hand-off to a sleeping thread and a page fault cost
	for _, prefix := range []string{"c=1: one hand-off to a goroutine on a sleeping thread", "c=1: one page fault"} {
		found := false
		for _, r := range res.Rows {
			if strings.HasPrefix(r.Figure, prefix) {
				found = true
				assert.Positive(t, r.Value, r.Figure)
			}
		}
		assert.True(t, found, "no row %q...", prefix)
	}
}

func TestThreadWakeTimesEachHandOff(t *testing.T) {
	s := threadWake(20)
	assert.Equal(t, 20, s.n)
	assert.Positive(t, s.p50)
	assert.LessOrEqual(t, s.p50, s.mx)
}

func TestPageFaultTimesTheFirstTouch(t *testing.T) {
	t.Parallel()
	per, err := pageFault(64)
	require.NoError(t, err)
	assert.Positive(t, per)
}

func TestKernelUsageCountsTheFaultsOfFreshPages(t *testing.T) {
	before := processKernelUsage()
	_, err := pageFault(256)
	require.NoError(t, err)
	// every page was touched for the first time: each one a minor fault
	assert.GreaterOrEqual(t, processKernelUsage().since(before).faults, int64(256))
}

func TestDeviceFlushTimesEachWrite(t *testing.T) {
	t.Parallel()
	s, err := deviceFlush(t.TempDir(), 20, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 20, s.n)
	assert.Positive(t, s.mean)
	assert.LessOrEqual(t, s.p50, s.mx)
}

func TestNativeFailsOnALostReleasedEvent(t *testing.T) {
	t.Parallel()
	o := small(t)
	o.Concurrency = []int{1}
	o.Store = swallowingStore()
	res := run(t, SuiteNative, o)
	assert.Equal(t, []string{"c=1: sessions released"}, failed(res))
}

func TestHooks(t *testing.T) {
	t.Parallel()
	o := small(t)
	o.ClaudeBin = os.Getenv("CODESESSION_CLAUDE_BIN")
	res := run(t, SuiteHooks, o)
	requirePassed(t, res)
	parts := map[string]*Result{}
	for _, p := range res.Parts {
		parts[p.Suite] = p
	}
	require.Len(t, parts, 3)
	assert.Contains(t, parts["cluster"].Skipped, "codesession bench cluster")
	if o.ClaudeBin == "" {
		assert.Contains(t, parts["claude-code"].Skipped, "CODESESSION_CLAUDE_BIN")
	}
	if parts["diffcapture"].Skipped == "" {
		assert.NotEmpty(t, parts["diffcapture"].Checks)
	}
}

func TestReport(t *testing.T) {
	t.Parallel()
	ok := &Result{Suite: "a"}
	ok.vs("rate", 10, UnitPerSec, "raw", 20)
	ok.vs("zero baseline", 3, UnitCount, "raw", 0)
	ok.vs("unknown", math.NaN(), UnitBytes, "raw", math.NaN())
	ok.check("fine", true, "all good")
	bad := &Result{Suite: "b", Parts: []*Result{{Suite: "part", Checks: []Check{{Name: "lost", OK: false, Detail: "one event"}}}}}
	assert.True(t, ok.Passed())
	assert.False(t, bad.Passed(), "a failed part fails its suite")
	assert.Equal(t, []string{"part: lost: one event"}, bad.Failures())
	require.NotNil(t, ok.Rows[0].Ratio)
	assert.Equal(t, 0.5, *ok.Rows[0].Ratio)
	assert.Nil(t, ok.Rows[1].Ratio, "no ratio against a zero baseline")

	rep := NewReport(time.Now(), []*Result{ok, bad})
	assert.False(t, rep.Passed)
	var text, js bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	assert.Contains(t, text.String(), "FAIL  lost: one event")
	assert.Contains(t, text.String(), "verdict: FAIL")
	require.NoError(t, rep.WriteJSON(&js))
	var back Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	assert.False(t, back.Passed)
	assert.Equal(t, "rate", back.Results[0].Rows[0].Figure)
	assert.Contains(t, js.String(), `"value": null`, "what was not measured is null, not an encoding failure")
	assert.Contains(t, text.String(), "n/a")
}

func TestOptions(t *testing.T) {
	t.Parallel()
	assert.Error(t, Options{Events: MinEvents - 1}.Validate())
	assert.Error(t, Options{Concurrency: []int{1, 0}}.Validate())
	assert.NoError(t, Options{}.Validate())
	_, err := Run(context.Background(), "nosuch", Options{})
	assert.Error(t, err)
	for _, s := range Suites() {
		assert.True(t, Known(s))
	}
}

func TestScenarioHasTheEventsAsked(t *testing.T) {
	t.Parallel()
	for _, m := range []int{MinEvents, 20, 33} {
		sc := sessionScenario(3, m)
		require.NoError(t, sc.Validate())
		for i, turn := range sc.Turns {
			n := 1 // turn_end
			for _, st := range turn.Steps {
				switch {
				case st.Text != nil:
					n += 4
				case st.Thinking != nil:
					n++
				case st.Tool != nil && st.Tool.Ask:
					n += 3
				case st.Tool != nil:
					n += 2
				}
			}
			assert.Equal(t, m, n, "turn %d of M=%d", i+1, m)
		}
	}
}

func TestClusterSuite(t *testing.T) {
	o := small(t)
	res := run(t, SuiteCluster, o)
	requirePassed(t, res)
	require.NotEmpty(t, res.Rows)
	for _, r := range res.Rows {
		require.NotNil(t, r.Baseline, r.Figure)
		assert.Greater(t, r.Baseline.Value, 0.0, r.Figure)
	}
}

// findRow is res's row named figure, or nil.
func findRow(res *Result, figure string) *Row {
	for i := range res.Rows {
		if res.Rows[i].Figure == figure {
			return &res.Rows[i]
		}
	}
	return nil
}

// TestVsCountLeavesOutARatioToAHandful: a count per unit of work whose
// baseline is a handful over a whole run gets no ratio (one of thousands
// of x would swing with that handful); at the floor and above it does.
func TestVsCountLeavesOutARatioToAHandful(t *testing.T) {
	var r Result
	r.vsCount("page faults per event", 0.26, "plain files", 0.00002)
	r.vsCount("thread sleeps per turn", 3.3, "bare client", 0.2)
	r.vsCount("at the floor", 0.5, "baseline", countFloor)
	require.Len(t, r.Rows, 3)
	assert.Nil(t, r.Rows[0].Ratio, "no ratio to a handful")
	if assert.NotNil(t, r.Rows[0].Baseline) {
		assert.Equal(t, 0.00002, r.Rows[0].Baseline.Value, "the baseline itself is still reported")
	}
	if assert.NotNil(t, r.Rows[1].Ratio) {
		assert.InDelta(t, 16.5, *r.Rows[1].Ratio, 1e-9)
	}
	assert.NotNil(t, r.Rows[2].Ratio)
}

// promptSession is a backend session that says whether its commands
// return at once.
type promptSession struct {
	transports.Session
	prompt bool
}

func (s promptSession) Prompt() bool { return s.prompt }

// The native suite's clocked session says what its backend says of its
// commands: the runtime runs a native session's on the host's goroutine,
// and the bench measures that path.
func TestClockedSessionIsPromptAsItsBackend(t *testing.T) {
	for _, prompt := range []bool{true, false} {
		var s transports.Session = clockedSession{Session: promptSession{prompt: prompt}}
		p, ok := s.(transports.Prompt)
		require.True(t, ok)
		assert.Equal(t, prompt, p.Prompt())
	}
	var plain transports.Session = clockedSession{Session: promptSession{}.Session}
	assert.False(t, plain.(transports.Prompt).Prompt(), "a backend that says nothing is not prompt")
}
