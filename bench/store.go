package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
)

// storeEvent is a typical event: its events.jsonl line is about 300 bytes
// (the size of the DESIGN anchors).
func storeEvent(seq uint64) messages.PersistedEvent {
	return messages.PersistedEvent{Seq: seq, At: time.Now().UTC(), Turn: 2,
		Event: messages.Event{Type: messages.EvText, Text: strings.Repeat("The agent writes a line of prose. ", 6)}}
}

// storeBatchSizes are the batchings measured: one event per append (every
// event its own fsync), and a group commit of 16.
var storeBatchSizes = []int{1, 16}

// metaReplaces is how many record replaces each writer makes.
const metaReplaces = 20

func runStore(ctx context.Context, o Options, dir string) (*Result, error) {
	p := newProgress(o, SuiteStore)
	w, a := o.StoreSessions, o.StoreAppends
	res := &Result{Suite: SuiteStore, Params: fmt.Sprintf("%d session logs written at once, %d appends each; %d record writers x %d replaces", w, a, w, metaReplaces)}
	for _, batch := range storeBatchSizes {
		p.printf("appends: %d logs x %d appends of %d event(s), through the store and to plain files", w, a, batch)
		if err := storeAppends(ctx, o, filepath.Join(dir, fmt.Sprintf("batch%d", batch)), w, a, batch, res); err != nil {
			return nil, err
		}
	}
	p.printf("records: %d writers x %d atomic replaces, through the store and to plain files", w, metaReplaces)
	if err := storeMetas(ctx, o, filepath.Join(dir, "meta"), w, res, ""); err != nil {
		return nil, err
	}
	p.printf("records: one writer, %d atomic replaces", metaReplaces)
	if err := storeMetas(ctx, o, filepath.Join(dir, "meta1"), 1, res, "one writer: "); err != nil {
		return nil, err
	}
	res.note("the baselines write the same bytes to plain files: one write and one fsync per append (and an fsync of the directory when a log is new); a record is a temp file, write, fsync, rename and fsync of the directory")
	res.note("DESIGN's anchors for this kind of machine: ~16,000 durable records/s for 100 session files each fsyncing its own appends (p99 44 ms); ~0.5 ms per atomic meta.json replace")
	return res, nil
}

// storeAppends times w concurrent writers appending a batches of batch
// events to their own session log, through the store and then to plain
// files, and checks that every event reads back.
func storeAppends(ctx context.Context, o Options, dir string, w, a, batch int, res *Result) error {
	home := filepath.Join(dir, "store")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	st, err := o.Store(home)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	sids := make([]string, w)
	now := time.Now().UTC()
	for i := range sids {
		rec := messages.SessionRecord{SessionID: messages.NewSessionID(), BackendID: "script", Status: messages.StatusRunning,
			CreatedAt: now, UpdatedAt: now, Version: messages.RecordVersion}
		if err := st.Create(ctx, rec); err != nil {
			st.Close()
			return fmt.Errorf("create: %w", err)
		}
		sids[i] = rec.SessionID
	}
	var lat latencies
	var errs failures
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			evs := make([]messages.PersistedEvent, batch)
			seq := uint64(0)
			for range a {
				for j := range evs {
					seq++
					evs[j] = storeEvent(seq)
				}
				a0 := time.Now()
				if err := st.Append(ctx, sids[i], evs); err != nil {
					errs.add("append to %s: %v", sids[i], err)
					return
				}
				lat.since(a0)
			}
		}()
	}
	wg.Wait()
	storeElapsed := time.Since(t0)
	if err := st.Close(); err != nil {
		errs.add("close: %v", err)
	}
	errs.report(res, fmt.Sprintf("batch %d: appends succeeded", batch), fmt.Sprintf("%d appends of %d event(s)", w*a, batch))

	// read back through a fresh store
	st2, err := o.Store(home)
	if err != nil {
		return fmt.Errorf("reopen store: %w", err)
	}
	var lost failures
	total := 0
	for _, sid := range sids {
		evs, err := st2.ReadEvents(ctx, sid, 0, 0)
		if err != nil {
			lost.add("%s: %v", sid, err)
			continue
		}
		total += len(evs)
		if len(evs) != a*batch {
			lost.add("%s: %d events read back, want %d", sid, len(evs), a*batch)
			continue
		}
		for k, ev := range evs {
			if ev.Seq != uint64(k)+1 {
				lost.add("%s: event %d has seq %d", sid, k+1, ev.Seq)
				break
			}
		}
	}
	st2.Close()
	lost.report(res, fmt.Sprintf("batch %d: every event read back", batch), fmt.Sprintf("%d events in %d logs, each gapless", total, w))

	// the same bytes to plain files
	rawDir := filepath.Join(dir, "plain")
	if err := os.MkdirAll(rawDir, 0o700); err != nil {
		return err
	}
	lines := make([][]byte, a)
	seq := uint64(0)
	for k := range lines {
		evs := make([]messages.PersistedEvent, batch)
		for j := range evs {
			seq++
			evs[j] = storeEvent(seq)
		}
		lines[k] = encodeLines(evs)
	}
	var rawLat latencies
	var rawErrs failures
	t0 = time.Now()
	for i := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := filepath.Join(rawDir, fmt.Sprintf("s%04d", i))
			if err := os.Mkdir(d, 0o700); err != nil {
				rawErrs.add("%v", err)
				return
			}
			l, err := openRawLog(d)
			if err != nil {
				rawErrs.add("%v", err)
				return
			}
			defer l.close()
			for _, data := range lines {
				a0 := time.Now()
				if err := l.append(data); err != nil {
					rawErrs.add("%v", err)
					return
				}
				rawLat.since(a0)
			}
		}()
	}
	wg.Wait()
	rawElapsed := time.Since(t0)
	rawLines := 0
	for i := range w {
		n, err := countLines(filepath.Join(rawDir, fmt.Sprintf("s%04d", i), "events.jsonl"))
		if err != nil {
			rawErrs.add("%v", err)
		}
		rawLines += n
	}
	if rawLines != w*a*batch {
		rawErrs.add("plain files hold %d lines, want %d", rawLines, w*a*batch)
	}
	rawErrs.report(res, fmt.Sprintf("batch %d: baseline wrote every line", batch), fmt.Sprintf("%d lines", rawLines))

	name := fmt.Sprintf("plain files, batch %d", batch)
	res.vs(fmt.Sprintf("batch %d: durable events", batch), rate(w*a*batch, storeElapsed), UnitPerSec, name, rate(w*a*batch, rawElapsed))
	res.latencyRows(fmt.Sprintf("batch %d: append", batch), lat.summary(), name, rawLat.summary())
	return nil
}

// storeMetas times w concurrent writers each replacing its record
// metaReplaces times, through the store and as plain atomic replaces, and
// checks that every record reads back as its last replace.
func storeMetas(ctx context.Context, o Options, dir string, w int, res *Result, label string) error {
	home := filepath.Join(dir, "store")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	st, err := o.Store(home)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := make([]messages.SessionRecord, w)
	for i := range recs {
		recs[i] = messages.SessionRecord{SessionID: messages.NewSessionID(), BackendID: "script", Cwd: "/tmp/codesession-bench/work",
			MaxPosture: messages.PostureAcceptEdits, Posture: messages.PostureDefault, TaskBrief: "bench session: record replaces",
			Status: messages.StatusRunning, CreatedAt: base, UpdatedAt: base, Version: messages.RecordVersion,
			Runs: []messages.Run{{StartedAt: base, ExternalSessionID: "script-0123456789abcdef", OwnerScopeID: scope, Runtime: "rt-bench"}}}
		if err := st.Create(ctx, recs[i]); err != nil {
			st.Close()
			return fmt.Errorf("create: %w", err)
		}
	}
	var lat latencies
	var errs failures
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := recs[i]
			for k := 1; k <= metaReplaces; k++ {
				rec.RoundsElapsed = k
				rec.UpdatedAt = base.Add(time.Duration(k) * time.Second)
				a0 := time.Now()
				if err := st.PutMeta(ctx, rec); err != nil {
					errs.add("%s: %v", rec.SessionID, err)
					return
				}
				lat.since(a0)
			}
		}()
	}
	wg.Wait()
	storeElapsed := time.Since(t0)
	st.Close()
	st2, err := o.Store(home)
	if err != nil {
		return fmt.Errorf("reopen store: %w", err)
	}
	for _, r := range recs {
		got, err := st2.GetMeta(ctx, r.SessionID)
		if err != nil {
			errs.add("%s: %v", r.SessionID, err)
			continue
		}
		if got.RoundsElapsed != metaReplaces {
			errs.add("%s: record reads back as replace %d, want %d", r.SessionID, got.RoundsElapsed, metaReplaces)
		}
	}
	st2.Close()
	errs.report(res, label+"records replaced", fmt.Sprintf("%d records each read back as its last of %d replaces", w, metaReplaces))

	data := rawRecord()
	rawDir := filepath.Join(dir, "plain")
	if err := os.MkdirAll(rawDir, 0o700); err != nil {
		return err
	}
	var rawLat latencies
	var rawErrs failures
	t0 = time.Now()
	for i := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := filepath.Join(rawDir, fmt.Sprintf("s%04d", i))
			if err := os.Mkdir(d, 0o700); err != nil {
				rawErrs.add("%v", err)
				return
			}
			for range metaReplaces {
				a0 := time.Now()
				if err := rawReplace(d, data); err != nil {
					rawErrs.add("%v", err)
					return
				}
				rawLat.since(a0)
			}
		}()
	}
	wg.Wait()
	rawElapsed := time.Since(t0)
	rawErrs.report(res, label+"baseline replaced every record", fmt.Sprintf("%d plain atomic replaces", w*metaReplaces))
	res.vs(label+"meta.json replaces", rate(w*metaReplaces, storeElapsed), UnitPerSec, "plain atomic replaces", rate(w*metaReplaces, rawElapsed))
	res.latencyRows(label+"meta.json replace", lat.summary(), "plain atomic replace", rawLat.summary())
	return nil
}
