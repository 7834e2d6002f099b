package cluster

import (
	"cmp"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/messages"
)

// Bounds of the gateway's requests (the control plane's own).
const (
	gatewayOpTimeout = time.Minute
	defaultReadWait  = controlplane.DefaultReadTurnWait
	maxReadWait      = controlplane.MaxReadTurnWait
)

// Gateway is the control plane of a cluster node: the routes that span
// nodes are served here, everything else (and every op on a session this
// node holds) goes to the daemon's own handler unchanged.
//
//	GET  /api/code-sessions                 every node's records, with "node"
//	POST /api/code-sessions                 placed start ({..., node?})
//	GET  /api/code-sessions/{id}            from the owning node
//	POST /api/code-sessions/{id}/<op>       to the owning node
//	GET  /api/cluster/nodes                 this node and its peers
//
// The live feed (/api/events) is the daemon's: other nodes' events reach
// its bridge through the node (Wire). Auth, bodies and envelopes are the
// daemon's (controlplane.Daemon's seams).
type Gateway struct {
	n     *Node
	d     *controlplane.Daemon
	inner http.Handler
	mux   *http.ServeMux
}

// NewGateway serves d's control plane through the cluster.
func NewGateway(n *Node, d *controlplane.Daemon) *Gateway {
	g := &Gateway{n: n, d: d, inner: d.Handler(), mux: http.NewServeMux()}
	g.mux.HandleFunc("GET /api/code-sessions", g.guard(g.list))
	g.mux.HandleFunc("POST /api/code-sessions", g.guard(g.start))
	g.mux.HandleFunc("GET /api/code-sessions/{id}", g.guard(g.get))
	g.mux.HandleFunc("POST /api/code-sessions/{id}/{op}", g.guard(g.op))
	g.mux.HandleFunc("GET /api/cluster/nodes", g.guard(g.nodes))
	g.mux.HandleFunc("GET /api/events", g.guard(g.events))
	g.mux.Handle("/", g.inner)
	return g
}

// Wire connects the node and the daemon's feed: other nodes' events go to
// this daemon's bridge. (This node's own events reach the others through
// controlplane.DaemonOptions.OnEvent = Node.Publish.)
func Wire(n *Node, d *controlplane.Daemon) {
	b := d.Bridge()
	n.OnFeed(func(_, sid string, ev messages.PersistedEvent) { b.ListenForeign(sid, ev) })
	b.SetForeignRecords(n.peerRecord)
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.mux.ServeHTTP(w, r) }

// guard checks auth and draining, then runs h; an error h returns is
// written as the daemon writes errors.
func (g *Gateway) guard(h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if g.d.Draining() {
			g.inner.ServeHTTP(w, r) // the daemon answers 503 itself
			return
		}
		scope, ok := g.d.Authenticate(r)
		if !ok {
			g.d.WriteError(w, r, messages.Errorf(messages.CodeUnauthorized, "http", "a valid bearer token is required"))
			return
		}
		// the caller's scope goes with every call this request makes; the
		// owning node checks it (scope.go)
		r = r.WithContext(WithScope(r.Context(), scope))
		if err := h(w, r); err != nil {
			g.d.WriteError(w, r, err)
		}
	}
}

type clusterSessions struct {
	Sessions []NodeRecord `json:"sessions"`
}

func (g *Gateway) list(w http.ResponseWriter, r *http.Request) error {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return messages.FieldError("list", "limit", "want a non-negative integer")
		}
		limit = n
	}
	recs, err := g.visibleSessions(r)
	if err != nil {
		return err
	}
	if limit > 0 && len(recs) > limit {
		recs = recs[:limit]
	}
	return controlplane.WriteData(w, clusterSessions{Sessions: recs})
}

// visibleSessions is the directory as the request's scope may see it.
func (g *Gateway) visibleSessions(r *http.Request) ([]NodeRecord, error) {
	recs, err := g.n.Sessions(r.Context())
	if err != nil {
		return nil, err
	}
	scope := g.n.scopeOf(r.Context())
	out := recs[:0]
	for _, rec := range recs {
		if g.d.Visible(scope, rec.SessionRecord) {
			out = append(out, rec)
		}
	}
	return out, nil
}

// startRequest is a start with the node option.
type startRequest struct {
	messages.Start
	// Node names the node to run the session on; empty lets placement pick.
	Node string `json:"node,omitempty"`
}

func (g *Gateway) start(w http.ResponseWriter, r *http.Request) error {
	var req startRequest
	if err := g.d.DecodeBody(w, r, &req); err != nil {
		return err
	}
	if err := g.d.CheckBackend(g.n.scopeOf(r.Context()), messages.OpStart, cmp.Or(req.Backend, g.n.defaultBackend())); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), gatewayOpTimeout)
	defer cancel()
	res, err := g.n.Start(ctx, req.Start, req.Node)
	if err != nil {
		return err
	}
	return controlplane.WriteData(w, res)
}

// owner resolves the path's session id (a whole id or a prefix) to its
// node; local means this node holds it.
func (g *Gateway) owner(r *http.Request, op string) (sid, node string, local bool, err error) {
	return g.ownerOfID(r, r.PathValue("id"), op)
}

// ownerOfID is owner for an id given elsewhere than the path.
func (g *Gateway) ownerOfID(r *http.Request, id, op string) (sid, node string, local bool, err error) {
	sid = id
	if !messages.ValidSessionID(id) {
		prefix, ok := messages.SessionIDPrefixOf(id)
		if !ok {
			return "", "", false, messages.FieldError(op, "sessionId", "malformed session id")
		}
		recs, err := g.visibleSessions(r)
		if err != nil {
			return "", "", false, err
		}
		sid = ""
		for _, rec := range recs {
			if strings.HasPrefix(rec.SessionID, prefix) {
				if sid != "" {
					return "", "", false, messages.FieldError(op, "sessionId", "prefix %s names more than one session", id)
				}
				sid = rec.SessionID
			}
		}
		if sid == "" {
			return "", "", false, messages.Errorf(messages.CodeNotFound, op, "no session starts with %s", id)
		}
	}
	node, local, err = g.n.Owner(r.Context(), sid)
	return sid, node, local, err
}

type sessionView struct {
	SessionView
	Node string `json:"node"`
}

func (g *Gateway) get(w http.ResponseWriter, r *http.Request) error {
	sid, _, local, err := g.owner(r, "get")
	if err != nil {
		return err
	}
	if local {
		g.inner.ServeHTTP(w, r)
		return nil
	}
	q := r.URL.Query()
	after, _ := strconv.ParseUint(q.Get("afterSeq"), 10, 64)
	limit := 500
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 {
			return messages.FieldError("get", "limit", "want a positive integer")
		}
	}
	v, node, err := g.n.Get(r.Context(), sid, after, limit)
	if err != nil {
		return err
	}
	if v.Events == nil {
		v.Events = []messages.PersistedEvent{}
	}
	return controlplane.WriteData(w, sessionView{SessionView: v, Node: node})
}

// Request bodies of the session ops, as the daemon takes them.
type (
	readTurnBody struct {
		IncludeDiff bool  `json:"includeDiff,omitempty"`
		TimeoutMs   int64 `json:"timeoutMs,omitempty"`
	}
	answerBody struct {
		ClarificationID string            `json:"clarificationId"`
		Decision        messages.Decision `json:"decision"`
		Reason          string            `json:"reason,omitempty"`
		Note            string            `json:"note,omitempty"`
	}
	guidanceBody struct {
		Text   string             `json:"text"`
		Mode   messages.GuideMode `json:"mode,omitempty"`
		Model  string             `json:"agentModel,omitempty"`
		Effort messages.Effort    `json:"effort,omitempty"`
	}
	postureBody struct {
		Posture messages.Posture `json:"posture"`
	}
	stopBody struct {
		Outcome messages.Outcome `json:"outcome,omitempty"`
		Note    string           `json:"note,omitempty"`
	}
	resumeBody struct {
		Brief string `json:"brief,omitempty"`
	}
)

// op forwards a session op to the node that holds the session.
func (g *Gateway) op(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("op")
	sid, _, local, err := g.owner(r, name)
	if err != nil {
		return err
	}
	if local {
		g.inner.ServeHTTP(w, r)
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), gatewayOpTimeout)
	defer cancel()
	var out any
	switch name {
	case "read-turn":
		var b readTurnBody
		if err := g.d.DecodeBody(w, r, &b); err != nil {
			return err
		}
		wait := defaultReadWait
		switch {
		case b.TimeoutMs < 0 || b.TimeoutMs > maxReadWait.Milliseconds():
			return messages.FieldError(messages.OpReadTurn, "timeoutMs", "between 0 and %d", maxReadWait.Milliseconds())
		case b.TimeoutMs > 0:
			wait = time.Duration(b.TimeoutMs) * time.Millisecond
		}
		rctx, rcancel := context.WithTimeout(r.Context(), wait)
		defer rcancel()
		var res messages.TurnResult
		if _, err := g.n.Do(rctx, sid, messages.OpReadTurn, messages.ReadTurn{SessionID: sid, IncludeDiff: b.IncludeDiff}, &res); err != nil {
			if messages.IsCode(err, messages.CodeTimeout) && r.Context().Err() == nil {
				return &messages.Error{Code: messages.CodeTimeout, Op: messages.OpReadTurn, Retryable: true,
					Message: "no result within " + wait.String() + ": read again"}
			}
			return err
		}
		out = res
	case "answer":
		var b answerBody
		if err := g.d.DecodeBody(w, r, &b); err != nil {
			return err
		}
		var res messages.AnswerResult
		err = g.do(ctx, sid, messages.OpAnswer, messages.Answer{SessionID: sid, ClarificationID: b.ClarificationID, Decision: b.Decision, Reason: b.Reason, Note: b.Note}, &res)
		out = res
	case "guidance":
		var b guidanceBody
		if err := g.d.DecodeBody(w, r, &b); err != nil {
			return err
		}
		var res messages.OKResult
		err = g.do(ctx, sid, messages.OpGuide, messages.Guide{SessionID: sid, Text: b.Text, Mode: b.Mode, Source: messages.SourceUser, Model: b.Model, Effort: b.Effort}, &res)
		out = res
	case "posture":
		var b postureBody
		if err := g.d.DecodeBody(w, r, &b); err != nil {
			return err
		}
		var res messages.SetPostureResult
		err = g.do(ctx, sid, messages.OpSetPosture, messages.SetPosture{SessionID: sid, Posture: b.Posture}, &res)
		out = res
	case "interrupt":
		var b struct{}
		if err := g.d.DecodeBody(w, r, &b); err != nil {
			return err
		}
		var res messages.OKResult
		err = g.do(ctx, sid, messages.OpInterrupt, messages.Interrupt{SessionID: sid}, &res)
		out = res
	case "stop":
		var b stopBody
		if err := g.d.DecodeBody(w, r, &b); err != nil {
			return err
		}
		var res messages.StopResult
		err = g.do(ctx, sid, messages.OpStop, messages.Stop{SessionID: sid, Outcome: b.Outcome, Note: b.Note}, &res)
		out = res
	case "resume":
		var b resumeBody
		if err := g.d.DecodeBody(w, r, &b); err != nil {
			return err
		}
		var res messages.StartResult
		node, derr := g.n.Do(ctx, sid, messages.OpResume, messages.Resume{SessionID: sid, Brief: b.Brief, Takeover: true}, &res)
		err = derr
		out = Placed{StartResult: res, Node: node} // a start through the cluster says where it runs; so does a resume
	default:
		return messages.Errorf(messages.CodeNotFound, "route", "no route %s %s", r.Method, r.URL.Path)
	}
	if err != nil {
		return err
	}
	return controlplane.WriteData(w, out)
}

func (g *Gateway) do(ctx context.Context, sid, op string, req, out any) error {
	_, err := g.n.Do(ctx, sid, op, req, out)
	return err
}

func (g *Gateway) nodes(w http.ResponseWriter, r *http.Request) error {
	return controlplane.WriteData(w, g.n.Members())
}
