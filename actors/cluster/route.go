package cluster

import (
	"context"
	"time"

	"github.com/codesession/codesession/messages"
)

func (n *Node) defaultBackend() string { return n.cfg.DefaultBackend }

// Do runs a session op on the node that holds the session: op is one of
// messages.OpReadTurn, OpAnswer, OpGuide, OpSetPosture, OpInterrupt,
// OpStop, OpResume; req its messages value; out points at its result. It
// returns the node that ran it. A blocking op (read-turn) waits on the
// owning node until ctx's deadline.
func (n *Node) Do(ctx context.Context, sid, op string, req, out any) (string, error) {
	node, local, err := n.ownerOf(ctx, sid, op)
	if err != nil {
		return "", err
	}
	if local {
		return n.cfg.NodeID, n.doLocal(ctx, op, req, out)
	}
	var wait time.Duration
	if dl, ok := ctx.Deadline(); ok && op == messages.OpReadTurn {
		wait = max(time.Millisecond, time.Until(dl))
	}
	return node, n.call(ctx, node, op, req, out, wait)
}

// doLocal runs op on this node's runtime through the same handler a call
// from another node takes.
func (n *Node) doLocal(ctx context.Context, op string, req, out any) error {
	h := handlers[op]
	if h == nil {
		return messages.Errorf(messages.CodeUnsupported, op, "not a session op")
	}
	body, err := messages.MarshalMsgpack(req)
	if err != nil {
		return err
	}
	res, err := h(ctx, n, n.scopeOf(ctx), body)
	if err != nil {
		return err
	}
	b, err := messages.MarshalMsgpack(res)
	if err != nil {
		return err
	}
	return messages.UnmarshalMsgpack(b, out)
}

// Get reads a session's record and a page of its events from the node
// that holds it.
func (n *Node) Get(ctx context.Context, sid string, afterSeq uint64, limit int) (SessionView, string, error) {
	var v SessionView
	node, local, err := n.ownerOf(ctx, sid, "get")
	if err != nil {
		return v, "", err
	}
	req := getRequest{SessionID: sid, AfterSeq: afterSeq, Limit: limit}
	if local {
		v, err = n.readSession(ctx, n.scopeOf(ctx), req)
		return v, n.cfg.NodeID, err
	}
	return v, node, n.call(ctx, node, opGet, req, &v, 0)
}

// Owner says which node holds sid ("" and local for this one).
func (n *Node) Owner(ctx context.Context, sid string) (node string, local bool, err error) {
	return n.ownerOf(ctx, sid, "route")
}
