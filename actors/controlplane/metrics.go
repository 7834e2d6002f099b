package controlplane

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/codesession/codesession/messages"
)

// bridgeMetrics are the live feed's families and the frozen
// code_specialist_* families of seed 000 §8, fed from the runtime events
// the bridge sees: a run is dispatched at its first event and settles at
// its released event (state from the release reason, exactly as the record
// gets it: failed, orphaned on shutdown, else ended), its rounds are its
// turn_diff events and its duration runs from its first event to its
// release. The backend label comes from the session's record (the bridge
// reads it for code_session_changed); counts wait for it when needed. Its
// state is guarded by the bridge's mutex.
type bridgeMetrics struct {
	subscribers prometheus.Gauge
	dropped     prometheus.Counter

	dispatched *prometheus.CounterVec
	settled    *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	rounds     *prometheus.HistogramVec

	runs    map[string]*runTrack // live runs by session
	backend map[string]string    // learned from records
	owed    map[string]*owedCounts
}

// runTrack follows one run of a session from its first event to its release.
type runTrack struct {
	start  time.Time
	rounds int
}

// settle is one run's settle, counted once its backend is known.
type settle struct {
	state  string
	ms     float64
	rounds int
}

type owedCounts struct {
	dispatched int
	settles    []settle
}

func newBridgeMetrics(reg prometheus.Registerer) *bridgeMetrics {
	m := &bridgeMetrics{
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "code_session_sse_subscribers",
			Help: "Live-feed (SSE) subscribers connected now."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "code_session_sse_dropped_total",
			Help: "Live-feed subscribers dropped for being slow: their queue was full (they are told to reconnect) or a write timed out."}),
		dispatched: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_specialist_dispatched_total",
			Help: "Runs dispatched (a session started or resumed), by backend. Frozen legacy name."}, []string{"backend"}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "code_specialist_settled_total",
			Help: "Runs settled, by backend and final state (ended, failed, orphaned). Frozen legacy name."}, []string{"backend", "state"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "code_specialist_duration_ms",
			Help:    "Run duration from its first event to its release, in milliseconds, by backend. Frozen legacy name.",
			Buckets: prometheus.ExponentialBuckets(100, 4, 10)}, []string{"backend"}),
		rounds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "code_specialist_rounds",
			Help:    "Rounds a run completed, by backend. Frozen legacy name.",
			Buckets: []float64{0, 1, 2, 3, 5, 8, 13, 21, 34, 55}}, []string{"backend"}),
		runs: map[string]*runTrack{}, backend: map[string]string{}, owed: map[string]*owedCounts{},
	}
	if reg != nil {
		reg.MustRegister(m.subscribers, m.dropped, m.dispatched, m.settled, m.duration, m.rounds)
	}
	return m
}

// event follows runs: the first event of a run dispatches it, turn_diff
// counts a round, released settles it.
func (m *bridgeMetrics) event(sid string, ev messages.PersistedEvent) {
	if ev.Event.Type == messages.EvOrphaned {
		return // written by the orphan sweep for a run of a dead process
	}
	tr := m.runs[sid]
	if ev.Event.Type == messages.EvReleased {
		if tr == nil {
			return
		}
		delete(m.runs, sid)
		s := settle{state: string(messages.StatusEnded), rounds: tr.rounds,
			ms: float64(max(ev.At.Sub(tr.start), 0).Milliseconds())}
		switch ev.Event.ReleaseReason {
		case messages.ReleaseFailed:
			s.state = string(messages.StatusFailed)
		case messages.ReleaseShutdown:
			s.state = string(messages.StatusOrphaned)
		}
		m.owe(sid).settles = append(m.owe(sid).settles, s)
		m.pay(sid)
		return
	}
	if tr == nil {
		tr = &runTrack{start: ev.At}
		m.runs[sid] = tr
		m.owe(sid).dispatched++
		m.pay(sid)
	}
	if ev.Event.Type == messages.EvTurnDiff {
		tr.rounds++
	}
}

// record learns a session's backend and counts what waited for it.
func (m *bridgeMetrics) record(rec messages.SessionRecord) {
	if rec.BackendID == "" {
		return
	}
	m.backend[rec.SessionID] = rec.BackendID
	m.pay(rec.SessionID)
}

func (m *bridgeMetrics) owe(sid string) *owedCounts {
	o := m.owed[sid]
	if o == nil {
		o = &owedCounts{}
		m.owed[sid] = o
	}
	return o
}

// pay counts what sid owes once its backend is known; a settled session
// with nothing live forgets its backend (a resume learns it again).
func (m *bridgeMetrics) pay(sid string) {
	backend, ok := m.backend[sid]
	if !ok {
		return
	}
	if o := m.owed[sid]; o != nil {
		m.dispatched.WithLabelValues(backend).Add(float64(o.dispatched))
		for _, s := range o.settles {
			m.settled.WithLabelValues(backend, s.state).Inc()
			m.duration.WithLabelValues(backend).Observe(s.ms)
			m.rounds.WithLabelValues(backend).Observe(float64(s.rounds))
		}
		delete(m.owed, sid)
	}
	if m.runs[sid] == nil {
		delete(m.backend, sid)
	}
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
