package native_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/runtimetest"
	"github.com/codesession/codesession/messages"
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
	rig := runtimetest.New(t, "native-rounds", runtimetest.Config{
		Backend: native.New(native.WithProcessEnv(nil), native.WithMaxRounds(3)),
		Env: func(mock *modelmock.Server) map[string]string {
			return map[string]string{native.EnvAnthropicBaseURL: mock.URL(), native.EnvAnthropicAPIKey: "test-key"}
		},
		Scenario: sc,
		Timeout:  time.Minute,
	})
	sid := rig.StartWith(messages.Start{Brief: "loop over the files", Model: "claude-mock", MaxRounds: 1, InitialPosture: messages.PosturePlan})
	r := rig.Read(sid, messages.KindMaxRounds, false)
	assert.Contains(t, r.Text, "per-turn round cap")
	assert.Len(t, rig.Mock.MainRequests(), 3)
	_, err := rig.RT.Stop(rig.Ctx, rig.Scope, messages.Stop{SessionID: sid})
	require.NoError(t, err)
}
