package cluster

import (
	"context"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/messages"
)

// Bounds of a call on the callee.
const (
	callTimeout = time.Minute
	maxWait     = 5 * time.Minute
)

// SessionView is a session's record and a page of its events (opGet).
type SessionView struct {
	Record  messages.SessionRecord    `msgpack:"record" json:"record"`
	Events  []messages.PersistedEvent `msgpack:"events" json:"events"`
	LastSeq uint64                    `msgpack:"lastSeq" json:"lastSeq"`
}

// getRequest asks for a session's record and events after AfterSeq.
type getRequest struct {
	SessionID string `msgpack:"sessionId"`
	AfterSeq  uint64 `msgpack:"afterSeq"`
	Limit     int    `msgpack:"limit"`
}

// handler serves one op on the node under the caller's scope.
type handler func(ctx context.Context, n *Node, scope string, body []byte) (any, error)

// runtimeOp adapts one of the runtime's op methods to a handler.
func runtimeOp[Req, Res any](m func(*actors.Runtime, context.Context, string, Req) (Res, error)) handler {
	return func(ctx context.Context, n *Node, scope string, body []byte) (any, error) {
		var req Req
		if err := messages.UnmarshalMsgpack(body, &req); err != nil {
			return nil, err
		}
		return m(n.cfg.Runtime, ctx, scope, req)
	}
}

// handlers is every op a node serves to the others.
var handlers = map[string]handler{
	messages.OpStart:      runtimeOp((*actors.Runtime).Start),
	messages.OpReadTurn:   runtimeOp((*actors.Runtime).ReadTurn),
	messages.OpAnswer:     runtimeOp((*actors.Runtime).Answer),
	messages.OpGuide:      runtimeOp((*actors.Runtime).Guide),
	messages.OpSetPosture: runtimeOp((*actors.Runtime).SetPosture),
	messages.OpInterrupt:  runtimeOp((*actors.Runtime).Interrupt),
	messages.OpStop:       runtimeOp((*actors.Runtime).Stop),
	messages.OpResume:     resumeOp,
	opList: func(ctx context.Context, n *Node, scope string, _ []byte) (any, error) {
		all, err := n.cfg.Runtime.Store().List(ctx)
		recs := []messages.SessionRecord{}
		for _, r := range all {
			if n.visible(scope, r) {
				recs = append(recs, r)
			}
		}
		return recs, err
	},
	opRecord: func(ctx context.Context, n *Node, scope string, body []byte) (any, error) {
		var req getRequest
		if err := messages.UnmarshalMsgpack(body, &req); err != nil {
			return nil, err
		}
		if !messages.ValidSessionID(req.SessionID) {
			return nil, messages.FieldError("get", "sessionId", "malformed session id")
		}
		rec, err := n.cfg.Runtime.Store().GetMeta(ctx, req.SessionID)
		if err == nil && !n.visible(scope, rec) {
			return nil, notVisible("get", req.SessionID)
		}
		return rec, err
	},
	opGet: func(ctx context.Context, n *Node, scope string, body []byte) (any, error) {
		var req getRequest
		if err := messages.UnmarshalMsgpack(body, &req); err != nil {
			return nil, err
		}
		return n.readSession(ctx, scope, req)
	},
}

// resumeOp resumes a session on its own node: only one the caller's scope
// may see (the gateway resumes with Takeover, which the runtime's own scope
// routing lets past), and only with a backend the scope may use here.
func resumeOp(ctx context.Context, n *Node, scope string, body []byte) (any, error) {
	var req messages.Resume
	if err := messages.UnmarshalMsgpack(body, &req); err != nil {
		return nil, err
	}
	if !messages.ValidSessionID(req.SessionID) {
		return nil, messages.FieldError(messages.OpResume, "sessionId", "malformed session id")
	}
	rec, err := n.cfg.Runtime.Store().GetMeta(ctx, req.SessionID)
	if err != nil {
		return nil, err
	}
	if !n.visible(scope, rec) {
		return nil, notVisible(messages.OpResume, req.SessionID)
	}
	if n.cfg.CheckBackend != nil {
		if err := n.cfg.CheckBackend(scope, messages.OpResume, rec.BackendID); err != nil {
			return nil, err
		}
	}
	return n.cfg.Runtime.Resume(ctx, scope, req)
}

// readSession reads a session for scope: one it may not see is not found.
func (n *Node) readSession(ctx context.Context, scope string, req getRequest) (SessionView, error) {
	var v SessionView
	if !messages.ValidSessionID(req.SessionID) {
		return v, messages.FieldError("get", "sessionId", "malformed session id")
	}
	rt := n.cfg.Runtime
	var err error
	if v.Record, err = rt.Store().GetMeta(ctx, req.SessionID); err != nil {
		return v, err
	}
	if !n.visible(scope, v.Record) {
		return SessionView{}, notVisible("get", req.SessionID)
	}
	if v.Events, err = rt.Store().ReadEvents(ctx, req.SessionID, req.AfterSeq, max(1, min(req.Limit, 5000))); err != nil {
		return v, err
	}
	v.LastSeq, err = rt.Store().LastSeq(ctx, req.SessionID)
	return v, err
}

// serveCall runs a call once per id and answers every copy of it.
func (n *Node) serveCall(c *Call, replyTo *actor.PID) {
	if replyTo == nil {
		n.log.Warn("cluster: a call without a sender is dropped", "op", c.Op, "from", c.From)
		return
	}
	n.mu.Lock()
	d := n.answered[c.ID]
	first := d == nil
	if first {
		d = &done{ready: make(chan struct{})}
		n.answered[c.ID] = d
		n.order = append(n.order, c.ID)
		if len(n.order) > maxIdempotent {
			delete(n.answered, n.order[0])
			n.order = n.order[1:]
		}
	}
	n.mu.Unlock()
	go func() {
		if first {
			d.reply = n.run(c)
			close(d.ready)
		}
		<-d.ready
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		if err := n.sendProbed(ctx, replyTo, &d.reply); err != nil {
			n.log.Error("cluster: cannot send a reply", "op", c.Op, "err", err)
		}
	}()
}

// run carries out one call against the node's runtime.
func (n *Node) run(c *Call) Reply {
	r := Reply{ID: c.ID, Node: n.cfg.NodeID}
	fail := func(err error) Reply {
		e := *messages.AsError(c.Op, err)
		e.Err = nil
		r.Err = &e
		return r
	}
	if c.Op == opPing {
		b, err := messages.MarshalMsgpack(n.Meta())
		if err != nil {
			return fail(err)
		}
		r.Body = b
		return r
	}
	h := handlers[c.Op]
	if h == nil {
		n.log.Warn("cluster: unknown op", "op", c.Op, "from", c.From)
		return fail(messages.Errorf(messages.CodeUnsupported, "wire", "this node does not serve op %q", c.Op))
	}
	timeout := callTimeout
	if c.WaitMs > 0 {
		timeout = min(time.Duration(c.WaitMs)*time.Millisecond, maxWait)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := h(ctx, n, c.Scope, c.Body)
	if err != nil {
		return fail(err)
	}
	b, err := messages.MarshalMsgpack(res)
	if err != nil {
		return fail(err)
	}
	r.Body = b
	return r
}
