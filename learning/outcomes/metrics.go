package outcomes

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the settle families of seed 000 §8: code_session_settled_total
// and code_session_settle_duration_ms, and the frozen code_specialist_*
// names kept for dashboard continuity, all labelled by backend.
type Metrics struct {
	settled          *prometheus.CounterVec
	settleDuration   *prometheus.HistogramVec
	dispatched       *prometheus.CounterVec
	specialistSettle *prometheus.CounterVec
	specialistDur    *prometheus.HistogramVec
	specialistRounds *prometheus.HistogramVec
}

// NewMetrics builds the families and registers them into reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	durBuckets := prometheus.ExponentialBuckets(100, 4, 10)
	roundBuckets := []float64{1, 2, 3, 5, 8, 13, 21, 34, 55}
	m := &Metrics{
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_session_settled_total",
			Help: "Session runs settled with an outcome record, by backend and outcome."}, []string{"backend", "outcome"}),
		settleDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "code_session_settle_duration_ms",
			Help: "Duration of settled session runs, in milliseconds.", Buckets: durBuckets}, []string{"backend"}),
		dispatched: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_specialist_dispatched_total",
			Help: "Frozen legacy name: session runs dispatched, by backend."}, []string{"backend"}),
		specialistSettle: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_specialist_settled_total",
			Help: "Frozen legacy name: session runs settled, by backend and state (the outcome)."}, []string{"backend", "state"}),
		specialistDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "code_specialist_duration_ms",
			Help: "Frozen legacy name: settled run duration, in milliseconds.", Buckets: durBuckets}, []string{"backend"}),
		specialistRounds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "code_specialist_rounds",
			Help: "Frozen legacy name: rounds per settled run.", Buckets: roundBuckets}, []string{"backend"}),
	}
	if reg != nil {
		reg.MustRegister(m.settled, m.settleDuration)
		// The frozen families may already be fed by another owner of the
		// same registry (the daemon's bridge); then that owner keeps them.
		for _, c := range []prometheus.Collector{m.dispatched, m.specialistSettle, m.specialistDur, m.specialistRounds} {
			_ = reg.Register(c)
		}
	}
	return m
}

func (m *Metrics) dispatch(backend string) {
	if m != nil {
		m.dispatched.WithLabelValues(backend).Inc()
	}
}

func (m *Metrics) settle(r Record) {
	if m == nil {
		return
	}
	m.settled.WithLabelValues(r.BackendID, string(r.Outcome)).Inc()
	m.settleDuration.WithLabelValues(r.BackendID).Observe(float64(r.DurationMs))
	m.specialistSettle.WithLabelValues(r.BackendID, string(r.Outcome)).Inc()
	m.specialistDur.WithLabelValues(r.BackendID).Observe(float64(r.DurationMs))
	m.specialistRounds.WithLabelValues(r.BackendID).Observe(float64(r.Rounds))
}
