package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
)

// countingStore counts what reaches the store: appends, events and record
// writes. It is transparent otherwise.
type countingStore struct {
	store.Store
	appends atomic.Int64
	events  atomic.Int64
	metas   atomic.Int64
	busy    atomic.Int64 // ns spent in Append, AppendRecord, Create and PutMeta
}

func (c *countingStore) Append(ctx context.Context, sid string, evs []messages.PersistedEvent) error {
	t0 := time.Now()
	err := c.Store.Append(ctx, sid, evs)
	c.busy.Add(int64(time.Since(t0)))
	if err == nil && len(evs) > 0 {
		c.appends.Add(1)
		c.events.Add(int64(len(evs)))
	}
	return err
}

func (c *countingStore) AppendRecord(ctx context.Context, sid string, evs []messages.PersistedEvent, rec messages.SessionRecord) error {
	t0 := time.Now()
	err := c.Store.AppendRecord(ctx, sid, evs, rec)
	c.busy.Add(int64(time.Since(t0)))
	if err == nil {
		if len(evs) > 0 {
			c.appends.Add(1)
			c.events.Add(int64(len(evs)))
		}
		c.metas.Add(1)
	}
	return err
}

// pipelinedCountingStore is a countingStore over a store.Pipeliner, and
// one itself, counting what its pipelined appends commit.
type pipelinedCountingStore struct{ *countingStore }

func (c pipelinedCountingStore) StartAppend(ctx context.Context, sid string, evs []messages.PersistedEvent, rec *messages.SessionRecord) func() error {
	t0 := time.Now()
	wait := c.Store.(store.Pipeliner).StartAppend(ctx, sid, evs, rec)
	return func() error {
		err := wait()
		c.counted(t0, evs, rec, err)
		return err
	}
}

func (c pipelinedCountingStore) StartAppendThen(ctx context.Context, sid string, evs []messages.PersistedEvent, rec *messages.SessionRecord, done func(error)) {
	t0 := time.Now()
	c.Store.(store.Pipeliner).StartAppendThen(ctx, sid, evs, rec, func(err error) {
		c.counted(t0, evs, rec, err)
		done(err)
	})
}

// counted counts a pipelined append started at t0 whose outcome is err.
func (c pipelinedCountingStore) counted(t0 time.Time, evs []messages.PersistedEvent, rec *messages.SessionRecord, err error) {
	c.busy.Add(int64(time.Since(t0)))
	if err != nil {
		return
	}
	if len(evs) > 0 {
		c.appends.Add(1)
		c.events.Add(int64(len(evs)))
	}
	if rec != nil {
		c.metas.Add(1)
	}
}

func (c *countingStore) Create(ctx context.Context, rec messages.SessionRecord) error {
	t0 := time.Now()
	err := c.Store.Create(ctx, rec)
	c.busy.Add(int64(time.Since(t0)))
	if err == nil {
		c.metas.Add(1)
	}
	return err
}

func (c *countingStore) PutMeta(ctx context.Context, rec messages.SessionRecord) error {
	t0 := time.Now()
	err := c.Store.PutMeta(ctx, rec)
	c.busy.Add(int64(time.Since(t0)))
	if err == nil {
		c.metas.Add(1)
	}
	return err
}

// logExpect is what every session's log must show.
type logExpect struct {
	// turns is how many turn_started and turn_diff events each log holds.
	turns int
	// clarifications is how many clarifications each log raises, each
	// answered once; -1 skips the count (they must still be answered).
	clarifications int
	// reason is the release reason of the log's last event.
	reason messages.ReleaseReason
	// status is the record's final status.
	status messages.Status
}

// logStats is what the read-back found.
type logStats struct {
	sessions int
	events   int
	bytes    int64
}

// failures collects the first few failures of a check and counts them all.
type failures struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (f *failures) add(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if len(f.first) < 5 {
		f.first = append(f.first, fmt.Sprintf(format, args...))
	}
}

// report adds the check to res: passed with okDetail, or failed with the
// count and the first failures.
func (f *failures) report(res *Result, name, okDetail string) {
	if f.n == 0 {
		res.check(name, true, "%s", okDetail)
		return
	}
	more := ""
	if f.n > len(f.first) {
		more = fmt.Sprintf(" (and %d more)", f.n-len(f.first))
	}
	res.check(name, false, "%d failure(s): %s%s", f.n, strings.Join(f.first, "; "), more)
}

// checkLogs reads every session's events and record back from st and adds
// the log checks to res:
//
//   - gapless: seq runs 1..n with no gap and no duplicate, and LastSeq is n;
//   - released last: exactly one released event, the last, with the
//     expected reason, and the record settled with the expected status;
//   - turns and clarifications: each turn started and diffed once, every
//     clarification raised answered exactly once.
func checkLogs(ctx context.Context, st store.Store, sids []string, want logExpect, res *Result) logStats {
	var gap, rel, turns failures
	var stats logStats
	var mu sync.Mutex
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sid := range work {
				n, size := checkLog(ctx, st, sid, want, &gap, &rel, &turns)
				mu.Lock()
				stats.sessions++
				stats.events += n
				stats.bytes += size
				mu.Unlock()
			}
		}()
	}
	for _, sid := range sids {
		work <- sid
	}
	close(work)
	wg.Wait()
	gap.report(res, "logs gapless", fmt.Sprintf("%d sessions, %d events read back: seq 1..n in every log, no gap, no duplicate", stats.sessions, stats.events))
	rel.report(res, "sessions released", fmt.Sprintf("every log ends with its one released{%s} event; every record is %s", want.reason, want.status))
	what := fmt.Sprintf("%d turns per session, each started and diffed once", want.turns)
	if want.clarifications >= 0 {
		what += fmt.Sprintf("; %d clarification(s) per session, each answered once", want.clarifications)
	}
	turns.report(res, "turns recorded", what)
	return stats
}

func checkLog(ctx context.Context, st store.Store, sid string, want logExpect, gap, rel, turns *failures) (int, int64) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	evs, err := st.ReadEvents(ctx, sid, 0, 0)
	if err != nil {
		gap.add("%s: read: %v", sid, err)
		return 0, 0
	}
	last, err := st.LastSeq(ctx, sid)
	if err != nil {
		gap.add("%s: last seq: %v", sid, err)
	}
	size := int64(len(encodeLines(evs)))
	for i, ev := range evs {
		if ev.Seq != uint64(i)+1 {
			kind := "a gap"
			if ev.Seq <= uint64(i) {
				kind = "a duplicate"
			}
			gap.add("%s: event %d has seq %d (%s)", sid, i+1, ev.Seq, kind)
			break
		}
	}
	if err == nil && last != uint64(len(evs)) {
		gap.add("%s: LastSeq is %d but %d events read back", sid, last, len(evs))
	}

	released := 0
	for _, ev := range evs {
		if ev.Event.Type == messages.EvReleased {
			released++
		}
	}
	switch {
	case len(evs) == 0:
		rel.add("%s: empty log", sid)
	case evs[len(evs)-1].Event.Type != messages.EvReleased:
		rel.add("%s: the last event is %s, not released", sid, evs[len(evs)-1].Event.Type)
	case released != 1:
		rel.add("%s: %d released events", sid, released)
	case evs[len(evs)-1].Event.ReleaseReason != want.reason:
		rel.add("%s: released{%s}, want released{%s}", sid, evs[len(evs)-1].Event.ReleaseReason, want.reason)
	}
	if rec, err := st.GetMeta(ctx, sid); err != nil {
		rel.add("%s: record: %v", sid, err)
	} else if rec.Status != want.status {
		rel.add("%s: record status %s, want %s", sid, rec.Status, want.status)
	}

	started, diffed := 0, 0
	raised := map[string]int{}
	answered := map[string]int{}
	for _, ev := range evs {
		switch ev.Event.Type {
		case messages.EvTurnStarted:
			started++
		case messages.EvTurnDiff:
			diffed++
		case messages.EvClarification:
			if ev.Event.Decision == "" {
				raised[ev.Event.ClarificationID]++
			} else {
				answered[ev.Event.ClarificationID]++
			}
		}
	}
	if started != want.turns || diffed != want.turns {
		turns.add("%s: %d turns started and %d diffed, want %d", sid, started, diffed, want.turns)
	}
	if want.clarifications >= 0 && len(raised) != want.clarifications {
		turns.add("%s: %d clarifications raised, want %d", sid, len(raised), want.clarifications)
	}
	for id, n := range raised {
		if n != 1 || answered[id] != 1 {
			turns.add("%s: clarification %s raised %d time(s), answered %d time(s)", sid, id, n, answered[id])
		}
	}
	for id := range answered {
		if raised[id] == 0 {
			turns.add("%s: clarification %s answered but never raised", sid, id)
		}
	}
	return len(evs), size
}
