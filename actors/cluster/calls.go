package cluster

import (
	"context"
	"time"

	"github.com/codesession/codesession/messages"
)

// Ops that cross the wire besides the runtime's own (messages.Op*).
const (
	opPing = "ping"
	opList = "list"
	opGet  = "get"
	// opRecord reads one session's record (the directory's refresh of a
	// session whose feed said it changed).
	opRecord = "record"
)

// resendAfter is how long a caller waits for a reply before it sends the
// call again under the same id (delivery is at most once; the callee runs
// an id once).
const resendAfter = 5 * time.Second

// call runs op on node and decodes the reply into out. wait bounds a
// blocking op on the callee (read-turn); 0 for the others.
func (n *Node) call(ctx context.Context, node, op string, req, out any, wait time.Duration) error {
	body, err := messages.MarshalMsgpack(req)
	if err != nil {
		return err
	}
	c := &Call{ID: newCallID(), From: n.cfg.NodeID, Op: op, Scope: n.scopeOf(ctx), WaitMs: wait.Milliseconds(), Body: body}
	ch := make(chan *Reply, 1)
	n.mu.Lock()
	n.pending[c.ID] = ch
	n.calls[op]++
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.pending, c.ID)
		n.mu.Unlock()
	}()
	for {
		p, err := n.reachable(node, op)
		if err != nil {
			return err
		}
		if err := n.sendProbed(ctx, p, c); err != nil {
			return err
		}
		t := time.NewTimer(resendAfter + wait)
		select {
		case r := <-ch:
			t.Stop()
			if r.Err != nil {
				return r.Err
			}
			if out == nil {
				return nil
			}
			return messages.UnmarshalMsgpack(r.Body, out)
		case <-ctx.Done():
			t.Stop()
			return ctxErr(ctx, op, node)
		case <-t.C:
			n.log.Debug("cluster: no reply yet; resending", "to", node, "op", op, "id", c.ID)
		}
	}
}

func ctxErr(ctx context.Context, op, node string) error {
	return messages.Wrap(messages.CodeTimeout, op, ctx.Err(), "node "+node+" did not answer in time")
}

// deliver hands a reply to the call waiting for it; a reply nobody waits
// for (a resend answered twice, a call given up) is dropped.
func (n *Node) deliver(r *Reply) {
	n.mu.Lock()
	ch := n.pending[r.ID]
	n.mu.Unlock()
	if ch == nil {
		if r.Err != nil && r.ID == "" {
			n.log.Warn("cluster: a node could not read our message", "node", r.Node, "err", r.Err)
		}
		return
	}
	select {
	case ch <- r:
	default: // an earlier copy already answered
	}
}
