package curation

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codesession/codesession/messages"
)

// ApprovalsFile is the approval ledger, in the home; ApprovalsLock is the
// file its writers lock (the daemon and the CLI may both write).
const (
	ApprovalsFile = "approvals.json"
	ApprovalsLock = "approvals.lock"
)

// maxListed bounds the projects and sessions one approval remembers.
const maxListed = 16

const opApprovals = "approvals"

// Ledger is the owner's approvals of executable capabilities, each bound
// to one pinned identity, kept in <home>/approvals.json. Every method
// reads the file afresh under an exclusive lock, so two processes on one
// home see each other's decisions; it is safe for concurrent use.
type Ledger struct {
	home string
	now  func() time.Time
}

// NewLedger returns the ledger of home.
func NewLedger(home string, now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	return &Ledger{home: home, now: now}
}

type ledgerFile struct {
	Version   int                 `json:"version"`
	Approvals []messages.Approval `json:"approvals"`
}

// ApprovalID is the id of the approval of an entry at its current pin: a
// pin bump changes it, so a new identity asks again.
func ApprovalID(e Entry) string {
	sum := sha256.Sum256([]byte(e.Tier + "\x00" + e.Source.Identity()))
	return e.ID + "@" + hex.EncodeToString(sum[:6])
}

// locked runs f over the ledger's approvals under the lock; when f
// reports a change the file is replaced atomically.
func (l *Ledger) locked(f func(*ledgerFile) (bool, error)) error {
	if err := os.MkdirAll(l.home, 0o700); err != nil {
		return messages.Wrap(messages.CodeInternal, opApprovals, err, "cannot make the home")
	}
	lk, err := os.OpenFile(filepath.Join(l.home, ApprovalsLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return messages.Wrap(messages.CodeInternal, opApprovals, err, "cannot open the approvals lock")
	}
	defer lk.Close()
	if err := unix.Flock(int(lk.Fd()), unix.LOCK_EX); err != nil {
		return messages.Wrap(messages.CodeInternal, opApprovals, err, "cannot lock the approvals")
	}
	defer unix.Flock(int(lk.Fd()), unix.LOCK_UN)
	lf := ledgerFile{Version: 1}
	b, err := os.ReadFile(filepath.Join(l.home, ApprovalsFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return messages.Wrap(messages.CodeInternal, opApprovals, err, "cannot read "+ApprovalsFile)
	default:
		if err := json.Unmarshal(b, &lf); err != nil {
			return messages.Wrap(messages.CodeInternal, opApprovals, err, ApprovalsFile+" is not valid JSON; fix or remove it")
		}
	}
	changed, err := f(&lf)
	if err != nil || !changed {
		return err
	}
	out, err := json.MarshalIndent(lf, "", "  ")
	if err != nil {
		return messages.Wrap(messages.CodeInternal, opApprovals, err, "cannot encode the approvals")
	}
	if err := writeAtomic(filepath.Join(l.home, ApprovalsFile), out, 0o600); err != nil {
		return messages.Wrap(messages.CodeInternal, opApprovals, err, "cannot write "+ApprovalsFile)
	}
	return nil
}

// List returns every approval, pending first, then newest first.
func (l *Ledger) List() ([]messages.Approval, error) {
	var out []messages.Approval
	err := l.locked(func(lf *ledgerFile) (bool, error) {
		out = slices.Clone(lf.Approvals)
		return false, nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		pi, pj := out[i].Status == messages.ApprovalPending, out[j].Status == messages.ApprovalPending
		if pi != pj {
			return pi
		}
		return out[i].RequestedAt.After(out[j].RequestedAt)
	})
	return out, err
}

// Gate is the trust gate's answer for one entry.
type Gate int

const (
	gateInvalid Gate = iota
	// GatePass: the tier needs no approval, or the owner approved this pin.
	GatePass
	// GateAwaiting: not approved at this pin yet; a request is filed.
	GateAwaiting
	// GateDenied: the owner denied this pin.
	GateDenied
)

func (g Gate) String() string {
	return [...]string{"invalid", "pass", "awaiting", "denied"}[g]
}

// Check gates an entry: T0, T1 and T2R pass; a T2 or T3 entry passes only
// with an approval of its current pin. An entry with none gets a pending
// request (one per pin; later asks add their project and session to it).
func (l *Ledger) Check(e Entry, project, session string) (Gate, error) {
	if !messages.TierNeedsApproval(e.Tier) {
		return GatePass, nil
	}
	id := ApprovalID(e)
	gate := GateAwaiting
	err := l.locked(func(lf *ledgerFile) (bool, error) {
		i := slices.IndexFunc(lf.Approvals, func(a messages.Approval) bool { return a.ID == id })
		if i < 0 {
			lf.Approvals = append(lf.Approvals, messages.Approval{
				ID: id, CapabilityID: e.ID, Name: e.Name, Tier: e.Tier, Identity: e.Source.Identity(),
				Status: messages.ApprovalPending, Question: question(e), RequestedAt: l.now().UTC(),
				Projects: listed(nil, project), Sessions: listed(nil, session),
			})
			return true, nil
		}
		a := &lf.Approvals[i]
		switch a.Status {
		case messages.ApprovalApproved:
			gate = GatePass
			return false, nil
		case messages.ApprovalDenied:
			gate = GateDenied
			return false, nil
		}
		p, s := listed(a.Projects, project), listed(a.Sessions, session)
		changed := len(p) != len(a.Projects) || len(s) != len(a.Sessions)
		a.Projects, a.Sessions = p, s
		return changed, nil
	})
	if err != nil {
		return gateInvalid, err
	}
	return gate, nil
}

// Decide records the owner's decision on an approval: approve or deny.
func (l *Ledger) Decide(d messages.ApprovalDecision) (messages.Approval, error) {
	if err := d.Validate(); err != nil {
		return messages.Approval{}, err
	}
	var out messages.Approval
	err := l.locked(func(lf *ledgerFile) (bool, error) {
		i := slices.IndexFunc(lf.Approvals, func(a messages.Approval) bool { return a.ID == d.ID })
		if i < 0 {
			return false, messages.Errorf(messages.CodeNotFound, opApprovals, "no approval %q (list them: codesession approvals)", d.ID)
		}
		a := &lf.Approvals[i]
		a.Status = messages.ApprovalApproved
		if d.Decision == "deny" {
			a.Status = messages.ApprovalDenied
		}
		a.DecidedAt = l.now().UTC()
		out = *a
		return true, nil
	})
	return out, err
}

// listed adds v to a bounded list once.
func listed(list []string, v string) []string {
	if v == "" || slices.Contains(list, v) || len(list) >= maxListed {
		return list
	}
	return append(slices.Clone(list), v)
}

// question is the text the owner is asked.
func question(e Entry) string {
	q := fmt.Sprintf("Run %s (%s, tier %s) from %s in sessions of the projects that use it?", e.Name, e.ID, e.Tier, e.Source.Identity())
	if e.MCP != nil && e.MCP.AuthEnv != "" {
		q += fmt.Sprintf(" It reads the token in $%s: make that token read-only or restricted; nothing here can enforce its scope.", e.MCP.AuthEnv)
	}
	return q
}
