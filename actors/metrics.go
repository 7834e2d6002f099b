package actors

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the runtime's Prometheus families (seed 000 §8 plus runtime
// ones), registered into an injected registry, never the global one.
type Metrics struct {
	ops            *prometheus.CounterVec
	started        *prometheus.CounterVec
	startRejected  prometheus.Counter
	readTurn       *prometheus.CounterVec
	answers        *prometheus.CounterVec
	postureChanges *prometheus.CounterVec
	released       *prometheus.CounterVec
	rounds         prometheus.Histogram
	duration       prometheus.Histogram
	live           prometheus.Gauge
	restarts       *prometheus.CounterVec
	appendLatency  prometheus.Histogram
	persistErrors  prometheus.Counter
	diffFailures   prometheus.Counter
	abandoned      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_session_ops_total",
			Help: "Ops handled, by op and outcome (ok, rejected, error)."}, []string{"op", "outcome"}),
		started: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_session_started_total",
			Help: "Sessions started, by backend."}, []string{"backend"}),
		startRejected: prometheus.NewCounter(prometheus.CounterOpts{Name: "code_session_start_rejected_total",
			Help: "Starts rejected by validation or scope constraints."}),
		readTurn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_session_read_turn_total",
			Help: "Read-turn results delivered, by kind."}, []string{"kind"}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_session_clarification_answers_total",
			Help: "Clarification answers, by whether they allowed the call."}, []string{"allow"}),
		postureChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_session_posture_changes_total",
			Help: "Posture changes, by outcome (ok, rejected)."}, []string{"outcome"}),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_session_released_total",
			Help: "Sessions released, by reason."}, []string{"reason"}),
		rounds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "code_session_rounds",
			Help: "Rounds per session at release.", Buckets: []float64{1, 2, 3, 5, 8, 13, 21, 34, 55}}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "code_session_duration_ms",
			Help: "Session duration at release, in milliseconds.", Buckets: prometheus.ExponentialBuckets(100, 4, 10)}),
		live: prometheus.NewGauge(prometheus.GaugeOpts{Name: "code_session_live",
			Help: "Sessions currently live in this runtime."}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_session_supervision_restarts_total",
			Help: "Session children restarted by supervision, by child."}, []string{"child"}),
		appendLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "code_session_store_append_seconds",
			Help: "Latency of durable event appends.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9)}),
		persistErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "code_session_persist_errors_total",
			Help: "Store writes that failed (the session goes on; the event is reported)."}),
		diffFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "code_session_diff_capture_failures_total",
			Help: "Turn diffs that could not be captured (source none with a warning; the turn goes on)."}),
		abandoned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_session_children_abandoned_total",
			Help: "Session children (a backend that would not close) abandoned at their stop deadline, by child."}, []string{"child"}),
	}
	if reg != nil {
		reg.MustRegister(m.ops, m.started, m.startRejected, m.readTurn, m.answers, m.postureChanges, m.released,
			m.rounds, m.duration, m.live, m.restarts, m.appendLatency, m.persistErrors, m.diffFailures,
			m.abandoned)
	}
	return m
}
