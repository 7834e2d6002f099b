package droid_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/runtimetest"
	"github.com/codesession/codesession/transports/droid"
	"github.com/codesession/codesession/transports/droid/droidtest"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc/proctest"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// droidRuntime is a runtime whose one backend is tr, droid pointed at the
// mock by the user's HOME (the runtime's env) with droidtest's settings.
func droidRuntime(t *testing.T, scope string, tr *droid.Transport) *runtimetest.Rig {
	return runtimetest.New(t, scope, runtimetest.Config{
		Backend: tr,
		Env: func(mock *modelmock.Server) map[string]string {
			return map[string]string{"HOME": droidtest.Home(t, mock.URL())}
		},
	})
}

// TestRuntimeCloseKillsPooledDroids runs a droid session through
// actors.Runtime with a warm pool: after the first turn the pool boots a
// droid under the runtime's kit, and Runtime.Close leaves no droid
// process, pooled or not, and no record.
func TestRuntimeCloseKillsPooledDroids(t *testing.T) {
	t.Parallel()
	bin := subprocesstest.Find(t, droid.EnvBinary, "npm install droid@"+droid.PinnedVersion, "droid")
	rig := droidRuntime(t, "droid-pool", droid.New(droid.WithBinary(bin), droid.WithWarmPool(1)))
	_, r := rig.Turn("hello", droidtest.MockModelID)
	assert.Equal(t, "PONG(model=mock-model): hello", r.Text)

	require.Eventually(t, func() bool {
		for _, rec := range proctest.ByPgid(t, rig.KitDir()) {
			if strings.HasPrefix(rec.SessionID, "warm-") {
				return true
			}
		}
		return false
	}, 3*time.Minute, 50*time.Millisecond, "the first turn's end refilled the pool under the runtime's kit")
	// the pooled droid may still be booting: Close drains boots in flight too
	rig.CloseLeavesNothing(2) // the session's droid and the pooled one
}
