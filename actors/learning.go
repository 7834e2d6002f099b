package actors

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/learning/lessons"
	"github.com/codesession/codesession/learning/loop"
	"github.com/codesession/codesession/learning/routing"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// The learning seam (seed 000 §7): the runtime holds one loop.Loop, tells
// it when a session run starts and when its released event is durable, and
// asks it for track records, routing guidance and the lesson block. All of
// it is failure-soft: a loop that cannot open is logged and left out.

// WithLearning uses l instead of the loop the runtime opens under its home.
func WithLearning(l *loop.Loop) Option { return func(o *options) { o.learning = l } }

// WithoutLearning leaves the learning loop out: no outcome is recorded
// (benchmarks that measure the runtime alone).
func WithoutLearning() Option { return func(o *options) { o.noLearning = true } }

// WithLearningJob runs the nightly lesson distillation in the runtime (the
// daemon asks for it; one-shot commands do not).
func WithLearningJob() Option { return func(o *options) { o.learningJob = true } }

func openLearning(cfg config.Config, st store.Store, backends *transports.Registry, reg prometheus.Registerer, log *slog.Logger) *loop.Loop {
	l, err := loop.Open(cfg.Home, cfg.Learning, st, loop.Options{Metrics: reg, Logger: log,
		EditTools: func(id string) []string {
			if t, err := backends.Get(id); err == nil {
				return t.Descriptor().EditToolNames
			}
			return nil
		}})
	if err != nil {
		log.Warn("learning loop unavailable: outcomes will not be recorded", "err", err)
		return nil
	}
	l.Reconcile()
	return l
}

// Learning returns the runtime's learning loop, nil when it could not open.
func (r *Runtime) Learning() *loop.Loop { return r.learn }

// LessonBlock returns the low-trust lesson block for a dispatch to backend
// (and model and tags, which may be empty), to append to a driver's first
// message; "" when nothing qualifies.
func (r *Runtime) LessonBlock(backend, model string, tags []string) string {
	if r.learn == nil {
		return ""
	}
	return r.learn.LessonBlock(lessons.Filter{Backend: backend, Model: model, Tags: tags, Known: r.backends.IDs()})
}

// annotateListing adds the learning lines to a list-backends row.
func (r *Runtime) annotateListing(b *messages.BackendListing) {
	b.RoutingGuidance = routing.GuidanceLines(b.Descriptor)
	if r.learn != nil {
		b.TrackRecord = r.learn.TrackRecord(b.Descriptor.ID)
		b.LessonBlock = r.LessonBlock(b.Descriptor.ID, "", nil)
	}
}

// decisionLog writes the seed 000 §8 decision-log lines from a session's
// events: one line per decision, in the retired controller's vocabulary.
// It sees every event a session makes durable, on the session's goroutine,
// and most (streamed output) are no decision: those return before
// anything is built for a log line (logDecision's frame, some 0.8 KiB of
// arguments, is stack a session's wake-up would otherwise have to grow;
// TestDecisionLogLinesPerEventKind checks the two lists agree).
func decisionLog(log *slog.Logger, sid string, ev *messages.PersistedEvent) {
	switch ev.Event.Type {
	case messages.EvTurnStarted, messages.EvClarification, messages.EvPosture, messages.EvGuidance,
		messages.EvInterrupt, messages.EvReleased:
		logDecision(log, sid, ev)
	}
}

//go:noinline
func logDecision(log *slog.Logger, sid string, ev *messages.PersistedEvent) {
	e := &ev.Event
	switch e.Type {
	case messages.EvTurnStarted:
		if ev.Turn == 1 {
			log.Info("code_session_created", "session", sid)
		}
	case messages.EvClarification:
		if e.Decision == "" {
			log.Info("code_session_clarification_raised", "session", sid, "turn", ev.Turn, "tool", e.ToolName, "clarification", e.ClarificationID)
		} else {
			log.Info("code_session_clarification_answered", "session", sid, "turn", ev.Turn, "tool", e.ToolName, "decision", e.Decision)
		}
	case messages.EvPosture:
		log.Info("code_session_posture_set", "session", sid, "posture", e.Posture)
	case messages.EvGuidance:
		log.Info("code_session_guide", "session", sid, "turn", ev.Turn, "source", e.Source, "mode", e.Mode, "model", e.Model)
	case messages.EvInterrupt:
		log.Info("code_session_interrupt", "session", sid, "turn", ev.Turn)
	case messages.EvReleased:
		log.Info("code_session_released", "session", sid, "reason", e.ReleaseReason, "outcome", e.Outcome)
		if e.ReleaseReason == messages.ReleaseSweep {
			log.Info("code_session_scope_swept", "session", sid)
		}
	}
}

// logRejection writes the decision-log line of a rejected op.
func logRejection(log *slog.Logger, op string, err error) {
	if err == nil || messages.IsCode(err, messages.CodeInternal) || messages.IsCode(err, messages.CodeTimeout) {
		return
	}
	name := map[string]string{messages.OpStart: "code_session_start_rejected", messages.OpSetPosture: "code_session_posture_rejected"}[op]
	if name != "" {
		log.Warn(name, "err", messages.AsError(op, err).Message)
	}
}

// startLearningJob runs the nightly pass until the engine's runtime closes.
func startLearningJob(l *loop.Loop) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	go l.RunJob(ctx)
	return cancel
}
