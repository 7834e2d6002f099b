package controlplane

import (
	"net/http"

	"github.com/codesession/codesession/messages"
)

// Capability approvals (seed 000 §9): the owner's decisions on running a
// T2/T3 capability at its pinned identity. They belong to the home, not
// to a scope, so only an admin token reads or decides them.

func (s *Server) requireAdmin(r *http.Request, op string) error {
	if !s.scopes.get(s.scopeOf(r)).admin {
		return messages.Errorf(messages.CodeUnauthorized, op, "capability approvals need an admin token")
	}
	return nil
}

// approvalsView is GET /api/approvals's data.
type approvalsView struct {
	Approvals []messages.Approval `json:"approvals"`
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireAdmin(r, "approvals"); err != nil {
		return err
	}
	list, err := s.rt.Approvals()
	if err != nil {
		return err
	}
	if list == nil {
		list = []messages.Approval{}
	}
	return writeData(w, approvalsView{Approvals: list})
}

func (s *Server) decideApproval(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireAdmin(r, "approvals"); err != nil {
		return err
	}
	var d messages.ApprovalDecision
	if err := decodeBody(w, r, s.o.MaxBodyBytes, &d); err != nil {
		return err
	}
	a, err := s.rt.DecideApproval(d)
	if err != nil {
		return err
	}
	return writeData(w, a)
}
