package cluster

import (
	"context"

	"github.com/codesession/codesession/messages"
)

// Scopes across nodes: a request's owner scope (the scope of the token it
// carried on the node it reached) rides in its context, crosses the wire
// in Call.Scope, and is checked on the node that owns the session: the
// runtime routes an op only to a session of its scope, and the list, get
// and record calls answer only what Config.Visible lets the scope see. A
// call's scope is trusted as the calling node says it: nodes authenticate
// each other (mutual TLS, the gossip key), not each other's callers.

type scopeKey struct{}

// directoryScope is the scope of the directory's own calls (list, record):
// the directory holds every session, and each request's scope filters what
// it shows. It is no token's scope.
const directoryScope = "\x00cluster-directory"

// WithScope returns ctx carrying the owner scope the cluster's calls made
// with it run under (default: the node's Config.Scope).
func WithScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// scopeOf is the scope ctx carries, or the node's own.
func (n *Node) scopeOf(ctx context.Context) string {
	if s, _ := ctx.Value(scopeKey{}).(string); s != "" {
		return s
	}
	return n.cfg.Scope
}

// visible reports whether scope may see rec (Config.Visible, or by
// default: its own sessions, and every session for the node's own scope).
func (n *Node) visible(scope string, rec messages.SessionRecord) bool {
	if scope == directoryScope {
		return true
	}
	if n.cfg.Visible != nil {
		return n.cfg.Visible(scope, rec)
	}
	if scope == n.cfg.Scope {
		return true
	}
	run := rec.LatestRun()
	return run != nil && run.OwnerScopeID == scope
}

// notVisible is what a scope is told of a session it may not see: the
// same as of one that does not exist.
func notVisible(op, sid string) error {
	return messages.Errorf(messages.CodeNotFound, op, "no session %s", sid)
}
