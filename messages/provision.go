package messages

import "time"

// Trust tiers of a capability (seed 000 §9): what provisioning it puts in
// the agent's hands, and so whether an owner must approve it first.
const (
	TierInstructions = "T0"  // instruction text only
	TierSkill        = "T1"  // pinned skill text (files the agent reads)
	TierRemoteMCP    = "T2R" // an MCP server the vendor hosts (no local code)
	TierLocalMCP     = "T2"  // a local executable MCP server (needs approval)
	TierArbitrary    = "T3"  // anything else executable (needs approval)
)

// TierNeedsApproval reports whether a tier runs code on this machine, so a
// capability of it is provisioned only once the owner approved its pin.
func TierNeedsApproval(tier string) bool { return tier == TierLocalMCP || tier == TierArbitrary }

// ValidTier reports whether tier is one of the five.
func ValidTier(tier string) bool {
	switch tier {
	case TierInstructions, TierSkill, TierRemoteMCP, TierLocalMCP, TierArbitrary:
		return true
	}
	return false
}

// Provision is what capability curation did for a session, on its record:
// every capability detected in the project, which were provisioned for this
// backend, which were not (and why in Ignored's notes), the tier of each,
// the ones waiting for an owner's approval, and the caveats about tokens
// nothing can enforce.
type Provision struct {
	// CapabilityIDs is everything detected, provisioned or not.
	CapabilityIDs []string `json:"capabilityIds" msgpack:"capabilityIds"`
	// Applied were provisioned for this session.
	Applied []string `json:"applied,omitempty" msgpack:"applied,omitempty"`
	// Ignored were detected but not provisioned: the backend has no way to
	// take them, the owner denied them, or their skill could not be fetched
	// (Notes says which).
	Ignored []string `json:"ignored,omitempty" msgpack:"ignored,omitempty"`
	// Tiers maps each detected capability to its trust tier.
	Tiers map[string]string `json:"tiers,omitempty" msgpack:"tiers,omitempty"`
	// AwaitingApproval are detected T2/T3 capabilities the owner has not
	// approved at their pinned identity yet (an approval request is filed).
	AwaitingApproval []string `json:"awaitingApproval,omitempty" msgpack:"awaitingApproval,omitempty"`
	// TokenScopeNotes: one per applied capability that binds a token from
	// the environment, saying the token must be read-only or restricted.
	TokenScopeNotes []string `json:"tokenScopeNotes,omitempty" msgpack:"tokenScopeNotes,omitempty"`
	// Notes say why a capability was ignored or degraded.
	Notes []string `json:"notes,omitempty" msgpack:"notes,omitempty"`
	// Manifest is the path of the session's launch manifest, when written.
	Manifest string `json:"manifest,omitempty" msgpack:"manifest,omitempty"`
}

// Clone returns a deep copy.
func (p *Provision) Clone() *Provision {
	if p == nil {
		return nil
	}
	c := *p
	c.CapabilityIDs = append([]string(nil), p.CapabilityIDs...)
	c.Applied = append([]string(nil), p.Applied...)
	c.Ignored = append([]string(nil), p.Ignored...)
	c.AwaitingApproval = append([]string(nil), p.AwaitingApproval...)
	c.TokenScopeNotes = append([]string(nil), p.TokenScopeNotes...)
	c.Notes = append([]string(nil), p.Notes...)
	if p.Tiers != nil {
		c.Tiers = make(map[string]string, len(p.Tiers))
		for k, v := range p.Tiers {
			c.Tiers[k] = v
		}
	}
	return &c
}

// Approval states.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
)

// Approval is one owner decision about running a capability at one pinned
// identity: a request while pending, then approved or denied. A pin bump
// is a new identity, so it asks again.
type Approval struct {
	// ID is "<capability id>@<identity digest>": stable for one pin.
	ID           string    `json:"id" msgpack:"id"`
	CapabilityID string    `json:"capabilityId" msgpack:"capabilityId"`
	Name         string    `json:"name,omitempty" msgpack:"name,omitempty"`
	Tier         string    `json:"tier" msgpack:"tier"`
	Identity     string    `json:"identity" msgpack:"identity"`
	Status       string    `json:"status" msgpack:"status"`
	Question     string    `json:"question,omitempty" msgpack:"question,omitempty"`
	RequestedAt  time.Time `json:"requestedAt" msgpack:"requestedAt"`
	DecidedAt    time.Time `json:"decidedAt,omitzero" msgpack:"decidedAt,omitempty"`
	// Projects are the directories whose sessions asked for it (bounded).
	Projects []string `json:"projects,omitempty" msgpack:"projects,omitempty"`
	// Sessions are the sessions that deferred it (bounded).
	Sessions []string `json:"sessions,omitempty" msgpack:"sessions,omitempty"`
}

// ApprovalDecision is the body of POST /api/approvals.
type ApprovalDecision struct {
	ID       string `json:"id" msgpack:"id"`
	Decision string `json:"decision" msgpack:"decision"` // approve | deny
}

// Validate checks the decision's fields.
func (d ApprovalDecision) Validate() error {
	const op = "approvals"
	if d.ID == "" {
		return FieldError(op, "id", "required")
	}
	if d.Decision != "approve" && d.Decision != "deny" {
		return FieldError(op, "decision", "must be approve or deny, not %q", d.Decision)
	}
	return nil
}
