package driver

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the frozen code_specialist_* families of seed 000 §8, with
// one meaning each: a DELEGATION (a driver dispatch) is dispatched and
// settles; they are labelled by the driven backend the delegation pins
// ("any" when it pins none: the driver picks per session).
//
//	code_specialist_dispatched_total{backend}       delegations dispatched
//	code_specialist_settled_total{backend,state}    delegations settled: done, failed, cancelled
//	code_specialist_duration_ms{backend}            dispatch to settle
//	code_specialist_rounds{backend}                 rounds the driven sessions ran, summed
type Metrics struct {
	dispatched *prometheus.CounterVec
	settled    *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	rounds     *prometheus.HistogramVec
}

// NewMetrics builds the families and registers them into reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		dispatched: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_specialist_dispatched_total",
			Help: "Driver delegations dispatched, by driven backend. Frozen legacy name."}, []string{"backend"}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_specialist_settled_total",
			Help: "Driver delegations settled, by driven backend and state (done, failed, cancelled). Frozen legacy name."}, []string{"backend", "state"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "code_specialist_duration_ms",
			Help:    "Driver delegation duration from dispatch to settle, in milliseconds. Frozen legacy name.",
			Buckets: prometheus.ExponentialBuckets(100, 4, 10)}, []string{"backend"}),
		rounds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "code_specialist_rounds",
			Help:    "Rounds the sessions of a settled delegation ran, summed. Frozen legacy name.",
			Buckets: []float64{0, 1, 2, 3, 5, 8, 13, 21, 34, 55}}, []string{"backend"}),
	}
	if reg != nil {
		reg.MustRegister(m.dispatched, m.settled, m.duration, m.rounds)
	}
	return m
}

func (m *Metrics) dispatch(backend string) {
	if m != nil {
		m.dispatched.WithLabelValues(backend).Inc()
	}
}

func (m *Metrics) settle(backend string, state State, ms float64, rounds int) {
	if m == nil {
		return
	}
	m.settled.WithLabelValues(backend, string(state)).Inc()
	m.duration.WithLabelValues(backend).Observe(ms)
	m.rounds.WithLabelValues(backend).Observe(float64(rounds))
}

// Dispatched is the dispatch counter of backend (tests read it).
func (m *Metrics) Dispatched(backend string) prometheus.Counter {
	return m.dispatched.WithLabelValues(backend)
}

// Settled is the settle counter of backend and state (tests read it).
func (m *Metrics) Settled(backend string, state State) prometheus.Counter {
	return m.settled.WithLabelValues(backend, string(state))
}
