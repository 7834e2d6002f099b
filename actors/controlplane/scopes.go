package controlplane

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/codesession/codesession/actors/driver"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
)

// ScopeToken is a bearer token beyond the default one: the owner scope
// its requests run under, whether it may set that scope's constraints
// (GET and PUT /api/scope), and the constraints themselves.
type ScopeToken struct {
	Scope string
	Token string
	Admin bool
	// Constraints are the scope's (seed 000 §3), registered with the
	// runtime when the server is built.
	Constraints messages.ScopeConstraints
	// Backends, when set, are the only backends the scope may start or
	// resume.
	Backends []string
}

// scopeKey carries a request's scope in its context.
type scopeKey struct{}

// scopeState is one scope as the server holds it; guarded by scopes.mu.
type scopeState struct {
	name     string
	token    string
	admin    bool
	cons     messages.ScopeConstraints
	backends []string
}

// scopes maps tokens to scopes. The default token's scope (Options.Scope)
// also sees records no configured scope owns: sessions run in-process by
// `codesession run` and records of older daemons.
type scopes struct {
	mu     sync.RWMutex
	def    string
	byName map[string]*scopeState
	order  []*scopeState // token comparison order: the default first
	// delegationOwner is the scope that dispatched a delegation (by id),
	// "" when unknown: a driver's sessions are its dispatcher's to see.
	delegationOwner func(id string) string
}

func newScopes(o Options) (*scopes, error) {
	def := &scopeState{name: o.Scope, token: o.Token, admin: true, cons: o.DefaultConstraints}
	sc := &scopes{def: o.Scope, byName: map[string]*scopeState{o.Scope: def}, order: []*scopeState{def}}
	for _, t := range o.Scopes {
		switch {
		case t.Scope == "" || t.Token == "":
			return nil, fmt.Errorf("controlplane: a scope token needs a scope and a token")
		case sc.byName[t.Scope] != nil:
			return nil, fmt.Errorf("controlplane: scope %q is configured twice", t.Scope)
		}
		for _, other := range sc.order {
			if other.token == t.Token {
				return nil, fmt.Errorf("controlplane: scope %q has the same token as scope %q", t.Scope, other.name)
			}
		}
		st := &scopeState{name: t.Scope, token: t.Token, admin: t.Admin, cons: t.Constraints, backends: slices.Clone(t.Backends)}
		sc.byName[t.Scope] = st
		sc.order = append(sc.order, st)
	}
	return sc, nil
}

// register hands every scope's constraints to the runtime.
func (sc *scopes) register(s *Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, st := range sc.order {
		if err := s.rt.SetScopeConstraints(ctx, st.name, st.cons); err != nil {
			return fmt.Errorf("controlplane: scope %q: %w", st.name, err)
		}
	}
	return nil
}

// authenticate returns the scope whose token r carries (compared in
// constant time against every token), or "" when none matches. With
// authentication disabled (no default token) every request is the
// default scope's.
func (sc *scopes) authenticate(r *http.Request) string {
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	if sc.order[0].token == "" {
		return sc.def
	}
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	got = strings.TrimSpace(got)
	found := ""
	for _, st := range sc.order {
		if subtle.ConstantTimeCompare([]byte(got), []byte(st.token)) == 1 {
			found = st.name
		}
	}
	return found
}

func (sc *scopes) get(name string) scopeState {
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	st := sc.byName[name]
	if st == nil {
		return scopeState{name: name}
	}
	out := *st
	out.backends = slices.Clone(st.backends)
	return out
}

// visible reports whether a token of scope may see rec.
func (sc *scopes) visible(scope string, rec messages.SessionRecord) bool {
	owner := ""
	if run := rec.LatestRun(); run != nil {
		owner = run.OwnerScopeID
	}
	if dl, ok := driver.IDOfScope(owner); ok && sc.delegationOwner != nil {
		owner = sc.delegationOwner(dl) // a driver's session is its dispatcher's
	}
	if owner == scope {
		return true
	}
	if scope != sc.def {
		return false
	}
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	return sc.byName[owner] == nil
}

// requestScope is the scope the request's token belongs to.
func requestScope(ctx context.Context) string {
	s, _ := ctx.Value(scopeKey{}).(string)
	return s
}

// scopeOf is the scope a handler runs under.
func (s *Server) scopeOf(r *http.Request) string {
	if sc := requestScope(r.Context()); sc != "" {
		return sc
	}
	return s.o.Scope
}

// checkBackend refuses a backend the scope may not use.
func (s *Server) checkBackend(scope, op, backend string) error {
	st := s.scopes.get(scope)
	if len(st.backends) == 0 || slices.Contains(st.backends, backend) {
		return nil
	}
	return &messages.Error{Code: messages.CodeInvalid, Op: op, Field: "backend",
		Message: fmt.Sprintf("backend %q is not one this scope may use (%s)", backend, strings.Join(st.backends, ", "))}
}

// scopeView is GET and PUT /api/scope.
type scopeView struct {
	Scope       string                    `json:"scope"`
	Admin       bool                      `json:"admin"`
	Constraints messages.ScopeConstraints `json:"constraints"`
	Backends    []string                  `json:"backends,omitempty"`
}

func (s *Server) getScope(w http.ResponseWriter, r *http.Request) error {
	st := s.scopes.get(s.scopeOf(r))
	return writeData(w, scopeView{Scope: st.name, Admin: st.admin, Constraints: st.cons, Backends: st.backends})
}

// scopeRequest is PUT /api/scope: the scope's whole set of constraints.
type scopeRequest struct {
	MaxPosture   messages.Posture `json:"maxPosture,omitempty"`
	MaxRounds    int              `json:"maxRounds,omitempty"`
	MaxCostUSD   float64          `json:"maxCostUsd,omitempty"`
	AllowedTools []string         `json:"allowedTools,omitempty"`
	Backends     []string         `json:"backends,omitempty"`
}

// setScope replaces the constraints of the caller's own scope; only an
// admin token may. They apply to sessions started from now on (a running
// session keeps the ceiling it started with).
func (s *Server) setScope(w http.ResponseWriter, r *http.Request) error {
	const op = "set-scope-constraints"
	name := s.scopeOf(r)
	if !s.scopes.get(name).admin {
		return messages.Errorf(messages.CodeUnauthorized, op, "this token may not change its scope's constraints (it is not an admin token)")
	}
	var req scopeRequest
	if err := decodeBody(w, r, s.o.MaxBodyBytes, &req); err != nil {
		return err
	}
	cons := messages.ScopeConstraints{MaxPosture: req.MaxPosture, MaxRounds: req.MaxRounds, MaxCostUSD: req.MaxCostUSD, AllowedTools: req.AllowedTools}
	if len(req.Backends) == 1 {
		cons.Backend = req.Backends[0]
	}
	if err := cons.Validate(); err != nil {
		return err
	}
	for _, b := range req.Backends {
		if _, err := s.rt.Backends().Get(b); err != nil {
			return messages.FieldError(op, "backends", "unknown backend %q", b)
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	if err := s.rt.SetScopeConstraints(ctx, name, cons); err != nil {
		return err
	}
	s.scopes.mu.Lock()
	st := s.scopes.byName[name]
	st.cons, st.backends = cons, slices.Clone(req.Backends)
	out := scopeView{Scope: st.name, Admin: st.admin, Constraints: st.cons, Backends: slices.Clone(st.backends)}
	s.scopes.mu.Unlock()
	return writeData(w, out)
}

// checkResume refuses a resume of a record whose backend the scope may not
// use. A record whose ceiling is above the scope's (lowered since the
// session started) resumes clamped, with a warning event, in the runtime;
// a resume that asks for a ceiling above the scope's is refused there.
func (s *Server) checkResume(ctx context.Context, scope, sid string) error {
	rec, err := s.store().GetMeta(ctx, sid)
	if err != nil {
		return err
	}
	return s.checkBackend(scope, messages.OpResume, rec.BackendID)
}

// feedVisible reports whether the all-sessions feed of a scope's token
// carries sid's items; seen caches the answer per session for the stream.
func (s *Server) feedVisible(ctx context.Context, scope string, seen map[string]bool, sid string) bool {
	if v, ok := seen[sid]; ok {
		return v
	}
	if s.bridge != nil && s.bridge.isForeign(sid) {
		// another node's session has no record in this store: the
		// cluster's directory has it (once learned; until then only the
		// default token, which sees every session no scope owns, is shown
		// its events, and the answer is asked again on the next event)
		if look := s.bridge.foreignRecord.Load(); look != nil {
			if rec, ok := (*look)(sid); ok {
				seen[sid] = s.scopes.visible(scope, rec)
				return seen[sid]
			}
		}
		return scope == s.scopes.def
	}
	rec, err := s.store().GetMeta(ctx, sid)
	v := err == nil && s.scopes.visible(scope, rec)
	if err == nil {
		seen[sid] = v
	}
	return v
}

// ReadTokenFile reads a scope's token file, refusing one that group or
// others may read, or that is empty.
func ReadTokenFile(path string) (string, error) {
	return readTokenAt(path)
}

// scopesFromConfig fills the server's scopes from the config's daemon
// section, unless the caller set them: the default token's ceiling, and
// one ScopeToken per configured scope, its token read from its file.
func scopesFromConfig(so *Options, cfg config.Config) error {
	if so.DefaultConstraints.MaxPosture == "" {
		so.DefaultConstraints.MaxPosture = cfg.Daemon.MaxPosture
	}
	if so.Scopes != nil {
		return nil
	}
	for _, c := range cfg.Daemon.Scopes {
		tok, err := ReadTokenFile(c.TokenFile)
		if err != nil {
			return &messages.Error{Code: messages.CodeInvalid, Op: "config", Field: "daemon.scopes." + c.Name + ".tokenFile", Message: err.Error(), Err: err}
		}
		ceil := c.MaxPosture
		if ceil == "" {
			ceil = cfg.Daemon.MaxPosture
		}
		cons := messages.ScopeConstraints{MaxPosture: ceil, MaxRounds: c.MaxRounds, AllowedTools: c.AllowedTools}
		if len(c.Backends) == 1 {
			cons.Backend = c.Backends[0]
		}
		so.Scopes = append(so.Scopes, ScopeToken{Scope: c.Name, Token: tok, Admin: c.Admin, Constraints: cons, Backends: c.Backends})
	}
	return nil
}
