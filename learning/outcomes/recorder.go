package outcomes

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/codesession/codesession/messages"
)

// Source is the part of the session store the recorder reads; the
// runtime's store.Store satisfies it.
type Source interface {
	GetMeta(ctx context.Context, sessionID string) (messages.SessionRecord, error)
	ReadEvents(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]messages.PersistedEvent, error)
	List(ctx context.Context) ([]messages.SessionRecord, error)
}

// startRev is one line of revisions.jsonl.
type startRev struct {
	SessionID string    `json:"sessionId"`
	Run       int       `json:"run"`
	Revision  string    `json:"revision"`
	At        time.Time `json:"at"`
}

func (s startRev) key() string { return fmt.Sprintf("%s#%d", s.SessionID, s.Run) }

// Options configure a Recorder.
type Options struct {
	// EditTools returns a backend's edit-tool names (for the evidence of work).
	EditTools func(backendID string) []string
	// Revision reads a work tree's HEAD (default Revision).
	Revision func(ctx context.Context, dir string) string
	Metrics  *Metrics
	Logger   *slog.Logger
	// OnRecord sees every record appended (the track-record cache listens).
	OnRecord func(Record)
}

// Recorder appends outcome records at release.
type Recorder struct {
	src  Source
	log  *jsonl[Record]
	revs *jsonl[startRev]
	o    Options
}

// Dir is where the learning files live under a home.
func Dir(home string) string { return filepath.Join(home, "learning") }

// OpenLog opens the outcome log under home for reading and appending.
func OpenLog(home string) (*Log, error) {
	l, err := openJSONL(filepath.Join(Dir(home), "outcomes.jsonl"), Record.Key)
	if err != nil {
		return nil, fmt.Errorf("open outcomes: %w", err)
	}
	return &Log{l: l}, nil
}

// Log is the outcome log.
type Log struct{ l *jsonl[Record] }

// All returns every record, oldest first, and a generation that changes
// when the records do (after Refresh or an Append through this Log).
func (g *Log) All() ([]Record, uint64) { return g.l.Snapshot() }

// Refresh reads records other processes appended.
func (g *Log) Refresh() error { return g.l.Refresh() }

// Append writes r unless its session run is already recorded.
func (g *Log) Append(r Record) (bool, error) { return g.l.Append(r) }

// Has reports whether the session run is recorded.
func (g *Log) Has(sessionID string, run int) bool {
	return g.l.Has(fmt.Sprintf("%s#%d", sessionID, run))
}

// NewRecorder opens the outcome log and the start-revision journal under home.
func NewRecorder(home string, src Source, o Options) (*Recorder, error) {
	log, err := OpenLog(home)
	if err != nil {
		return nil, err
	}
	revs, err := openJSONL(filepath.Join(Dir(home), "revisions.jsonl"), startRev.key)
	if err != nil {
		return nil, fmt.Errorf("open revisions: %w", err)
	}
	if o.Revision == nil {
		o.Revision = Revision
	}
	if o.EditTools == nil {
		o.EditTools = func(string) []string { return nil }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Recorder{src: src, log: log.l, revs: revs, o: o}, nil
}

// Log returns the outcome log the recorder appends to.
func (r *Recorder) Log() *Log { return &Log{l: r.log} }

// Started journals the repository revision a session run starts from. Call
// it as soon as the run's record is durable (start and resume).
func (r *Recorder) Started(ctx context.Context, sessionID string) error {
	rec, err := r.src.GetMeta(ctx, sessionID)
	if err != nil {
		return err
	}
	run := max(1, len(rec.Runs))
	if r.revs.Has(fmt.Sprintf("%s#%d", sessionID, run)) {
		return nil
	}
	at := time.Now()
	if lr := rec.LatestRun(); lr != nil {
		at = lr.StartedAt
	}
	_, err = r.revs.Append(startRev{SessionID: sessionID, Run: run, Revision: r.o.Revision(ctx, rec.Cwd), At: at})
	return err
}

// Released records the outcome of the session's latest run once its
// released event is durable. It reports whether a record was appended (false
// when the run is already recorded, not released, or released by shutdown).
func (r *Recorder) Released(ctx context.Context, sessionID string) (Record, bool, error) {
	rec, err := r.src.GetMeta(ctx, sessionID)
	if err != nil {
		return Record{}, false, err
	}
	run := max(1, len(rec.Runs))
	key := fmt.Sprintf("%s#%d", sessionID, run)
	if r.log.Has(key) {
		return Record{}, false, nil
	}
	events, err := r.src.ReadEvents(ctx, sessionID, 0, 0)
	if err != nil {
		return Record{}, false, err
	}
	start, _ := r.revs.Get(key)
	out, ok := Build(rec, events, r.o.EditTools(rec.BackendID), start.Revision, r.o.Revision(ctx, rec.Cwd))
	if !ok {
		return Record{}, false, nil
	}
	wrote, err := r.log.Append(out)
	if err != nil || !wrote {
		return out, false, err
	}
	r.o.Metrics.settle(out)
	r.o.Logger.Info("code_session_settled", "session", sessionID, "run", out.Run, "backend", out.BackendID,
		"model", out.Model, "outcome", out.Outcome, "inferred", out.Inferred, "reason", cmp.Or(out.FailureReason, out.InferredReason))
	if r.o.OnRecord != nil {
		r.o.OnRecord(out)
	}
	return out, true, nil
}

// Reconcile records every released session run whose outcome is missing
// (a crash came between its release and the append). It returns how many
// it recorded; a session it cannot read is logged and skipped.
func (r *Recorder) Reconcile(ctx context.Context) (int, error) {
	if err := r.log.Refresh(); err != nil {
		return 0, err
	}
	recs, err := r.src.List(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range recs {
		if rec.Status != messages.StatusEnded && rec.Status != messages.StatusFailed {
			continue
		}
		if r.log.Has(fmt.Sprintf("%s#%d", rec.SessionID, max(1, len(rec.Runs)))) {
			continue
		}
		_, wrote, err := r.Released(ctx, rec.SessionID)
		if err != nil {
			r.o.Logger.Warn("outcome reconcile: cannot record", "session", rec.SessionID, "err", err)
			continue
		}
		if wrote {
			n++
		}
	}
	return n, nil
}
