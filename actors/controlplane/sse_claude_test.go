package controlplane

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// claudeBinary finds the real claude CLI ($CODESESSION_CLAUDE_BIN, else
// PATH): skip without it, except under CI=true, where it fails.
func claudeBinary(t *testing.T) string {
	t.Helper()
	return subprocesstest.Find(t, claudecode.EnvBinary, "npm install @anthropic-ai/claude-code@"+claudecode.PinnedVersion, "claude")
}

// The claude-code variant of TestSSECoalescedDeltasCarryTheWholeText: the
// real CLI streams its partial messages, and a live subscriber rebuilds
// exactly the text the store persisted from the deltas it received.
func TestSSEClaudeLiveDeltasCarryTheWholeText(t *testing.T) {
	bin := claudeBinary(t)
	text := "The live feed must carry every word of this answer, streamed in pieces as the model writes it."
	mock, err := modelmock.Start(t, &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "STREAM"},
		Steps: []modelmock.Step{{Text: text, Chunks: 12}}}}})
	require.NoError(t, err)
	f := newFixture(t, func(o *DaemonOptions) {
		o.Backends = transports.NewRegistry(claudecode.New(claudecode.WithBinary(bin)))
		o.Config.DefaultBackend = claudecode.ID
		o.Config.Env = map[string]string{"ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-ant-test", "HOME": t.TempDir()}
	})
	c := f.sse("topics="+TopicEvent, "")
	require.Equal(t, http.StatusOK, c.status)
	var st messages.StartResult
	f.ok("POST", "/api/code-sessions", map[string]any{"brief": "STREAM please", "cwd": f.cwd, "backend": claudecode.ID, "agentModel": "claude-mock-1"}, &st)
	var live []EventData
	for {
		ev, ok := c.next(3 * time.Minute) // a claude boot on a loaded machine
		require.True(t, ok, "the stream ended or stalled; got %d events", len(live))
		if ev.event != TopicEvent {
			continue
		}
		d := ev.eventData(t)
		if d.SessionID != st.SessionID {
			continue
		}
		live = append(live, d)
		if d.Event.Type == messages.EvTurnEnd {
			break
		}
	}
	end := live[len(live)-1].Seq
	waitFor(t, "the turn to be durable", func() bool {
		evs := f.storeEvents(st.SessionID)
		return len(evs) > 0 && evs[len(evs)-1].Seq >= end
	})
	var storedDeltas int
	var storedText, liveText strings.Builder
	for _, ev := range f.storeEvents(st.SessionID) {
		if ev.Event.Type == messages.EvText && ev.Event.Delta {
			storedDeltas++
			storedText.WriteString(ev.Event.Text)
		}
	}
	for _, d := range live {
		if d.Event.Type == messages.EvText && d.Event.Delta {
			liveText.WriteString(d.Event.Text)
		}
	}
	require.GreaterOrEqual(t, storedDeltas, 2, "claude streamed the text in pieces (partial messages are on)")
	assert.Equal(t, text, storedText.String(), "the stored deltas add up to the model's text")
	assert.Equal(t, storedText.String(), liveText.String(), "the live subscriber rebuilt exactly the persisted text")
	f.ok("POST", "/api/code-sessions/"+st.SessionID+"/stop", "", nil)
}
