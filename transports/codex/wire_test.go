package codex

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// TestDecodeWire: the kit's decoder turns a response into the Reply of the
// request with that id (a JSON-RPC error into a refusal), hands
// notifications and server requests to the core, and says why a line
// cannot be read.
func TestDecodeWire(t *testing.T) {
	ok := decodeWire([]byte(`{"id":7,"result":{"turn":{"id":"t1"}}}`))
	require.Len(t, ok, 1)
	require.NotNil(t, ok[0].Reply)
	assert.Equal(t, "7", ok[0].Reply.ID, "the id the session minted (a JSON number) matches")
	assert.JSONEq(t, `{"turn":{"id":"t1"}}`, string(ok[0].Reply.Result))
	assert.False(t, ok[0].Reply.Refused)

	refused := decodeWire([]byte(`{"id":8,"error":{"code":-32600,"message":"no active turn"}}`))
	require.Len(t, refused, 1)
	require.NotNil(t, refused[0].Reply)
	assert.True(t, refused[0].Reply.Refused)
	assert.Contains(t, refused[0].Reply.Message, "no active turn")
	assert.Equal(t, messages.CodeInternal, refused[0].Reply.Code)

	str := decodeWire([]byte(`{"id":"7","result":{}}`))
	require.NotNil(t, str[0].Reply)
	assert.NotEqual(t, "7", str[0].Reply.ID, "a string id is not the number the session sent")

	for _, line := range []string{`{"method":"turn/started","params":{"turn":{"id":"t1"}}}`, `{"id":0,"method":"item/commandExecution/requestApproval","params":{}}`} {
		evs := decodeWire([]byte(line))
		require.Len(t, evs, 1, line)
		assert.Nil(t, evs[0].Reply, line)
		require.NotNil(t, evs[0].Msg, line)
	}

	bad := decodeWire([]byte(`not json`))
	require.Len(t, bad, 1)
	assert.Error(t, bad[0].Err)
}

// TestInterruptRequest: before Codex named the running turn there is no
// turn/interrupt to send (the kit signals at once); after, it names the
// thread and the turn with the id the kit gives it.
func TestInterruptRequest(t *testing.T) {
	c := newCore(coreConfig{outputCap: 100})
	c.thread = "th1"
	c.beginTurn(1)
	_, ok := c.InterruptRequest()
	assert.False(t, ok, "no turn id yet")
	c.turnStarted("t1")
	encode, ok := c.InterruptRequest()
	require.True(t, ok)
	var req struct {
		ID     int               `json:"id"`
		Method string            `json:"method"`
		Params map[string]string `json:"params"`
	}
	require.NoError(t, json.Unmarshal(encode("12"), &req))
	assert.Equal(t, 12, req.ID)
	assert.Equal(t, "turn/interrupt", req.Method)
	assert.Equal(t, map[string]string{"threadId": "th1", "turnId": "t1"}, req.Params)
}

// TestDenyReasonSteersFirst: a deny with a reason is a Followup: turn/steer
// of the reason into the running turn, and only then the decline, which
// cannot carry it; without a reason the decline is written at once.
func TestDenyReasonSteersFirst(t *testing.T) {
	c := newCore(coreConfig{outputCap: 100})
	c.thread = "th1"
	c.beginTurn(1)
	c.turnStarted("t1")
	ask := func() string {
		req, _ := parseMessage([]byte(`{"id":5,"method":"item/commandExecution/requestApproval","params":{"turnId":"t1","command":"rm -rf /"}}`))
		fx := c.handle(req)
		require.Len(t, fx.Events, 1)
		return fx.Events[0].Ev.ClarificationID
	}
	fx, err := c.answer(ask(), messages.DecisionDeny, "not that")
	require.NoError(t, err)
	assert.Empty(t, fx.Writes, "the decline waits for the steer")
	require.Len(t, fx.Followups, 1)
	f := fx.Followups[0]
	var steer struct {
		Method string `json:"method"`
		Params struct {
			ThreadID       string `json:"threadId"`
			ExpectedTurnID string `json:"expectedTurnId"`
			Input          []struct {
				Text string `json:"text"`
			} `json:"input"`
		} `json:"params"`
	}
	require.NoError(t, json.Unmarshal(f.Encode("3"), &steer))
	assert.Equal(t, "turn/steer", steer.Method)
	assert.Equal(t, "th1", steer.Params.ThreadID)
	assert.Equal(t, "t1", steer.Params.ExpectedTurnID)
	require.Len(t, steer.Params.Input, 1)
	assert.Equal(t, DenyPrefix+"not that", steer.Params.Input[0].Text)
	require.Len(t, f.Then, 1)
	assert.JSONEq(t, `{"id":5,"result":{"decision":"decline"}}`, string(f.Then[0]))

	fx, err = c.answer(ask(), messages.DecisionDeny, "")
	require.NoError(t, err)
	assert.Empty(t, fx.Followups)
	require.Len(t, fx.Writes, 1)
	assert.JSONEq(t, `{"id":5,"result":{"decision":"decline"}}`, string(fx.Writes[0]))
}
