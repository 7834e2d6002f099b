// Package loop is the learning loop as the runtime wires it in: the
// outcome recorder (called when a session run starts and once its released
// event is durable), the track-record cache, the lesson book with its
// injector, and the nightly distillation job. It is the one object the
// runtime holds; everything it does is failure-soft: an error is logged
// and never blocks a session.
//
// Started and Released run in goroutines the Loop owns (the runtime calls
// them from actors that must not block); Close waits for them, so call it
// before closing the store. The job (RunJob) runs the pass at the
// configured local time each day until its context ends. Safe for
// concurrent use. Tests drive it through the runtime (actors' e2e test)
// and with a fake Source here.
package loop

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/learning/lessons"
	"github.com/codesession/codesession/learning/outcomes"
	"github.com/codesession/codesession/learning/trackrecord"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Loop.
type Options struct {
	// EditTools returns a backend's edit-tool names.
	EditTools func(backendID string) []string
	// Metrics registers the settle families (nil: none).
	Metrics prometheus.Registerer
	Logger  *slog.Logger
	// Model replaces the distiller model built from the config and the
	// environment (tests).
	Model lessons.Model
	// Getenv reads the distiller's keys (default os.Getenv).
	Getenv func(string) string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Loop is the runtime's learning loop.
type Loop struct {
	cfg      config.Learning
	o        Options
	rec      *outcomes.Recorder
	track    *trackrecord.Cache
	book     *lessons.Store
	inject   *lessons.Injector
	wg       sync.WaitGroup
	passMu   sync.Mutex
	lastPass *PassResult
}

// PassResult is the last pass's report and error, for operators.
type PassResult struct {
	Report lessons.Report
	Err    string
}

// Open opens the loop's files under home, reading sessions from src.
func Open(home string, cfg config.Learning, src outcomes.Source, o Options) (*Loop, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	l := &Loop{cfg: cfg, o: o}
	rec, err := outcomes.NewRecorder(home, src, outcomes.Options{EditTools: o.EditTools, Metrics: outcomes.NewMetrics(o.Metrics),
		Logger: o.Logger, OnRecord: func(outcomes.Record) { l.track.Invalidate() }})
	if err != nil {
		return nil, err
	}
	l.rec = rec
	l.track = trackrecord.NewCache(rec.Log())
	l.book = lessons.NewStore(outcomes.Dir(home))
	l.inject = lessons.NewInjector(l.book)
	return l, nil
}

// Outcomes is the outcome log.
func (l *Loop) Outcomes() *outcomes.Log { return l.rec.Log() }

// Lessons is the lesson book's store.
func (l *Loop) Lessons() *lessons.Store { return l.book }

func (l *Loop) async(what, sid string, f func(ctx context.Context) error) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := f(ctx); err != nil {
			l.o.Logger.Warn("learning: "+what+" failed", "session", sid, "err", err)
		}
	}()
}

// Started journals the revision a session run starts from (asynchronously).
func (l *Loop) Started(sessionID string) {
	l.async("journalling the start revision", sessionID, func(ctx context.Context) error { return l.rec.Started(ctx, sessionID) })
}

// Released records the outcome of a session run whose released event is
// durable (asynchronously).
func (l *Loop) Released(sessionID string) {
	l.async("recording the outcome", sessionID, func(ctx context.Context) error {
		_, _, err := l.rec.Released(ctx, sessionID)
		return err
	})
}

// Reconcile records the outcomes a crash left missing (asynchronously).
func (l *Loop) Reconcile() {
	l.async("reconciling outcomes", "", func(ctx context.Context) error {
		n, err := l.rec.Reconcile(ctx)
		if n > 0 {
			l.o.Logger.Info("learning: recorded outcomes a crash had left missing", "count", n)
		}
		return err
	})
}

// Wait waits for the work the loop has pending now (the boot's reconcile,
// outcomes and start revisions being recorded); the loop goes on after.
// As with Close, nothing may hand the loop work while it waits (a
// sync.WaitGroup's rule): call it where no session is being started or
// released, as a test does before it measures.
func (l *Loop) Wait() { l.wg.Wait() }

// Close waits for the loop's pending work.
func (l *Loop) Close() { l.Wait() }

// TrackRecord returns backend's track-record lines (nil without history).
func (l *Loop) TrackRecord(backend string) []string { return l.track.Lines(backend, l.o.Now()) }

// LessonBlock returns the low-trust injection block for a dispatch; "" when
// nothing qualifies or the book cannot be read (logged: fail closed).
func (l *Loop) LessonBlock(f lessons.Filter) string {
	b, err := l.inject.Block(f, l.o.Now())
	if err != nil {
		l.o.Logger.Warn("learning: lesson book unreadable; no lessons injected", "err", err)
	}
	return b
}

// Distill runs one distillation pass now. It never panics out and never
// blocks anything but its caller; its result is kept for LastPass.
func (l *Loop) Distill(ctx context.Context) (lessons.Report, error) {
	l.passMu.Lock()
	defer l.passMu.Unlock()
	rep, err := l.distill(ctx)
	res := &PassResult{Report: rep}
	if err != nil {
		res.Err = err.Error()
	}
	l.lastPass = res
	l.inject.Invalidate()
	return rep, err
}

func (l *Loop) distill(ctx context.Context) (lessons.Report, error) {
	m := l.o.Model
	if m == nil {
		built, err := lessons.NewModel(lessons.ModelConfig{Provider: l.cfg.Provider, Model: l.cfg.Model}, l.o.Getenv)
		if err != nil {
			return lessons.Report{At: l.o.Now()}, err
		}
		m = built
	}
	log := l.Outcomes()
	if err := log.Refresh(); err != nil {
		return lessons.Report{At: l.o.Now()}, err
	}
	all, _ := log.All()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return lessons.Pass(ctx, l.book, all, lessons.PassOptions{Model: m, Now: l.o.Now(), Logger: l.o.Logger})
}

// LastPass is the last pass this loop ran, or nil.
func (l *Loop) LastPass() *PassResult {
	l.passMu.Lock()
	defer l.passMu.Unlock()
	return l.lastPass
}

// NextRun returns the next time at "HH:MM" local time strictly after now.
func NextRun(at string, now time.Time) time.Time {
	t, err := time.Parse("15:04", at)
	if err != nil {
		t, _ = time.Parse("15:04", "04:00")
	}
	next := time.Date(now.Year(), now.Month(), now.Day(), t.Hour(), t.Minute(), 0, 0, now.Location())
	if !next.After(now) {
		next = next.AddDate(0, 0, 1)
	}
	return next
}

// RunJob runs the nightly pass at the configured time until ctx ends; it
// returns at once when distillation is off by config. A failing pass is
// logged with its reason and the job goes on.
func (l *Loop) RunJob(ctx context.Context) {
	if !l.cfg.Distill {
		l.o.Logger.Info("learning: lesson distillation is off by config")
		return
	}
	for {
		next := NextRun(l.cfg.DistillAt, l.o.Now())
		timer := time.NewTimer(next.Sub(l.o.Now()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		if _, err := l.Distill(ctx); err != nil {
			l.o.Logger.Warn("learning: nightly lesson distillation failed", "err", err)
		}
	}
}
