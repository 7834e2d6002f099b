package claudecode_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/codesession/codesession/actors/runtimetest"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// TestTwentyConcurrentStartsBesideACPUHog: twenty claude-code sessions
// started at once on a small machine, with a busy loop on every core, all
// reach turn_complete. Before the boot queue and the start-bounded
// initialize, 14 of 20 failed with "claude did not answer the initialize
// request in time". The only deadline is one that stops a hang.
func TestTwentyConcurrentStartsBesideACPUHog(t *testing.T) {
	if testing.Short() {
		t.Skip("twenty real CLIs: not in -short")
	}
	bin := claudecode.ClaudeBinaryForTest(t)
	rig := runtimetest.New(t, "hog", runtimetest.Config{
		Backend: claudecode.New(claudecode.WithBinary(bin)),
		Env: func(mock *modelmock.Server) map[string]string {
			return map[string]string{"ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-ant-test"}
		},
		// the runtime bounds a backend's Open by a multiple of this; keep it
		// far above what a loaded machine needs (it only stops a hang)
		Prepare: func(cfg *config.Config) { cfg.Supervision.ShutdownTimeout = config.Duration(2 * time.Minute) },
		Timeout: 15 * time.Minute, // only stops a hang
	})
	rt, ctx := rig.RT, rig.Ctx

	subprocesstest.BusyEveryCore(t)

	const n = 20
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scope := "hog-" + string(rune('a'+i))
			st, err := rt.Start(ctx, scope, messages.Start{Brief: "say pong", Cwd: t.TempDir()})
			if err != nil {
				results[i] = err
				return
			}
			r, err := rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: st.SessionID})
			switch {
			case err != nil:
				results[i] = err
			case r.Kind != messages.KindTurnComplete:
				results[i] = &messages.Error{Code: messages.CodeInternal, Message: "session " + st.SessionID + " read " + string(r.Kind) + ": " + r.Text + r.Message}
			}
			if _, err := rt.Stop(ctx, scope, messages.Stop{SessionID: st.SessionID, Outcome: messages.OutcomeSuccess}); err != nil && results[i] == nil {
				results[i] = err
			}
		}()
	}
	wg.Wait()
	for i, err := range results {
		assert.NoError(t, err, "session %d", i)
	}
}
