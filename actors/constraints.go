package actors

import (
	"cmp"
	"fmt"

	"github.com/codesession/codesession/actors/session"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/learning/routing"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// resolveStart applies the runtime's defaults and the owner scope's
// constraints to a start op (seed 000 §3) and returns the session's spec:
//   - maxPosture: an explicit one above the scope ceiling is rejected; an
//     omitted one is the default clamped to the ceiling;
//   - backend: an explicit one that contradicts the scope's pin is rejected;
//     an omitted one resolves to the pin, else the default;
//   - maxRounds: clamped toward the scope's budget, never rejected;
//   - allowedTools: omitted takes the scope's list; explicit is intersected
//     with it, and an empty intersection is rejected; explicit tools for a
//     backend that cannot honour them are rejected;
//   - effort: rejected for a backend without effort support.
func resolveStart(op messages.Start, cons messages.ScopeConstraints, cfg *config.Config, backends *transports.Registry) (session.Spec, transports.Transport, error) {
	const o = messages.OpStart
	var spec session.Spec

	backend := op.Backend
	if cons.Backend != "" {
		if backend != "" && backend != cons.Backend {
			return spec, nil, &messages.Error{Code: messages.CodeInvalid, Op: o, Field: "backend",
				Message: fmt.Sprintf("backend %q contradicts this scope's pinned backend %q", backend, cons.Backend)}
		}
		backend = cons.Backend
	}
	if backend == "" {
		backend = cfg.DefaultBackend
	}
	t, err := backends.Get(backend)
	if err != nil {
		return spec, nil, err
	}
	d := t.Descriptor()
	if c, ok := t.(transports.EnvChecker); ok {
		// founder credentials refuse the start itself, not its first turn
		if err := c.CheckEnv(transports.SessionSpec{Env: cfg.EnvList()}); err != nil {
			return spec, nil, err
		}
	}
	if err := preflight(t, transports.SessionSpec{Cwd: op.Cwd, Env: cfg.EnvList()}); err != nil {
		return spec, nil, err
	}

	maxPosture := op.MaxPosture
	if cons.MaxPosture != "" {
		if maxPosture != "" && maxPosture.Above(cons.MaxPosture) {
			return spec, nil, &messages.Error{Code: messages.CodeCeilingExceeded, Op: o, Field: "maxPosture",
				Message: fmt.Sprintf("maxPosture %s is above this scope's ceiling %s", maxPosture, cons.MaxPosture)}
		}
		if maxPosture == "" {
			maxPosture = messages.MinPosture(cfg.DefaultMaxPosture, cons.MaxPosture)
		}
	}
	if maxPosture == "" {
		maxPosture = cfg.DefaultMaxPosture
	}
	posture := op.InitialPosture
	if posture == "" {
		posture = messages.MinPosture(cfg.DefaultPosture, maxPosture)
	} else if posture.Above(maxPosture) {
		return spec, nil, &messages.Error{Code: messages.CodeCeilingExceeded, Op: o, Field: "initialPosture",
			Message: fmt.Sprintf("initialPosture %s is above maxPosture %s", posture, maxPosture)}
	}
	if _, ok := d.PostureMap[posture]; !ok && len(d.PostureMap) > 0 {
		return spec, nil, messages.Errorf(messages.CodeUnsupported, o, "backend %s has no mapping for posture %s", d.ID, posture)
	}

	maxRounds := op.MaxRounds
	if maxRounds == 0 {
		maxRounds = cfg.DefaultMaxRounds
	}
	if cons.MaxRounds > 0 && (maxRounds == 0 || maxRounds > cons.MaxRounds) {
		maxRounds = cons.MaxRounds
	}

	maxCost := op.MaxCostUSD // a budget like maxRounds: clamped toward the scope's, never rejected
	if cons.MaxCostUSD > 0 && (maxCost == 0 || maxCost > cons.MaxCostUSD) {
		maxCost = cons.MaxCostUSD
	}

	tools := op.AllowedTools
	if tools != nil && !d.HonorsAllowed {
		return spec, nil, &messages.Error{Code: messages.CodeUnsupported, Op: o, Field: "allowedTools",
			Message: fmt.Sprintf("backend %s cannot honour allowedTools; its posture is the only boundary", d.ID)}
	}
	if cons.AllowedTools != nil {
		if tools == nil {
			tools = append([]string(nil), cons.AllowedTools...)
		} else {
			tools = intersect(tools, cons.AllowedTools)
			if len(tools) == 0 {
				return spec, nil, &messages.Error{Code: messages.CodeInvalid, Op: o, Field: "allowedTools",
					Message: "no requested tool is allowed in this scope"}
			}
		}
	}

	if err := routing.CheckStart(o, d, op.Effort); err != nil {
		return spec, nil, err
	}
	model := routing.ResolveModel(d, op.Model) // a class sentinel never reaches the backend or the record

	spec = session.Spec{
		Descriptor: d, Cwd: op.Cwd, Model: model, Effort: op.Effort,
		MaxPosture: maxPosture, Posture: posture, MaxRounds: maxRounds, MaxCostUSD: maxCost, AllowedTools: tools,
		Brief: op.Brief, AppendSystemPrompt: op.AppendSystemPrompt, TaskTags: op.TaskTags,
		ResumeExternalID: op.ResumeSessionID,
		Network:          cmp.Or(op.Network, cfg.Backends[d.ID].Network, cfg.Network),
	}
	return spec, t, nil
}

// intersect keeps the entries of a that are also in b, in a's order.
func intersect(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, x := range b {
		in[x] = true
	}
	out := []string{}
	for _, x := range a {
		if in[x] {
			out = append(out, x)
		}
	}
	return out
}

// resumeLimits are what a resumed record may do under the resuming scope.
type resumeLimits struct {
	maxPosture messages.Posture
	posture    messages.Posture
	maxRounds  int
	maxCost    float64
	tools      []string
	// warnings say what was clamped; each becomes a warning event
	warnings []string
}

// resolveResume applies the resuming scope's constraints to a record exactly
// as resolveStart applies them to a start (resume and takeover alike): the
// record's ceiling, posture, round budget and tools are clamped to the
// scope's, never kept above them. A record above the ceiling still resumes,
// clamped, with a warning saying so; a record pinned to another backend, or
// whose tools the scope allows none of, is refused. A ceiling the resume
// asks for explicitly (asked) is held to the scope's as at start: above it
// is ceiling_exceeded, never clamped in silence.
func resolveResume(rec messages.SessionRecord, asked messages.Posture, cons messages.ScopeConstraints, cfg *config.Config, d messages.Descriptor) (resumeLimits, error) {
	const o = messages.OpResume
	l := resumeLimits{maxPosture: rec.MaxPosture, posture: rec.Posture, maxRounds: rec.MaxRounds, maxCost: rec.MaxCostUSD, tools: rec.AllowedTools}
	if asked != "" {
		if cons.MaxPosture != "" && asked.Above(cons.MaxPosture) {
			return l, &messages.Error{Code: messages.CodeCeilingExceeded, Op: o, Field: "maxPosture",
				Message: fmt.Sprintf("maxPosture %s is above this scope's ceiling %s", asked, cons.MaxPosture)}
		}
		l.maxPosture = asked
	}
	if cons.Backend != "" && rec.BackendID != cons.Backend {
		return l, &messages.Error{Code: messages.CodeInvalid, Op: o, Field: "backend",
			Message: fmt.Sprintf("the session's backend %q contradicts this scope's pinned backend %q", rec.BackendID, cons.Backend)}
	}
	if !l.maxPosture.Valid() {
		l.maxPosture = cfg.DefaultMaxPosture
	}
	if cons.MaxPosture != "" && l.maxPosture.Above(cons.MaxPosture) {
		l.warnings = append(l.warnings, fmt.Sprintf("the session's maxPosture %s is above this scope's ceiling %s: it resumes clamped to %s",
			l.maxPosture, cons.MaxPosture, cons.MaxPosture))
		l.maxPosture = cons.MaxPosture
	}
	if !l.posture.Valid() || l.posture.Above(l.maxPosture) {
		clamped := messages.MinPosture(cfg.DefaultPosture, l.maxPosture)
		if l.posture.Valid() {
			l.warnings = append(l.warnings, fmt.Sprintf("the session's posture %s is above its ceiling %s: it resumes at %s", l.posture, l.maxPosture, clamped))
		}
		l.posture = clamped
	}
	if _, ok := d.PostureMap[l.posture]; !ok && len(d.PostureMap) > 0 {
		return l, messages.Errorf(messages.CodeUnsupported, o, "backend %s has no mapping for posture %s", d.ID, l.posture)
	}
	if cons.MaxRounds > 0 && (l.maxRounds == 0 || l.maxRounds > cons.MaxRounds) {
		l.warnings = append(l.warnings, fmt.Sprintf("the session's maxRounds %d is above this scope's budget %d: it resumes with %d",
			l.maxRounds, cons.MaxRounds, cons.MaxRounds))
		l.maxRounds = cons.MaxRounds
	}
	if cons.MaxCostUSD > 0 && (l.maxCost == 0 || l.maxCost > cons.MaxCostUSD) {
		l.warnings = append(l.warnings, fmt.Sprintf("the session's maxCostUsd %g is above this scope's budget %g: it resumes with %g",
			l.maxCost, cons.MaxCostUSD, cons.MaxCostUSD))
		l.maxCost = cons.MaxCostUSD
	}
	if cons.AllowedTools != nil {
		if l.tools == nil {
			l.tools = append([]string(nil), cons.AllowedTools...)
		} else {
			kept := intersect(l.tools, cons.AllowedTools)
			if len(kept) == 0 {
				return l, &messages.Error{Code: messages.CodeInvalid, Op: o, Field: "allowedTools",
					Message: "none of the session's tools is allowed in this scope"}
			}
			if len(kept) < len(l.tools) {
				l.warnings = append(l.warnings, fmt.Sprintf("this scope allows only %d of the session's %d tools", len(kept), len(l.tools)))
			}
			l.tools = kept
		}
	}
	return l, nil
}

// resumeNetwork is a resumed session's network mode: the one its last
// run was confined with, else the config's for its backend.
func resumeNetwork(rec messages.SessionRecord, cfg *config.Config, backend string) string {
	for i := len(rec.Runs) - 1; i >= 0; i-- {
		if a := rec.Runs[i].Containment; a != nil && a.Network != "" {
			return a.Network
		}
	}
	return cmp.Or(cfg.Backends[backend].Network, cfg.Network)
}
