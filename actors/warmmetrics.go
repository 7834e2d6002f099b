package actors

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/codesession/codesession/transports"
)

// warmPoolDesc is the gauge of what each backend's warm pool holds idle,
// by state: ready (settled) or settling (booted, still working on its
// own after its handshake).
var warmPoolDesc = prometheus.NewDesc("code_session_warm_pool_idle", warmPoolHelp, []string{"backend", "state"}, nil)

const warmPoolHelp = "Pooled agent processes idle in each backend's warm pool, by state (ready: settled; settling: booted, still busy after its handshake). A transport's pool serves every runtime that uses it."

// warmPoolCollector reads the pools at each scrape, so the gauge never
// lags what a start would find.
type warmPoolCollector struct{ backends *transports.Registry }

func (c warmPoolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- warmPoolDesc }

func (c warmPoolCollector) Collect(ch chan<- prometheus.Metric) {
	for _, id := range c.backends.IDs() {
		t, err := c.backends.Get(id)
		if err != nil {
			continue
		}
		w, ok := transports.Innermost(t).(transports.WarmCounter)
		if !ok {
			continue
		}
		// two reads, not one snapshot: a process that settles or is
		// taken between them can be counted in the state it just left;
		// settling never goes below zero
		ready := w.WarmReady()
		settling := max(w.WarmBooted()-ready, 0)
		ch <- prometheus.MustNewConstMetric(warmPoolDesc, prometheus.GaugeValue, float64(ready), id, "ready")
		ch <- prometheus.MustNewConstMetric(warmPoolDesc, prometheus.GaugeValue, float64(settling), id, "settling")
	}
}
