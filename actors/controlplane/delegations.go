package controlplane

import (
	"context"
	"net/http"
	"path/filepath"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/driver"
	"github.com/codesession/codesession/messages"
)

// The delegation routes (seed 000 §2): a driver persona dispatched by the
// daemon, and the records of those dispatched. A token sees and starts
// only its own scope's delegations (the default token also those with no
// recorded owner), and a delegation it starts is held to its scope's
// constraints and backends, narrow-only; the sessions a driver drove are
// visible to the token that dispatched it.
//
//	POST /api/delegations                   {brief, agent?, cwd?, backend?, maxPosture?, maxRounds?, allowedTools?, supervised?, askHuman?}
//
// A driven session's question its driver hands to the human (askHuman, or
// the persona's clarify: human) is on the delegation's record, and is
// answered through POST /api/code-sessions/{id}/answer like any other.
//	GET  /api/delegations                   {delegations: [...]}, newest first
//	GET  /api/delegations/{id}              {delegation, sessions: [records]}
//	POST /api/delegations/{id}/cancel       ends it: its sessions are released

type delegateRequest struct {
	Brief        string           `json:"brief"`
	Agent        string           `json:"agent,omitempty"`
	Cwd          string           `json:"cwd,omitempty"`
	Backend      string           `json:"backend,omitempty"`
	MaxPosture   messages.Posture `json:"maxPosture,omitempty"`
	MaxRounds    int              `json:"maxRounds,omitempty"`
	AllowedTools []string         `json:"allowedTools,omitempty"`
	Supervised   bool             `json:"supervised,omitempty"`
	AskHuman     bool             `json:"askHuman,omitempty"`
}

// DelegationView is GET /api/delegations/{id}: the record and the records
// of the sessions it drove.
type DelegationView struct {
	Delegation driver.Record            `json:"delegation"`
	Sessions   []messages.SessionRecord `json:"sessions"`
}

// DelegationsView is GET /api/delegations.
type DelegationsView struct {
	Delegations []driver.Record `json:"delegations"`
}

// delegationOwner is the scope that dispatched delegation id ("" when it
// has none recorded, or no record).
func (s *Server) delegationOwner(id string) string {
	rec, err := s.rt.Delegation(id)
	if err != nil {
		return ""
	}
	return rec.Owner
}

// delegationVisible reports whether scope's token may see rec: its own,
// and for the default token those with no recorded owner or an owner that
// is no configured scope.
func (s *Server) delegationVisible(scope string, rec driver.Record) bool {
	if rec.Owner == scope {
		return true
	}
	if scope != s.scopes.def {
		return false
	}
	s.scopes.mu.RLock()
	defer s.scopes.mu.RUnlock()
	return s.scopes.byName[rec.Owner] == nil
}

// scopedDelegation reads delegation id if scope's token may see it; one
// it may not is not_found (its existence is not the token's to know).
func (s *Server) scopedDelegation(r *http.Request, id string) (driver.Record, error) {
	rec, err := s.rt.Delegation(id)
	if err != nil {
		return rec, err
	}
	if !s.delegationVisible(s.scopeOf(r), rec) {
		return driver.Record{}, messages.Errorf(messages.CodeNotFound, "delegation", "no delegation %s", id)
	}
	return rec, nil
}

func (s *Server) delegate(w http.ResponseWriter, r *http.Request) error {
	const op = "delegate"
	var req delegateRequest
	if err := decodeBody(w, r, s.o.MaxBodyBytes, &req); err != nil {
		return err
	}
	if req.Cwd != "" && !filepath.IsAbs(req.Cwd) {
		return messages.FieldError(op, "cwd", "must be an absolute path (it is the daemon's, not the caller's, file system)")
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	scope := s.scopes.get(s.scopeOf(r))
	rec, err := s.rt.Delegate(ctx, driver.Request{Agent: req.Agent, Brief: req.Brief, Cwd: req.Cwd,
		Owner: scope.name, Within: &driver.Within{Constraints: scope.cons, Backends: scope.backends}, Overrides: driver.Overrides{
			Backend: req.Backend, MaxPosture: req.MaxPosture, MaxRounds: req.MaxRounds, AllowedTools: req.AllowedTools, Supervised: req.Supervised, AskHuman: req.AskHuman}})
	if err != nil {
		return err
	}
	return writeData(w, rec)
}

func (s *Server) listDelegations(w http.ResponseWriter, r *http.Request) error {
	all, err := s.rt.Delegations()
	if err != nil {
		return err
	}
	scope := s.scopeOf(r)
	list := []driver.Record{}
	for _, rec := range all {
		if s.delegationVisible(scope, rec) {
			list = append(list, rec)
		}
	}
	return writeData(w, DelegationsView{Delegations: list})
}

func (s *Server) getDelegation(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.scopedDelegation(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	view := DelegationView{Delegation: rec, Sessions: []messages.SessionRecord{}}
	for _, sid := range rec.Sessions {
		if m, err := s.store().GetMeta(r.Context(), sid); err == nil {
			view.Sessions = append(view.Sessions, m)
		}
	}
	return writeData(w, view)
}

func (s *Server) cancelDelegation(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.scopedDelegation(r, r.PathValue("id")); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	rec, err := s.rt.CancelDelegation(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeData(w, rec)
}

// ResumeView is what POST /api/code-sessions/{id}/resume answers for a
// session a driver drove: a fresh driver was dispatched to adopt it (its
// start continues the same id); Delegation is that driver's record.
type ResumeView struct {
	messages.StartResult
	Delegation *driver.Record `json:"delegation,omitempty"`
}

// resumeDelegated resumes sid through a fresh driver when a delegation
// drove its latest run (the rule: a driven session is resumed driven, a
// session the caller drove itself is resumed plainly); handled reports
// whether it did.
func (s *Server) resumeDelegated(ctx context.Context, sid, brief string) (ResumeView, bool, error) {
	rec, err := s.store().GetMeta(ctx, sid)
	if err != nil {
		return ResumeView{}, false, nil // the plain path says why
	}
	if _, driven := actors.DrivenBy(rec); !driven {
		return ResumeView{}, false, nil
	}
	d, err := s.rt.ResumeDelegated(ctx, sid, brief)
	if err != nil {
		return ResumeView{}, true, err
	}
	return ResumeView{StartResult: messages.StartResult{SessionID: sid, Backend: rec.BackendID}, Delegation: &d}, true, nil
}
