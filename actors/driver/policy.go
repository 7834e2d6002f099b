package driver

import (
	"fmt"
	"slices"

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

// Within is the caller's own scope as a delegation sees it: a scoped
// token's delegation is held to its scope's constraints and backends too,
// narrow-only, so delegating never lifts a token above its own ceiling.
type Within struct {
	Constraints messages.ScopeConstraints
	// Backends, when set, are the only backends the scope may run.
	Backends []string
}

// Narrow holds a merged policy to the caller's scope w: a backend pin that
// contradicts it, or one outside its backends, is refused; a caller's
// explicit maxPosture above the scope's is ceiling_exceeded, an omitted one
// (the persona's) is clamped; maxRounds take the smaller; the driven
// sessions' tools are within the scope's.
func Narrow(pol Policy, o Overrides, w Within) (Policy, error) {
	const op = "delegate"
	c, sc := &pol.Constraints, w.Constraints
	if sc.Backend != "" {
		if c.Backend != "" && c.Backend != sc.Backend {
			return pol, &messages.Error{Code: messages.CodeInvalid, Op: op, Field: "backend",
				Message: fmt.Sprintf("the delegation pins backend %q, but this token's scope runs only %q", c.Backend, sc.Backend)}
		}
		c.Backend = sc.Backend
	}
	if len(w.Backends) > 0 {
		switch {
		case c.Backend == "" && len(w.Backends) == 1:
			c.Backend = w.Backends[0]
		case c.Backend == "":
			return pol, messages.FieldError(op, "backend", "this token's scope may run only %v: name one", w.Backends)
		case !slices.Contains(w.Backends, c.Backend):
			return pol, &messages.Error{Code: messages.CodeInvalid, Op: op, Field: "backend",
				Message: fmt.Sprintf("backend %q is not one this token's scope may use (%v)", c.Backend, w.Backends)}
		}
	}
	if sc.MaxPosture != "" {
		if o.MaxPosture != "" && o.MaxPosture.Above(sc.MaxPosture) {
			return pol, &messages.Error{Code: messages.CodeCeilingExceeded, Op: op, Field: "maxPosture",
				Message: fmt.Sprintf("maxPosture %s is above this token's scope ceiling %s", o.MaxPosture, sc.MaxPosture)}
		}
		if c.MaxPosture == "" || c.MaxPosture.Above(sc.MaxPosture) {
			c.MaxPosture = sc.MaxPosture
		}
		if pol.InitialPosture != "" {
			pol.InitialPosture = messages.MinPosture(pol.InitialPosture, c.MaxPosture)
		}
	}
	if sc.MaxRounds > 0 && (c.MaxRounds == 0 || sc.MaxRounds < c.MaxRounds) {
		c.MaxRounds = sc.MaxRounds
	}
	if sc.AllowedTools != nil {
		if c.AllowedTools == nil {
			c.AllowedTools = slices.Clone(sc.AllowedTools)
		} else {
			var in []string
			for _, t := range c.AllowedTools {
				if slices.Contains(sc.AllowedTools, t) {
					in = append(in, t)
				}
			}
			if len(in) == 0 {
				return pol, messages.FieldError(op, "allowedTools", "none of %v is within this token's scope (%v)", c.AllowedTools, sc.AllowedTools)
			}
			c.AllowedTools = in
		}
	}
	return pol, c.Validate()
}
