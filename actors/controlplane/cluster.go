package controlplane

import (
	"net/http"

	"github.com/codesession/codesession/messages"
)

// The seams the cluster layer (actors/cluster) builds on: it serves the
// routes that span nodes in front of this server, with the same auth, the
// same strict bodies and the same envelopes, and feeds other nodes' live
// events into this daemon's bridge.

// Authorized reports whether r carries the daemon's bearer token or the
// web console's session cookie.
func (d *Daemon) Authorized(r *http.Request) bool {
	return authorized(r, d.srv.o.Token) || d.srv.web.Authorized(r)
}

// Draining reports whether the daemon is shutting down.
func (d *Daemon) Draining() bool { return d.srv.draining.Load() }

// WriteError writes err as the error envelope, with the server's status
// mapping.
func (d *Daemon) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	d.srv.writeError(w, r, err)
}

// WriteData writes a success envelope.
func WriteData(w http.ResponseWriter, data any) error { return writeData(w, data) }

// DecodeBody reads a JSON request body strictly (unknown keys are invalid),
// bounded by the daemon's body limit; an empty body leaves dst as it is.
func (d *Daemon) DecodeBody(w http.ResponseWriter, r *http.Request, dst any) error {
	return decodeBody(w, r, d.srv.o.MaxBodyBytes, dst)
}

// Bridge is the daemon's live feed.
func (d *Daemon) Bridge() *Bridge { return d.bridge }

// ListenForeign takes a live event of a session another node runs: it goes
// to the feed's subscribers like a local one, but it is not counted in this
// node's metrics (its own node counts it) and the feed does not wait for it
// to be durable here (it is durable on its node, not in this store).
func (b *Bridge) ListenForeign(sid string, ev messages.PersistedEvent) {
	b.foreign.Store(sid, true)
	b.listen(sid, ev, true)
}

// SetForeignRecords gives the bridge the cluster's directory: the record
// of a session another node runs, as this node last learned it (ok false
// when it has not yet). The all-sessions feed of a scoped token shows a
// foreign session's events once its record says the scope may see it.
func (b *Bridge) SetForeignRecords(f func(sid string) (messages.SessionRecord, bool)) {
	b.foreignRecord.Store(&f)
}

// isForeign reports whether sid's events come from another node.
func (b *Bridge) isForeign(sid string) bool {
	_, ok := b.foreign.Load(sid)
	return ok
}

// Authenticate returns the scope whose token r carries (the web console's
// session cookie is the default token's); ok is false when r carries none.
// The cluster forwards this scope to the node that owns a session, which
// checks it there.
func (d *Daemon) Authenticate(r *http.Request) (scope string, ok bool) {
	if sc := d.srv.scopes.authenticate(r); sc != "" {
		return sc, true
	}
	if d.srv.web.Authorized(r) {
		return d.srv.o.Scope, true
	}
	return "", false
}

// Visible reports whether a token of scope may see rec: its own scope's
// sessions, and for the default token also those no configured scope owns.
func (d *Daemon) Visible(scope string, rec messages.SessionRecord) bool {
	return d.srv.scopes.visible(scope, rec)
}

// CheckBackend refuses a backend that scope may not start or resume.
func (d *Daemon) CheckBackend(scope, op, backend string) error {
	return d.srv.checkBackend(scope, op, backend)
}
