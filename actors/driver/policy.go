package driver

import (
	"fmt"

	"github.com/codesession/codesession/messages"
)

// SupervisedBackend is the backend a supervised delegation pins: the
// in-process loop (seed 000's delegate({supervised:true}) pins neo).
const SupervisedBackend = "native"

// Overrides are the caller's narrowing of a persona's policy: each may
// only narrow what the persona's frontmatter gives, never widen it.
type Overrides struct {
	Backend    string
	MaxPosture messages.Posture
	MaxRounds  int
	// AllowedTools are the driven sessions' tools (the persona's own
	// allowedTools are the driver's, not theirs).
	AllowedTools []string
	// Supervised pins the driven backend to SupervisedBackend.
	Supervised bool
	// AskHuman sends every clarification to the human (as clarify: human).
	AskHuman bool
}

// Policy is what the runtime holds a delegation's sessions to: the scope
// constraints registered before the driver's first turn, and the
// initial posture its starts get when they name none.
type Policy struct {
	Constraints    messages.ScopeConstraints
	InitialPosture messages.Posture
	// AskHuman: the driven sessions' clarifications go to the human, not
	// to the driver (the persona's clarify: human, or the caller's).
	AskHuman bool
}

// Merge combines a persona's frontmatter policy with the caller's
// overrides, narrow-only (seed 000 §2, mergeScopeConstraintOverrides):
//   - backend: the persona's pin, the caller's and a supervised pin must
//     agree (a contradiction is invalid); any one of them pins;
//   - maxPosture: the persona's ceiling (ceiling when it has none); a
//     caller's above it is ceiling_exceeded, below it narrows;
//   - maxRounds: the smaller of the two that are set;
//   - allowedTools: the caller's, for the driven sessions;
//   - initialPosture: the persona's, clamped to the ceiling.
func Merge(p Persona, o Overrides, ceiling messages.Posture) (Policy, error) {
	const op = "delegate"
	var pol Policy
	c := &pol.Constraints
	pins := []struct{ who, backend string }{{"the persona", p.Backend}, {"--backend", o.Backend}}
	if o.Supervised {
		pins = append(pins, struct{ who, backend string }{"--supervised", SupervisedBackend})
	}
	for _, pin := range pins {
		if pin.backend == "" {
			continue
		}
		if c.Backend != "" && c.Backend != pin.backend {
			return pol, &messages.Error{Code: messages.CodeInvalid, Op: op, Field: "backend",
				Message: fmt.Sprintf("%s pins backend %q, which contradicts the pin %q", pin.who, pin.backend, c.Backend)}
		}
		c.Backend = pin.backend
	}
	if o.MaxPosture != "" && !o.MaxPosture.Valid() {
		return pol, messages.FieldError(op, "maxPosture", "unknown posture %q", o.MaxPosture)
	}
	c.MaxPosture = p.MaxPosture
	if c.MaxPosture == "" {
		c.MaxPosture = ceiling
	}
	if o.MaxPosture != "" {
		if c.MaxPosture != "" && o.MaxPosture.Above(c.MaxPosture) {
			return pol, &messages.Error{Code: messages.CodeCeilingExceeded, Op: op, Field: "maxPosture",
				Message: fmt.Sprintf("maxPosture %s is above the persona's ceiling %s: an override may only narrow it", o.MaxPosture, c.MaxPosture)}
		}
		c.MaxPosture = o.MaxPosture
	}
	if o.MaxRounds < 0 {
		return pol, messages.FieldError(op, "maxRounds", "must not be negative")
	}
	c.MaxRounds = p.MaxRounds
	if o.MaxRounds > 0 && (c.MaxRounds == 0 || o.MaxRounds < c.MaxRounds) {
		c.MaxRounds = o.MaxRounds
	}
	if o.AllowedTools != nil {
		if len(o.AllowedTools) == 0 {
			return pol, messages.FieldError(op, "allowedTools", "explicitly empty")
		}
		c.AllowedTools = append([]string(nil), o.AllowedTools...)
	}
	pol.AskHuman = p.Clarify == ClarifyHuman || o.AskHuman
	pol.InitialPosture = p.InitialPosture
	if pol.InitialPosture != "" && c.MaxPosture != "" {
		pol.InitialPosture = messages.MinPosture(pol.InitialPosture, c.MaxPosture)
	}
	return pol, c.Validate()
}
