package native_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/native"
)

// TestRuntimeStopsALoopingModelAtMaxRounds drives native through
// actors.Runtime with a model that calls tools forever: the turn stops at
// the backend's per-turn round cap, and the session, started with
// maxRounds 1, answers read-turn with max_rounds, a clean stop.
func TestRuntimeStopsALoopingModelAtMaxRounds(t *testing.T) {
	t.Parallel()
	ls := &modelmock.ToolCall{Name: native.ToolLs, Input: json.RawMessage(`{}`)}
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "loop"}, Steps: []modelmock.Step{{Tool: ls}}}},
		ToolResultDefault: &modelmock.Step{Tool: ls}}
	mock, err := modelmock.Start(t, sc)
	require.NoError(t, err)

	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = native.ID
	cfg.Env = map[string]string{native.EnvAnthropicBaseURL: mock.URL(), native.EnvAnthropicAPIKey: "test-key"}
	rt, err := actors.New(cfg, actors.WithBackends(transports.NewRegistry(
		native.New(native.WithProcessEnv(nil), native.WithMaxRounds(3)))))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, rt.Close(ctx))
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const scope = "native-rounds"
	st, err := rt.Start(ctx, scope, messages.Start{Brief: "loop over the files", Cwd: t.TempDir(), Model: "claude-mock",
		MaxRounds: 1, InitialPosture: messages.PosturePlan})
	require.NoError(t, err)
	r, err := rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: st.SessionID})
	require.NoError(t, err)
	assert.Equal(t, messages.KindMaxRounds, r.Kind, "%+v", r)
	assert.Contains(t, r.Text, "per-turn round cap")
	assert.Len(t, mock.MainRequests(), 3)
	_, err = rt.Stop(ctx, scope, messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
}
