package messages

import "fmt"

// Posture is how much the driven agent may do without asking. Postures are
// ordered plan < default < acceptEdits < full; the zero value is invalid.
type Posture string

const (
	PosturePlan        Posture = "plan"
	PostureDefault     Posture = "default"
	PostureAcceptEdits Posture = "acceptEdits"
	PostureFull        Posture = "full"
)

// Postures lists the postures in ascending order.
func Postures() []Posture {
	return []Posture{PosturePlan, PostureDefault, PostureAcceptEdits, PostureFull}
}

// Rank is the posture's position in the order (1..4); 0 for an invalid one.
func (p Posture) Rank() int {
	switch p {
	case PosturePlan:
		return 1
	case PostureDefault:
		return 2
	case PostureAcceptEdits:
		return 3
	case PostureFull:
		return 4
	}
	return 0
}

func (p Posture) Valid() bool          { return p.Rank() > 0 }
func (p Posture) String() string       { return string(p) }
func (p Posture) Above(q Posture) bool { return p.Rank() > q.Rank() }

// MinPosture returns the lower of two valid postures.
func MinPosture(a, b Posture) Posture {
	if a.Rank() <= b.Rank() {
		return a
	}
	return b
}

// ParsePosture parses a posture name; "bypass" and "bypassPermissions" are
// accepted as aliases of full because users type them.
func ParsePosture(s string) (Posture, error) {
	switch s {
	case "bypass", "bypassPermissions":
		return PostureFull, nil
	}
	p := Posture(s)
	if !p.Valid() {
		return "", fmt.Errorf("unknown posture %q (want plan, default, acceptEdits or full)", s)
	}
	return p, nil
}

// Effort is the reasoning effort asked of the backend's model. The zero
// value means "not set" and is not a valid level.
type Effort string

const (
	EffortLow    Effort = "low"
	EffortMedium Effort = "medium"
	EffortHigh   Effort = "high"
	EffortMax    Effort = "max"
)

func Efforts() []Effort { return []Effort{EffortLow, EffortMedium, EffortHigh, EffortMax} }

func (e Effort) Valid() bool {
	switch e {
	case EffortLow, EffortMedium, EffortHigh, EffortMax:
		return true
	}
	return false
}
func (e Effort) String() string { return string(e) }

// GuideMode says how guidance reaches the agent.
type GuideMode string

const (
	// GuideSteer injects the guidance into the running turn where the backend can.
	GuideSteer GuideMode = "steer"
	// GuideQueue holds the guidance for the next turn (and starts it when idle).
	GuideQueue GuideMode = "queue"
	// GuideInterrupt interrupts the running turn, then sends the guidance.
	GuideInterrupt GuideMode = "interrupt"
)

func (m GuideMode) Valid() bool {
	return m == GuideSteer || m == GuideQueue || m == GuideInterrupt
}
func (m GuideMode) String() string { return string(m) }

// GuidanceSource says who sent guidance: the driving program or a person
// through the control plane. User guidance is pinned into the round history.
type GuidanceSource string

const (
	SourceDriver GuidanceSource = "driver"
	SourceUser   GuidanceSource = "user"
)

func (s GuidanceSource) Valid() bool    { return s == SourceDriver || s == SourceUser }
func (s GuidanceSource) String() string { return string(s) }

// Decision answers a clarification.
type Decision string

const (
	DecisionAllowOnce    Decision = "allow_once"
	DecisionAllowSession Decision = "allow_session"
	DecisionDeny         Decision = "deny"
	DecisionCancel       Decision = "cancel"
)

func (d Decision) Valid() bool {
	switch d {
	case DecisionAllowOnce, DecisionAllowSession, DecisionDeny, DecisionCancel:
		return true
	}
	return false
}
func (d Decision) String() string { return string(d) }

// Allows reports whether the decision lets the tool call run.
func (d Decision) Allows() bool { return d == DecisionAllowOnce || d == DecisionAllowSession }

// Status is a session record's lifecycle state.
//
//	running <-> idle --> ended | failed
//	   \         \--(process died)--> orphaned --(resume)--> running
type Status string

const (
	StatusRunning  Status = "running"
	StatusIdle     Status = "idle"
	StatusEnded    Status = "ended"
	StatusFailed   Status = "failed"
	StatusOrphaned Status = "orphaned"
	// StatusWaiting is a running session whose turn waits for an answer to
	// a clarification: the session writes it with the question, in the same
	// store write, and running again with the last answer (or when the turn
	// closes on questions left unanswered).
	StatusWaiting Status = "waiting"
)

func (s Status) Valid() bool {
	switch s {
	case StatusRunning, StatusIdle, StatusEnded, StatusFailed, StatusOrphaned, StatusWaiting:
		return true
	}
	return false
}
func (s Status) String() string { return string(s) }

// Live reports whether a record in this status belongs to a live session.
func (s Status) Live() bool { return s == StatusRunning || s == StatusIdle || s == StatusWaiting }

// TurnKind is the closed read-turn union's discriminator.
type TurnKind string

const (
	KindTurnComplete  TurnKind = "turn_complete"
	KindClarification TurnKind = "clarification"
	KindEnded         TurnKind = "ended"
	KindError         TurnKind = "error"
	KindMaxRounds     TurnKind = "max_rounds"
	// KindMaxBudget: the session's reported cost reached its maxCostUsd; a
	// clean stop like max_rounds, never a failure.
	KindMaxBudget TurnKind = "max_budget"
)

func TurnKinds() []TurnKind {
	return []TurnKind{KindTurnComplete, KindClarification, KindEnded, KindError, KindMaxRounds, KindMaxBudget}
}

func (k TurnKind) Valid() bool {
	switch k {
	case KindTurnComplete, KindClarification, KindEnded, KindError, KindMaxRounds, KindMaxBudget:
		return true
	}
	return false
}
func (k TurnKind) String() string { return string(k) }

// Terminal reports whether the kind closes a turn (every kind but clarification).
func (k TurnKind) Terminal() bool { return k.Valid() && k != KindClarification }

// ReleaseReason says why a session was released.
type ReleaseReason string

const (
	ReleaseExplicit ReleaseReason = "explicit"
	ReleaseSweep    ReleaseReason = "sweep"
	ReleaseLifetime ReleaseReason = "lifetime"
	ReleaseFailed   ReleaseReason = "failed"
	// ReleaseShutdown is used when the runtime itself closes with live sessions.
	ReleaseShutdown ReleaseReason = "shutdown"
	// ReleaseStore: the store kept failing (disk full, read-only home); the
	// record ends failed and nothing acknowledged was lost.
	ReleaseStore ReleaseReason = "store"
)

func (r ReleaseReason) Valid() bool {
	switch r {
	case ReleaseExplicit, ReleaseSweep, ReleaseLifetime, ReleaseFailed, ReleaseShutdown, ReleaseStore:
		return true
	}
	return false
}
func (r ReleaseReason) String() string { return string(r) }

// Outcome is the verdict on a session: given by the driver at stop, or inferred.
type Outcome string

const (
	OutcomeSuccess Outcome = "success"
	OutcomePartial Outcome = "partial"
	OutcomeFailed  Outcome = "failed"
	OutcomeAborted Outcome = "aborted"
)

func (o Outcome) Valid() bool {
	switch o {
	case OutcomeSuccess, OutcomePartial, OutcomeFailed, OutcomeAborted:
		return true
	}
	return false
}
func (o Outcome) String() string { return string(o) }

// TurnState says how a turn closed.
type TurnState string

const (
	TurnCompleted   TurnState = "completed"
	TurnInterrupted TurnState = "interrupted"
	TurnErrored     TurnState = "error"
	TurnEnded       TurnState = "ended"
)

func (s TurnState) Valid() bool {
	switch s {
	case TurnCompleted, TurnInterrupted, TurnErrored, TurnEnded:
		return true
	}
	return false
}
func (s TurnState) String() string { return string(s) }
