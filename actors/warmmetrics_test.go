package actors

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// pooledStub is a backend whose pool holds what the test says.
type pooledStub struct {
	booted, ready int
}

func (p *pooledStub) Descriptor() transports.Descriptor {
	return transports.Descriptor{ID: "pooled-stub"}
}
func (p *pooledStub) Probe(context.Context) messages.Availability {
	return messages.Availability{}
}
func (p *pooledStub) Open(context.Context, transports.SessionSpec, transports.Sink) (transports.Session, error) {
	return nil, context.Canceled
}
func (p *pooledStub) WarmBooted() int { return p.booted }
func (p *pooledStub) WarmReady() int  { return p.ready }

// The gauge shows each pooled backend's idle processes by state, read at
// the scrape; a backend without a pool has no series.
func TestWarmPoolGauge(t *testing.T) {
	stub := &pooledStub{booted: 3, ready: 1}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(warmPoolCollector{backends: transports.NewRegistry(stub, script.New())})
	want := func(ready, settling string) string {
		return `# HELP code_session_warm_pool_idle ` + warmPoolHelp + `
# TYPE code_session_warm_pool_idle gauge
code_session_warm_pool_idle{backend="pooled-stub",state="ready"} ` + ready + `
code_session_warm_pool_idle{backend="pooled-stub",state="settling"} ` + settling + `
`
	}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want("1", "2")), "code_session_warm_pool_idle"))
	stub.booted, stub.ready = 1, 1
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want("1", "0")), "code_session_warm_pool_idle"))
	// taken between the two reads: settling is never negative
	stub.booted, stub.ready = 0, 1
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want("1", "0")), "code_session_warm_pool_idle"))
}

// A runtime with metrics registers the gauge over its backends.
func TestRuntimeRegistersTheWarmPoolGauge(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	stub := &pooledStub{booted: 2, ready: 2}
	newRuntime(t, testConfig(t), &script.Scenario{}, WithMetrics(reg), WithBackends(transports.NewRegistry(script.New(), stub)))
	n, err := testutil.GatherAndCount(reg, "code_session_warm_pool_idle")
	require.NoError(t, err)
	require.Equal(t, 2, n, "the stub's two states; script has no pool")
}
