// Package routing is model and effort routing as data (seed 000 §10, seed
// 003 "Model + effort routing"): the one resolver of model-class sentinels
// (cheap, standard, frontier) used at start, guide and resume; the effort
// and per-turn switch checks, which reject loudly what a backend's
// descriptor names no mechanism for; and the routing-guidance lines
// list-backends shows beside the track record, from a small task-class
// catalog. The decision stays with the driver: nothing here picks a model.
//
// Everything is pure and safe for concurrent use; tests are tables.
package routing

import (
	"fmt"
	"slices"
	"strings"

	"github.com/codesession/codesession/messages"
)

// Model classes, the sentinels agentModel may name instead of a concrete id.
const (
	ClassCheap    = "cheap"
	ClassStandard = "standard"
	ClassFrontier = "frontier"
)

// Classes lists the sentinels, cheapest first.
var Classes = []string{ClassCheap, ClassStandard, ClassFrontier}

// IsClass reports whether s is a class sentinel.
func IsClass(s string) bool { return slices.Contains(Classes, s) }

// ResolveModel turns a requested agentModel into what the backend is given:
// a concrete id passes unchanged; a class resolves through the descriptor's
// ModelClassMap, and a class with no (or an empty) entry becomes "": the
// backend chooses, and its started event reports the concrete model. A
// sentinel never reaches a backend or a record.
func ResolveModel(d messages.Descriptor, requested string) string {
	if !IsClass(requested) {
		return requested
	}
	return d.ModelClassMap[requested]
}

// EffortMechanism returns how the backend applies level e, "" when its
// descriptor names no mechanism for it.
func EffortMechanism(d messages.Descriptor, e messages.Effort) string {
	if d.EffortSupport != messages.EffortAtStart && d.EffortSupport != messages.EffortPerTurn {
		return ""
	}
	return d.EffortMap[e]
}

// CheckStart rejects an effort the backend cannot apply at start.
func CheckStart(op string, d messages.Descriptor, e messages.Effort) error {
	if e == "" || EffortMechanism(d, e) != "" {
		return nil
	}
	return &messages.Error{Code: messages.CodeUnsupported, Op: op, Field: "effort",
		Message: fmt.Sprintf("backend %s names no mechanism for effort %s (effort support: %s)", d.ID, e, orNone(string(d.EffortSupport)))}
}

// CheckSwitch rejects a mid-session model or effort switch the backend
// cannot carry out: a model switch needs per-turn model selection, an
// effort switch per-turn effort with a mechanism for the level.
func CheckSwitch(op string, d messages.Descriptor, model string, e messages.Effort) error {
	if model != "" && d.ModelSelection != messages.ModelPerTurn {
		return &messages.Error{Code: messages.CodeUnsupported, Op: op, Field: "agentModel",
			Message: fmt.Sprintf("backend %s selects its model per session: set it at start", d.ID)}
	}
	if e != "" && (d.EffortSupport != messages.EffortPerTurn || EffortMechanism(d, e) == "") {
		return &messages.Error{Code: messages.CodeUnsupported, Op: op, Field: "effort",
			Message: fmt.Sprintf("backend %s cannot change effort mid-session to %s: set it at start", d.ID, e)}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// TaskClass is one row of the routing catalog: advisory, per cost profile.
type TaskClass struct {
	Name   string
	Class  string
	Effort messages.Effort
	Note   string
}

// Catalog is the task-class guidance (seed 000 §10): default to the
// backend's default at medium; downshift for bounded work; upshift effort
// only on a retry after failure or a hard brief.
var Catalog = []TaskClass{
	{"bounded edit (rename, docs, config, one-file fix)", ClassCheap, messages.EffortLow, "downshift: the cheap class is enough"},
	{"bug fix with a failing test", ClassStandard, messages.EffortMedium, "the default"},
	{"multi-file refactor or design work", ClassFrontier, messages.EffortHigh, "hard brief: upshift"},
	{"retry after a failed run", "", "", "same class, effort one step up; never route agentic work at a model with unverified tool calling"},
}

// GuidanceLines renders a backend's routing guidance for list-backends.
func GuidanceLines(d messages.Descriptor) []string {
	var out []string
	switch d.EffortSupport {
	case messages.EffortAtStart, messages.EffortPerTurn:
		levels := make([]string, 0, len(d.EffortMap))
		for _, e := range messages.Efforts() {
			if m := d.EffortMap[e]; m != "" {
				levels = append(levels, string(e)+"->"+m)
			}
		}
		when := "at start only"
		if d.EffortSupport == messages.EffortPerTurn {
			when = "at start and per turn (guide)"
		}
		if len(levels) == 0 {
			out = append(out, "effort: no verified mechanism: an explicit effort is rejected")
		} else {
			out = append(out, fmt.Sprintf("effort: %s (%s); other levels are rejected", when, strings.Join(levels, ", ")))
		}
	default:
		out = append(out, "effort: not supported: an explicit effort is rejected")
	}
	out = append(out, "cost: "+costFraming(d.Cost))
	var classes []string
	for _, c := range Classes {
		if m := d.ModelClassMap[c]; m != "" {
			classes = append(classes, c+"->"+m)
		} else {
			classes = append(classes, c+"->(backend default)")
		}
	}
	out = append(out, "model classes: "+strings.Join(classes, ", "))
	switch d.ModelSelection {
	case messages.ModelPerTurn:
		out = append(out, "model switch: per turn (guide agentModel)")
	case messages.ModelPerSession:
		out = append(out, "model switch: at start only")
	default:
		out = append(out, "model switch: none (the backend's model is fixed)")
	}
	for _, tc := range Catalog {
		if tc.Class == "" {
			out = append(out, "task: "+tc.Name+": "+tc.Note)
			continue
		}
		model := d.ModelClassMap[tc.Class]
		if model == "" {
			model = "backend default"
		}
		effort := string(tc.Effort)
		if EffortMechanism(d, tc.Effort) == "" {
			effort = "default effort"
		}
		out = append(out, fmt.Sprintf("task: %s: %s (%s) @ %s; %s", tc.Name, tc.Class, model, effort, tc.Note))
	}
	return out
}

func costFraming(c messages.CostProfile) string {
	switch c {
	case messages.CostSubscription:
		return "subscription: a speed and rate-limit play; a cheaper class keeps headroom, dollars do not move"
	case messages.CostMetered:
		return "api-metered: a dollar play; every round costs, so downshift bounded work"
	case messages.CostInternal:
		return "internal: runs on the host's own provider budget"
	case messages.CostFree:
		return "free: no cost; scripted or promotional"
	default:
		return "unknown cost profile"
	}
}
