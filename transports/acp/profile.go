package acp

import (
	"context"
	"maps"
	"strings"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/subprocess"
)

// Profile is what one ACP agent package says about its CLI: only what
// differs between agents. Agent turns it into the client's Agent with the
// descriptor every ACP agent shares (a streaming, asking, resumable
// session over stdio; per-session model; interrupt, set-posture and the
// queue/interrupt guide modes; the ACP edit tool names), so an agent
// package holds its name, its package, its modes, its launch and its
// prose, and nothing it would copy from another.
type Profile struct {
	// ID and DisplayName are the descriptor's.
	ID, DisplayName string
	// Command is the executable looked up on PATH; Invocation the argument
	// that starts its ACP server ("--acp", "acp"), named in the process
	// model.
	Command, Invocation string
	// EnvBinary names the variable that holds the executable.
	EnvBinary string
	// Package is the npm package, Version the pinned version (the install
	// hint, the descriptor's CLIVersion).
	Package, Version string
	// PlanMode is the agent's read-only mode, WorkMode the mode every other
	// posture runs in; ModePrefix is put before both ids (copilot's mode
	// ids are URLs), not before the names the posture map shows.
	PlanMode, WorkMode, ModePrefix string
	// PlanLabel replaces the posture map's "mode <plan> (read-only)".
	PlanLabel string
	// Efforts maps an effort to the agent's; nil: the agent has none, and
	// an effort at start is refused (EffortNote says how, "" for the usual
	// "no effort setting (an effort is rejected)").
	Efforts map[messages.Effort]string
	// EffortNote is the descriptor's first weakness, about effort.
	EffortNote string
	// HonorsAllowed says the agent enforces allowedTools itself;
	// AllowedNote is then its weakness about them.
	HonorsAllowed bool
	AllowedNote   string
	// Cost is the cost profile (metered when empty).
	Cost messages.CostProfile
	// Strengths follow the two every ACP agent has.
	Strengths []string
	// Briefing is the descriptor's BriefingNotes, Attach its attach
	// command template, Containment its confinement needs.
	Briefing    string
	Attach      string
	Containment *messages.Containment
	// ParseVersion reads `--version` output (default: its last field,
	// without a leading v).
	ParseVersion func(out string) string
	// Launch returns the argv and extra environment of a session's
	// process (Agent.Launch); for an agent without Efforts it is called
	// only for a spec without an effort.
	Launch func(spec transports.SessionSpec, scratch string) (args, env []string, err error)
	// Documented, Scrub and BeforeLoad are the Agent's.
	Documented []string
	Scrub      []string
	BeforeLoad func(ctx context.Context, spec transports.SessionSpec) error
}

// Agent is the client's Agent for p.
func (p Profile) Agent() Agent {
	parse := p.ParseVersion
	if parse == nil {
		parse = func(out string) string { return strings.TrimPrefix(subprocess.LastField(out), "v") }
	}
	return Agent{
		Descriptor:   p.descriptor(),
		Command:      p.Command,
		EnvBinary:    p.EnvBinary,
		Package:      p.Package,
		Install:      "npm install " + p.Package + "@" + p.Version,
		ParseVersion: parse,
		Launch:       p.launch,
		Modes:        p.modes(),
		Documented:   p.Documented,
		Scrub:        p.Scrub,
		BeforeLoad:   p.BeforeLoad,
	}
}

func (p Profile) launch(spec transports.SessionSpec, scratch string) ([]string, []string, error) {
	if p.Efforts == nil && spec.Effort != "" {
		return nil, nil, messages.Errorf(messages.CodeUnsupported, messages.OpStart,
			"%s %s has no effort setting: start without effort", p.ID, p.Version)
	}
	return p.Launch(spec, scratch)
}

// modes: plan selects the plan mode, every other posture the work mode.
func (p Profile) modes() map[messages.Posture]string {
	return map[messages.Posture]string{
		messages.PosturePlan:        p.ModePrefix + p.PlanMode,
		messages.PostureDefault:     p.ModePrefix + p.WorkMode,
		messages.PostureAcceptEdits: p.ModePrefix + p.WorkMode,
		messages.PostureFull:        p.ModePrefix + p.WorkMode,
	}
}

func (p Profile) descriptor() messages.Descriptor {
	plan := p.PlanLabel
	if plan == "" {
		plan = "mode " + p.PlanMode + " (read-only)"
	}
	effort, effortNote := messages.EffortNone, p.EffortNote
	if p.Efforts != nil {
		effort = messages.EffortAtStart
	} else if effortNote == "" {
		effortNote = "no effort setting (an effort is rejected)"
	}
	allowedNote := p.AllowedNote
	if allowedNote == "" {
		allowedNote = "allowedTools cannot be honoured: the posture is the boundary"
	}
	cost := p.Cost
	if cost == "" {
		cost = messages.CostMetered
	}
	var attach *messages.ExternalAttach
	if p.Attach != "" {
		attach = &messages.ExternalAttach{CommandTemplate: p.Attach}
	}
	return messages.Descriptor{
		ID:             p.ID,
		DisplayName:    p.DisplayName,
		ProcessModel:   "one persistent `" + p.Command + " " + p.Invocation + "` process per session",
		Protocol:       "Agent Client Protocol (JSON-RPC 2.0 over stdio)",
		Granularity:    messages.GranularityStream,
		ClarifySupport: true,
		HonorsAllowed:  p.HonorsAllowed,
		Resume:         messages.ResumeNative,
		ModelSelection: messages.ModelPerSession,
		EffortSupport:  effort,
		EffortMap:      maps.Clone(p.Efforts),
		PostureMap: map[messages.Posture]string{
			messages.PosturePlan:        plan,
			messages.PostureDefault:     "mode " + p.WorkMode + ", asks",
			messages.PostureAcceptEdits: "mode " + p.WorkMode + ", edits allowed",
			messages.PostureFull:        "mode " + p.WorkMode + ", all allowed",
		},
		EditToolNames: EditToolNames(),
		Live: messages.LiveControls{
			Interrupt:  true,
			SetPosture: true,
			GuideModes: []messages.GuideMode{messages.GuideQueue, messages.GuideInterrupt},
		},
		Cost: cost,
		Strengths: append([]string{
			"streams text, tool calls and results over ACP",
			"asks before edits and shell commands (clarifications answered mid-turn)",
		}, p.Strengths...),
		Weaknesses: []string{
			effortNote,
			"a deny's reason reaches the agent with the next prompt (ACP has no field for it)",
			allowedNote,
		},
		BriefingNotes:  p.Briefing,
		ExternalAttach: attach,
		CLIVersion:     p.Version,
		Containment:    p.Containment,
	}
}
