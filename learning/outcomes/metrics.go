package outcomes

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the session settle families of seed 000 §8:
// code_session_settled_total{backend,outcome} and
// code_session_settle_duration_ms, labelled by backend. The frozen
// code_specialist_* names count delegations (driver dispatches), not
// session runs: actors/driver emits them.
type Metrics struct {
	settled        *prometheus.CounterVec
	settleDuration *prometheus.HistogramVec
}

// NewMetrics builds the families and registers them into reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	durBuckets := prometheus.ExponentialBuckets(100, 4, 10)
	m := &Metrics{
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_session_settled_total",
			Help: "Session runs settled with an outcome record, by backend and outcome."}, []string{"backend", "outcome"}),
		settleDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "code_session_settle_duration_ms",
			Help: "Duration of settled session runs, in milliseconds.", Buckets: durBuckets}, []string{"backend"}),
	}
	if reg != nil {
		reg.MustRegister(m.settled, m.settleDuration)
	}
	return m
}

func (m *Metrics) settle(r Record) {
	if m == nil {
		return
	}
	m.settled.WithLabelValues(r.BackendID, string(r.Outcome)).Inc()
	m.settleDuration.WithLabelValues(r.BackendID).Observe(float64(r.DurationMs))
}
