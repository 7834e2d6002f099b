package controlplane

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/codesession/codesession/messages"
)

// bridgeMetrics are the live feed's families. (The frozen
// code_specialist_* families count driver delegations: actors/driver
// emits them, one meaning each, seed 000 §8.)
type bridgeMetrics struct {
	subscribers prometheus.Gauge
	dropped     prometheus.Counter
}

func newBridgeMetrics(reg prometheus.Registerer) *bridgeMetrics {
	m := &bridgeMetrics{
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "code_session_sse_subscribers",
			Help: "Live-feed (SSE) subscribers connected now."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "code_session_sse_dropped_total",
			Help: "Live-feed subscribers dropped for being slow: their queue was full (they are told to reconnect) or a write timed out."}),
	}
	if reg != nil {
		reg.MustRegister(m.subscribers, m.dropped)
	}
	return m
}

// serverMetrics are the HTTP side's families.
type serverMetrics struct {
	requests  *prometheus.CounterVec
	available *prometheus.GaugeVec
}

func newServerMetrics(reg prometheus.Registerer) *serverMetrics {
	m := &serverMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_session_http_requests_total",
			Help: "Control-plane requests, by route and status code."}, []string{"route", "code"}),
		available: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "code_session_backend_available",
			Help: "The last probe of each backend: 1 available, 0 not."}, []string{"backend"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.available)
	}
	return m
}

func (m *serverMetrics) request(route string, code int) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
}

func (m *serverMetrics) probed(res messages.ListBackendsResult) {
	for _, b := range res.Backends {
		v := 0.0
		if b.Availability.Available {
			v = 1
		}
		m.available.WithLabelValues(b.Descriptor.ID).Set(v)
	}
}
