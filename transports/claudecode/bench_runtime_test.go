package claudecode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/modelmock"
)

// lineClock follows events from the stdout read that caused them to their
// durable append and to their publication on the runtime's live seam
// (which comes after the append: the seam sees only durable events). The
// transport's trace queues each event's read time under its identity,
// once for each end; the store wrapper and the event listener each take
// it off in the same order (the runtime keeps the transport's order).
type lineClock struct {
	mu        sync.Mutex
	toDurable map[string][]time.Time
	toPublish map[string][]time.Time
	published []time.Duration
	durable   []time.Duration
}

func newLineClock() *lineClock {
	return &lineClock{toDurable: map[string][]time.Time{}, toPublish: map[string][]time.Time{}}
}

func eventKey(ev messages.Event) string {
	return fmt.Sprintf("%s|%s|%s|%d|%s", ev.Type, ev.ToolUseID, ev.ClarificationID, len(ev.Text), ev.State)
}

func (c *lineClock) read(readAt time.Time, ev messages.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := eventKey(ev)
	c.toDurable[k] = append(c.toDurable[k], readAt)
	c.toPublish[k] = append(c.toPublish[k], readAt)
}

// since takes the read time queued under ev's identity and adds how long
// ago it was to into; an event no line caused (the runtime's own) has none.
func (c *lineClock) since(now time.Time, queued map[string][]time.Time, ev messages.Event, into *[]time.Duration) {
	k := eventKey(ev)
	q := queued[k]
	if len(q) == 0 {
		return
	}
	queued[k] = q[1:]
	*into = append(*into, now.Sub(q[0]))
}

func (c *lineClock) publish(_ string, pe messages.PersistedEvent) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.since(now, c.toPublish, pe.Event, &c.published)
}

// stampStore is a store whose appends stamp the events they made durable.
type stampStore struct {
	store.Store
	c *lineClock
}

func (s stampStore) Append(ctx context.Context, sid string, evs []messages.PersistedEvent) error {
	if err := s.Store.Append(ctx, sid, evs); err != nil {
		return err
	}
	s.stamp(evs)
	return nil
}

func (s stampStore) AppendRecord(ctx context.Context, sid string, evs []messages.PersistedEvent, rec messages.SessionRecord) error {
	if err := s.Store.AppendRecord(ctx, sid, evs, rec); err != nil {
		return err
	}
	s.stamp(evs)
	return nil
}

func (s stampStore) stamp(evs []messages.PersistedEvent) {
	now := time.Now()
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	for _, pe := range evs {
		s.c.since(now, s.c.toDurable, pe.Event, &s.c.durable)
	}
}

func meanP99(d []time.Duration) (time.Duration, time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	return sum / time.Duration(len(s)), s[len(s)*99/100]
}

// BenchmarkRuntimeLineOverhead drives the real CLI through actors.Runtime
// (file store, fsync'd) and reports, from the same run, the runtime's own
// cost per CLI line: from the stdout read to its durable append
// (µs/durable), and to the event published on the live seam
// (µs/published, which includes the append), next
// to the turn's wall time as the driver sees it (Guide to ReadTurn).
func BenchmarkRuntimeLineOverhead(b *testing.B) {
	bin := claudecode.ClaudeBinaryForTest(b)
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "bench"}, Steps: []modelmock.Step{
		{Thinking: "a short plan", Text: "Looking.", Tool: &modelmock.ToolCall{Name: "Bash", Input: json.RawMessage(`{"command":"echo bench","description":"echo"}`)}},
		{Text: "Done: {{result}}"},
	}}}}
	mock, err := modelmock.Start(b, sc)
	if err != nil {
		b.Fatal(err)
	}
	clock := newLineClock()
	cfg := config.Default()
	cfg.Home = b.TempDir()
	cfg.DefaultBackend = claudecode.ID
	cfg.DefaultMaxRounds = 0 // unlimited: b.N turns
	cfg.Env = map[string]string{"ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-ant-test", "HOME": b.TempDir()}
	fs, err := filestore.Open(cfg.Home)
	if err != nil {
		b.Fatal(err)
	}
	rt, err := actors.New(cfg, actors.WithStore(stampStore{Store: fs, c: clock}), actors.WithEventListener(clock.publish),
		actors.WithBackends(transports.NewRegistry(claudecode.New(claudecode.WithBinary(bin), claudecode.WithTraceForTest(clock.read)))))
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rt.Close(ctx)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const scope = "bench"
	st, err := rt.Start(ctx, scope, messages.Start{Brief: "bench 0", Cwd: b.TempDir(), Model: "claude-mock-1"})
	if err != nil {
		b.Fatal(err)
	}
	if r, err := rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: st.SessionID}); err != nil || r.Kind != messages.KindTurnComplete {
		b.Fatalf("first turn: %+v %v", r, err)
	}
	var turns []time.Duration
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		start := time.Now()
		if _, err := rt.Guide(ctx, scope, messages.Guide{SessionID: st.SessionID, Text: fmt.Sprintf("bench %d", i)}); err != nil {
			b.Fatal(err)
		}
		r, err := rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: st.SessionID})
		if err != nil || r.Kind != messages.KindTurnComplete {
			b.Fatalf("turn %d: %+v %v", i+1, r, err)
		}
		turns = append(turns, time.Since(start))
	}
	b.StopTimer()
	if _, err := rt.Stop(ctx, scope, messages.Stop{SessionID: st.SessionID}); err != nil {
		b.Fatal(err)
	}
	clock.mu.Lock()
	defer clock.mu.Unlock()
	pm, pp := meanP99(clock.published)
	dm, dp := meanP99(clock.durable)
	tm, tp := meanP99(turns)
	if len(clock.published) == 0 || len(clock.durable) == 0 {
		b.Fatal("nothing measured")
	}
	perTurn := float64(len(clock.published)) / float64(b.N+1)
	b.ReportMetric(float64(pm.Nanoseconds())/1e3, "µs/published")
	b.ReportMetric(float64(pp.Nanoseconds())/1e3, "p99-µs/published")
	b.ReportMetric(float64(dm.Nanoseconds())/1e3, "µs/durable")
	b.ReportMetric(float64(dp.Nanoseconds())/1e3, "p99-µs/durable")
	b.ReportMetric(perTurn, "events/turn")
	b.ReportMetric(float64(tm.Nanoseconds())/1e6, "ms/turn")
	b.ReportMetric(float64(tp.Nanoseconds())/1e6, "p99-ms/turn")
}
