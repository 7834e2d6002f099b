package controlplane

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/codesession/codesession/actors/curation"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	if s.draining.Load() {
		return errDraining
	}
	return writeData(w, map[string]string{"status": "ok"})
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	if s.metrics == nil {
		return &messages.Error{Code: messages.CodeInternal, Op: "metrics", Retryable: true, Message: "no metrics registry is configured"}
	}
	s.metrics.ServeHTTP(w, r)
	return nil
}

func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) error {
	return messages.Errorf(messages.CodeNotFound, "route", "no route %s %s", r.Method, r.URL.Path)
}

func (s *Server) listBackends(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	res, err := s.rt.ListBackends(ctx, s.scopeOf(r))
	if err != nil {
		return err
	}
	s.m.probed(res)
	return writeData(w, res)
}

// sessionsView is GET /api/code-sessions.
type sessionsView struct {
	Sessions []messages.SessionRecord `json:"sessions"`
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	limit, err := intParam(r, "limit", 0, 0, 1<<30)
	if err != nil {
		return err
	}
	all, err := s.store().List(r.Context())
	if err != nil {
		return err
	}
	scope := s.scopeOf(r)
	var recs []messages.SessionRecord
	for _, rec := range all {
		if s.scopes.visible(scope, rec) {
			recs = append(recs, rec)
		}
	}
	if limit > 0 && len(recs) > limit {
		recs = recs[:limit]
	}
	if recs == nil {
		recs = []messages.SessionRecord{}
	}
	return writeData(w, sessionsView{Sessions: recs})
}

// start takes messages.Start's fields, strictly: there is no way to set the
// backend's environment from a request (that is the daemon's --env and
// config).
func (s *Server) start(w http.ResponseWriter, r *http.Request) error {
	var op messages.Start
	if err := decodeBody(w, r, s.o.MaxBodyBytes, &op); err != nil {
		return err
	}
	if op.Cwd != "" && !filepath.IsAbs(op.Cwd) {
		return messages.FieldError(messages.OpStart, "cwd", "must be an absolute path (it is the daemon's, not the caller's, file system)")
	}
	scope := s.scopeOf(r)
	if op.Backend != "" {
		if err := s.checkBackend(scope, messages.OpStart, op.Backend); err != nil {
			return err
		}
	} else if bs := s.scopes.get(scope).backends; len(bs) > 0 {
		op.Backend = bs[0] // an omitted backend is the scope's first
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	res, err := s.rt.Start(ctx, scope, op)
	if err != nil {
		if messages.IsCode(err, messages.CodeNotFound) {
			// an unknown backend is a bad request, not a missing resource
			e := *messages.AsError(messages.OpStart, err)
			e.Code, e.Field = messages.CodeInvalid, "backend"
			return &e
		}
		return err
	}
	return writeData(w, res)
}

// sessionView is GET /api/code-sessions/{id}.
type sessionView struct {
	Record  messages.SessionRecord    `json:"record"`
	Events  []messages.PersistedEvent `json:"events"`
	LastSeq uint64                    `json:"lastSeq"`
	// ExternalAttach is the backend's own interactive resume command, when
	// it has one and the record holds what it needs.
	ExternalAttach *AttachView `json:"externalAttach,omitempty"`
	// Manifest is the session's launch manifest (what it ran from), when
	// capability curation wrote one.
	Manifest *curation.Manifest `json:"manifest,omitempty"`
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	sid, err := s.pathSessionID(r, "get")
	if err != nil {
		return err
	}
	after, err := uintParam(r, "afterSeq")
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", defaultEventsPage, 1, maxEventsPage)
	if err != nil {
		return err
	}
	ctx := r.Context()
	rec, err := s.store().GetMeta(ctx, sid)
	if err != nil {
		return err
	}
	evs, err := s.store().ReadEvents(ctx, sid, after, limit)
	if err != nil {
		return err
	}
	last, err := s.store().LastSeq(ctx, sid)
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []messages.PersistedEvent{}
	}
	v := sessionView{Record: rec, Events: evs, LastSeq: last}
	if t, err := s.rt.Backends().Get(rec.BackendID); err == nil {
		v.ExternalAttach = RenderAttachFor(t.Descriptor().ExternalAttach, rec, s.attachLaunch(t, rec))
	}
	if m, ok := s.rt.Manifest(sid); ok {
		v.Manifest = &m
	}
	return writeData(w, v)
}

// attachLaunch is how the daemon starts t's processes for rec: the binary
// it runs (for backends that say), the HOME its backend environment sets
// and what else of the session's environment the backend says it needs.
func (s *Server) attachLaunch(t transports.Transport, rec messages.SessionRecord) AttachLaunch {
	env := s.rt.BackendEnv()
	var l AttachLaunch
	l.Home = env["HOME"]
	for { // the containment wrapper hides its backend's Binary
		w, ok := t.(interface{ Unwrap() transports.Transport })
		if !ok {
			break
		}
		t = w.Unwrap()
	}
	if b, ok := t.(interface {
		Binary(env []string) (string, error)
	}); ok {
		kv := make([]string, 0, len(env))
		for k, v := range env {
			kv = append(kv, k+"="+v)
		}
		if bin, err := b.Binary(kv); err == nil {
			l.Bin = bin
		}
	}
	if e, ok := t.(AttachEnver); ok {
		kv := make([]string, 0, len(env))
		for k, v := range env {
			kv = append(kv, k+"="+v)
		}
		l.Env = e.AttachEnv(transports.SessionSpec{SessionID: rec.SessionID, Cwd: rec.Cwd, Env: kv})
	}
	return l
}

type readTurnRequest struct {
	IncludeDiff bool  `json:"includeDiff,omitempty"`
	TimeoutMs   int64 `json:"timeoutMs,omitempty"`
}

// readTurn long-polls for the session's next result. When none comes in
// time the answer is a retryable timeout (503): read again; the result is
// never lost by a timed-out poll.
func (s *Server) readTurn(w http.ResponseWriter, r *http.Request) error {
	const op = messages.OpReadTurn
	sid, err := s.pathSessionID(r, op)
	if err != nil {
		return err
	}
	var req readTurnRequest
	if err := decodeBody(w, r, s.o.MaxBodyBytes, &req); err != nil {
		return err
	}
	wait := s.o.ReadTurnWait
	switch {
	case req.TimeoutMs < 0:
		return messages.FieldError(op, "timeoutMs", "must not be negative")
	case req.TimeoutMs > MaxReadTurnWait.Milliseconds():
		return messages.FieldError(op, "timeoutMs", "at most %d", MaxReadTurnWait.Milliseconds())
	case req.TimeoutMs > 0:
		wait = time.Duration(req.TimeoutMs) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	// the answer is written to the client before the result counts as
	// read: when the write fails (the client hung up mid-answer), the
	// result goes back to the session for the next read
	var unsent error
	err = s.readOrPending(ctx, s.scopeOf(r), messages.ReadTurn{SessionID: sid, IncludeDiff: req.IncludeDiff}, func(res messages.TurnResult) error {
		unsent = writeDataFlushed(w, res)
		return unsent
	})
	switch {
	case unsent != nil:
		return unsent
	case err != nil && messages.IsCode(err, messages.CodeTimeout) && r.Context().Err() == nil:
		return &messages.Error{Code: messages.CodeTimeout, Op: op, Retryable: true,
			Message: "no result within " + wait.String() + ": read again"}
	case err != nil:
		return s.sessionErr(r.Context(), sid, err)
	}
	return nil
}

type answerRequest struct {
	ClarificationID string            `json:"clarificationId"`
	Decision        messages.Decision `json:"decision,omitempty"`
	Allow           *bool             `json:"allow,omitempty"` // seed 000's form of the decision
	Reason          string            `json:"reason,omitempty"`
	Note            string            `json:"note,omitempty"`
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request) error {
	sid, err := s.pathSessionID(r, messages.OpAnswer)
	if err != nil {
		return err
	}
	var req answerRequest
	if err := decodeBody(w, r, s.o.MaxBodyBytes, &req); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	op := messages.Answer{SessionID: sid, ClarificationID: req.ClarificationID, Decision: req.Decision, Allow: req.Allow, Reason: req.Reason, Note: req.Note}
	if err := op.Validate(); err != nil { // resolves allow into the decision before the delegated path reads it
		return err
	}
	if s.scopeOf(r) == s.scopes.def {
		// a driven session's question its driver handed to the human
		if res, handled, err := s.rt.AnswerDelegated(ctx, op); handled || err != nil {
			if err != nil {
				return err
			}
			return writeData(w, res)
		}
	}
	res, err := s.rt.Answer(ctx, s.scopeOf(r), op)
	if err != nil {
		return s.sessionErr(r.Context(), sid, err)
	}
	return writeData(w, res)
}

// guidanceRequest has no source: guidance through the control plane is
// always the user's (pinned into the round history).
type guidanceRequest struct {
	Text   string             `json:"text"`
	Mode   messages.GuideMode `json:"mode,omitempty"`
	Model  string             `json:"agentModel,omitempty"`
	Effort messages.Effort    `json:"effort,omitempty"`
}

func (s *Server) guidance(w http.ResponseWriter, r *http.Request) error {
	sid, err := s.pathSessionID(r, messages.OpGuide)
	if err != nil {
		return err
	}
	var req guidanceRequest
	if err := decodeBody(w, r, s.o.MaxBodyBytes, &req); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	res, err := s.rt.Guide(ctx, s.scopeOf(r), messages.Guide{SessionID: sid, Text: req.Text, Mode: req.Mode,
		Source: messages.SourceUser, Model: req.Model, Effort: req.Effort})
	if err != nil {
		return s.sessionErr(r.Context(), sid, err)
	}
	return writeData(w, res)
}

type postureRequest struct {
	Posture messages.Posture `json:"posture"`
}

func (s *Server) posture(w http.ResponseWriter, r *http.Request) error {
	sid, err := s.pathSessionID(r, messages.OpSetPosture)
	if err != nil {
		return err
	}
	var req postureRequest
	if err := decodeBody(w, r, s.o.MaxBodyBytes, &req); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	res, err := s.rt.SetPosture(ctx, s.scopeOf(r), messages.SetPosture{SessionID: sid, Posture: req.Posture})
	if err != nil {
		return s.sessionErr(r.Context(), sid, err)
	}
	return writeData(w, res)
}

func (s *Server) interrupt(w http.ResponseWriter, r *http.Request) error {
	sid, err := s.pathSessionID(r, messages.OpInterrupt)
	if err != nil {
		return err
	}
	var req struct{}
	if err := decodeBody(w, r, s.o.MaxBodyBytes, &req); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	res, err := s.rt.Interrupt(ctx, s.scopeOf(r), messages.Interrupt{SessionID: sid})
	if err != nil {
		return s.sessionErr(r.Context(), sid, err)
	}
	return writeData(w, res)
}

type stopRequest struct {
	Outcome messages.Outcome `json:"outcome,omitempty"`
	Note    string           `json:"note,omitempty"`
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) error {
	sid, err := s.pathSessionID(r, messages.OpStop)
	if err != nil {
		return err
	}
	var req stopRequest
	if err := decodeBody(w, r, s.o.MaxBodyBytes, &req); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	res, err := s.rt.Stop(ctx, s.scopeOf(r), messages.Stop{SessionID: sid, Outcome: req.Outcome, Note: req.Note})
	if err != nil {
		return s.sessionErr(r.Context(), sid, err)
	}
	return writeData(w, res)
}

type resumeRequest struct {
	Brief      string           `json:"brief,omitempty"`
	MaxPosture messages.Posture `json:"maxPosture,omitempty"`
}

// resume adopts an ended, failed or orphaned record under the daemon's own
// scope (a takeover: the record may have been started by another process):
// 404 when there is no record, 409 when it is still live.
func (s *Server) resume(w http.ResponseWriter, r *http.Request) error {
	sid, err := s.pathSessionID(r, messages.OpResume)
	if err != nil {
		return err
	}
	var req resumeRequest
	if err := decodeBody(w, r, s.o.MaxBodyBytes, &req); err != nil {
		return err
	}
	scope := s.scopeOf(r)
	if err := s.checkResume(r.Context(), scope, sid); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	if scope == s.scopes.def {
		// a session a driver drove is resumed by a fresh driver that
		// adopts it (delegations.go)
		if view, handled, err := s.resumeDelegated(ctx, sid, req.Brief); handled {
			if err != nil {
				return err
			}
			return writeData(w, view)
		}
	}
	res, err := s.rt.Resume(ctx, scope, messages.Resume{SessionID: sid, Brief: req.Brief, Takeover: true, MaxPosture: req.MaxPosture})
	if err != nil {
		return err
	}
	return writeData(w, res)
}

// sessionErr refines a session op's not_found: the daemon drives only the
// sessions it started or resumed, so a record that exists but is not one
// of them is not_live (resume it first), or a conflict when another
// process is driving it right now.
func (s *Server) sessionErr(ctx context.Context, sid string, err error) error {
	if !messages.IsCode(err, messages.CodeNotFound) {
		return err
	}
	e := messages.AsError("route", err)
	if e.Op != "route" {
		return err // the op's own not_found (e.g. an unknown clarification)
	}
	rec, gerr := s.store().GetMeta(ctx, sid)
	if gerr != nil {
		return err
	}
	if rec.Status.Live() {
		return messages.Errorf(messages.CodeConflict, e.Op, "session %s is being driven by another process: drive it there", sid)
	}
	return messages.Errorf(messages.CodeNotLive, e.Op, "session %s is %s: resume it first", sid, rec.Status)
}

// pathSessionID returns the session the {id} path value names: a whole id,
// or a unique prefix of one (see resolveSessionID).
func (s *Server) pathSessionID(r *http.Request, op string) (string, error) {
	return s.resolveSessionID(r.Context(), r.PathValue("id"), op)
}

// resolveSessionID checks the shape of id before it touches anything; a
// whole id is taken as it is, and a prefix (messages.SessionIDPrefixOf)
// must name exactly one stored session.
func (s *Server) resolveSessionID(ctx context.Context, id, op string) (string, error) {
	scope := requestScope(ctx)
	if scope == "" {
		scope = s.o.Scope
	}
	if messages.ValidSessionID(id) {
		rec, err := s.store().GetMeta(ctx, id)
		if err == nil && !s.scopes.visible(scope, rec) {
			return "", messages.Errorf(messages.CodeNotFound, op, "no session %s", id) // another scope's: not ours to confirm
		}
		return id, nil
	}
	prefix, ok := messages.SessionIDPrefixOf(id)
	if !ok {
		return "", messages.FieldError(op, "sessionId", "%q is not a session id or a prefix of one (at least %d hex digits)", id, messages.MinIDPrefixHex)
	}
	recs, err := s.store().List(ctx)
	if err != nil {
		return "", err
	}
	var found []string
	for _, rec := range recs {
		if strings.HasPrefix(rec.SessionID, prefix) && s.scopes.visible(scope, rec) {
			found = append(found, rec.SessionID)
		}
	}
	switch len(found) {
	case 0:
		return "", messages.Errorf(messages.CodeNotFound, op, "no session id starts with %s", prefix)
	case 1:
		return found[0], nil
	}
	return "", messages.FieldError(op, "sessionId", "%s is the start of %d session ids: give more of it", prefix, len(found))
}

func uintParam(r *http.Request, name string) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, messages.FieldError("query", name, "want a non-negative integer, got %q", v)
	}
	return n, nil
}

func intParam(r *http.Request, name string, def, min, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		return 0, messages.FieldError("query", name, "want an integer in %d..%d, got %q", min, max, v)
	}
	return n, nil
}
