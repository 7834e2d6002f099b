package cluster

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/script"
)

// threeNodes starts a, b and c, each holding its own workspace root; c
// alone advertises the script backend besides a made-up one.
func threeNodes(t *testing.T) (nodes []*Node, roots []string) {
	base := t.TempDir()
	roots = []string{filepath.Join(base, "wa"), filepath.Join(base, "wb"), filepath.Join(base, "wc")}
	for _, r := range roots {
		require.NoError(t, mkdir(r))
	}
	sc := &script.Scenario{Turns: []script.Turn{
		{Steps: []script.Step{script.Text("turn one done")}},
		{Steps: []script.Step{script.Tool("Bash", map[string]any{"command": "ls"}, "ok").Asking(), script.Text("turn two done")}},
	}}
	nodes = startNodes(t, []spec{
		{id: "a", roots: roots[:1], backends: []string{"script"}},
		{id: "b", roots: roots[1:2], backends: []string{"codex"}},
		{id: "c", roots: roots[2:], backends: []string{"script", "grok"}, sc: sc},
	}, nil)
	return nodes, roots
}

func TestPlacementAndRoutingAcrossNodes(t *testing.T) {
	nodes, roots := threeNodes(t)
	a, b := nodes[0], nodes[1]
	ctx := ctxT(t)

	// placement by workspace: a start on a for c's root lands on c
	placed, err := a.Start(ctx, messages.Start{Brief: "do it", Cwd: roots[2]}, "")
	require.NoError(t, err)
	assert.Equal(t, "c", placed.Node)
	sid := placed.SessionID

	// placement by backend: b holds the root but not the script backend
	_, err = a.Start(ctx, messages.Start{Brief: "do it", Cwd: roots[1]}, "")
	require.Equal(t, messages.CodeInvalid, messages.ErrorCode(err), "%v", err)
	assert.Contains(t, err.Error(), `b has no available backend "script"`)
	// no node holds the cwd
	_, err = a.Start(ctx, messages.Start{Brief: "do it", Cwd: "/nowhere/at/all"}, "")
	require.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
	assert.Contains(t, err.Error(), "holds no workspace root containing /nowhere/at/all")
	// a named node that is not a member
	_, err = a.Start(ctx, messages.Start{Brief: "do it", Cwd: roots[2]}, "zz")
	require.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
	assert.Contains(t, err.Error(), `node "zz" is not a live member`)

	// a read-turn through b reaches the session on c
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	var res messages.TurnResult
	node, err := b.Do(rctx, sid, messages.OpReadTurn, messages.ReadTurn{SessionID: sid}, &res)
	cancel()
	require.NoError(t, err)
	assert.Equal(t, "c", node)
	require.Equal(t, messages.KindTurnComplete, res.Kind, "%+v", res)
	assert.Equal(t, "turn one done", res.Text)

	// guide through a, then the clarification is answered through b
	var ok messages.OKResult
	_, err = a.Do(ctx, sid, messages.OpGuide, messages.Guide{SessionID: sid, Text: "go on"}, &ok)
	require.NoError(t, err)
	rctx, cancel = context.WithTimeout(ctx, time.Minute)
	_, err = a.Do(rctx, sid, messages.OpReadTurn, messages.ReadTurn{SessionID: sid}, &res)
	cancel()
	require.NoError(t, err)
	require.Equal(t, messages.KindClarification, res.Kind, "%+v", res)
	var ans messages.AnswerResult
	_, err = b.Do(ctx, sid, messages.OpAnswer, messages.Answer{SessionID: sid, ClarificationID: res.ClarificationID, Decision: messages.DecisionAllowOnce}, &ans)
	require.NoError(t, err)
	assert.True(t, ans.OK)

	// stop through a, twice: the second is idempotent
	var st messages.StopResult
	_, err = a.Do(ctx, sid, messages.OpStop, messages.Stop{SessionID: sid, Outcome: messages.OutcomeSuccess}, &st)
	require.NoError(t, err)
	assert.False(t, st.AlreadyStopped)
	_, err = b.Do(ctx, sid, messages.OpStop, messages.Stop{SessionID: sid}, &st)
	require.NoError(t, err)
	assert.True(t, st.AlreadyStopped)

	// every node lists the session, on c
	for _, n := range nodes {
		recs, err := n.Sessions(ctx)
		require.NoError(t, err)
		require.Len(t, recs, 1, describe(n))
		assert.Equal(t, "c", recs[0].Node)
		assert.Equal(t, sid, recs[0].SessionID)
	}
	v, node, err := a.Get(ctx, sid, 0, 100)
	require.NoError(t, err)
	assert.Equal(t, "c", node)
	assert.NotEmpty(t, v.Events)
}

func TestIdempotentCallRunsOnce(t *testing.T) {
	nodes, roots := threeNodes(t)
	a := nodes[0]
	ctx := ctxT(t)
	op := messages.Start{Brief: "once", Cwd: roots[2]}
	body, err := messages.MarshalMsgpack(op)
	require.NoError(t, err)
	c := &Call{ID: newCallID(), From: "a", Op: messages.OpStart, Scope: "daemon", Body: body}
	// the callee gets the same call twice (a resend): it starts one session
	first, second := make(chan *Reply, 1), make(chan *Reply, 1)
	for _, ch := range []chan *Reply{first, second} {
		a.mu.Lock()
		a.pending[c.ID] = ch
		a.mu.Unlock()
		pid, err := a.reachable("c", messages.OpStart)
		require.NoError(t, err)
		require.NoError(t, a.wire.send(pid, c, a.self))
		select {
		case r := <-ch:
			require.Nil(t, r.Err)
		case <-ctx.Done():
			t.Fatal("no reply")
		}
	}
	recs, err := nodes[2].Sessions(ctx)
	require.NoError(t, err)
	assert.Len(t, recs, 1, "a resent start must not start a second session")
}

// TestLostNodeShowsOrphaned: when c stops answering gossip (its process
// is gone, no leave message), a and b mark it dead once its lease expires
// and show its live session orphaned; ops on it fail as unavailable.
func TestLostNodeShowsOrphaned(t *testing.T) {
	nodes, roots := threeNodes(t)
	a, b, c := nodes[0], nodes[1], nodes[2]
	ctx := ctxT(t)
	placed, err := a.Start(ctx, messages.Start{Brief: "long", Cwd: roots[2]}, "")
	require.NoError(t, err)
	require.Equal(t, "c", placed.Node)
	// b learns of it from c's feed (a listing asks no node)
	require.Eventually(t, func() bool {
		recs, err := b.Sessions(ctx)
		return err == nil && len(recs) == 1 && recs[0].Status.Live()
	}, deadline, 20*time.Millisecond, "b never listed c's session")

	c.crash()
	for _, n := range []*Node{a, b} {
		require.Eventually(t, func() bool {
			recs, err := n.Sessions(ctx)
			return err == nil && len(recs) == 1 && recs[0].Status == messages.StatusOrphaned && recs[0].Node == "c"
		}, deadline, 100*time.Millisecond, "%s never showed c's session orphaned", n.ID())
	}
	var st messages.StopResult
	_, err = a.Do(ctx, placed.SessionID, messages.OpStop, messages.Stop{SessionID: placed.SessionID}, &st)
	assert.Equal(t, messages.CodeUnavailable, messages.ErrorCode(err), "%v", err)
	assert.Contains(t, err.Error(), "lease expired")
}
