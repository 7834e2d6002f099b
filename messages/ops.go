package messages

import (
	"encoding/json"
	"math"
	"strings"
)

// Limits on op fields, so a request cannot make the runtime hold unbounded data.
const (
	MaxBriefBytes    = 256 << 10
	MaxGuidanceBytes = 64 << 10
	MaxReasonBytes   = 4 << 10
	MaxTags          = 16
	MaxTagBytes      = 64
	MaxAllowedTools  = 256
	// Fields that may reach a backend's command line are kept well under
	// Linux's 128 KiB limit for one argument (E2BIG), all together too.
	MaxAppendSystemPromptBytes = 32 << 10
	MaxArgBytes                = 256 // a model name, one allowed tool
)

// Op names, used in errors and metrics.
const (
	OpStart        = "start"
	OpReadTurn     = "read-turn"
	OpAnswer       = "answer"
	OpGuide        = "guide"
	OpSetPosture   = "set-posture"
	OpInterrupt    = "interrupt"
	OpStop         = "stop"
	OpListBackends = "list-backends"
)

// Start opens a session from a brief. Omitted fields take the runtime's
// defaults and the owner scope's constraints (see the registry).
// AllowedTools distinguishes omitted (nil) from explicitly empty (rejected).
type Start struct {
	Brief          string  `json:"brief" msgpack:"brief"`
	MaxPosture     Posture `json:"maxPosture,omitempty" msgpack:"maxPosture,omitempty"`
	InitialPosture Posture `json:"initialPosture,omitempty" msgpack:"initialPosture,omitempty"`
	Backend        string  `json:"backend,omitempty" msgpack:"backend,omitempty"`
	Cwd            string  `json:"cwd,omitempty" msgpack:"cwd,omitempty"`
	Model          string  `json:"agentModel,omitempty" msgpack:"agentModel,omitempty"`
	Effort         Effort  `json:"effort,omitempty" msgpack:"effort,omitempty"`
	MaxRounds      int     `json:"maxRounds,omitempty" msgpack:"maxRounds,omitempty"`
	// MaxCostUSD stops the session cleanly (max_budget) once the cost its
	// backend reports reaches it; 0 is no budget.
	MaxCostUSD         float64  `json:"maxCostUsd,omitempty" msgpack:"maxCostUsd,omitempty"`
	AllowedTools       []string `json:"allowedTools,omitempty" msgpack:"allowedTools,omitempty"`
	AppendSystemPrompt string   `json:"appendSystemPrompt,omitempty" msgpack:"appendSystemPrompt,omitempty"`
	ResumeSessionID    string   `json:"resumeSessionId,omitempty" msgpack:"resumeSessionId,omitempty"`
	TaskTags           []string `json:"taskTags,omitempty" msgpack:"taskTags,omitempty"`
	// Isolate is "" or IsolateNone (work in Cwd), or IsolateWorktree (a git
	// worktree of its own on branch codesession/<short id>).
	Isolate string `json:"isolate,omitempty" msgpack:"isolate,omitempty"`
	// Exclusive refuses the start while another live session works in the
	// same directory (conflict); without it the start only warns.
	Exclusive bool `json:"exclusive,omitempty" msgpack:"exclusive,omitempty"`
	// Network is the session's network confinement: "" (the config's
	// default), NetworkOpen, NetworkModelOnly or NetworkLoopback.
	Network string `json:"network,omitempty" msgpack:"network,omitempty"`
}

// Network confinement modes of Start.Network (and the config's network).
// model-only: TCP only to the model endpoint's port(s) and the configured
// networkPorts, on any address (Landlock's TCP rules are per port); no TCP
// listening; UDP open. loopback: the same rules, and the session's tree in
// a network namespace of its own with only its loopback, where the model
// endpoint on the host's loopback and networkPorts are relayed (where the
// host lets the runtime make one; else as model-only, and the record says
// so).
const (
	NetworkOpen      = "open"
	NetworkModelOnly = "model-only"
	NetworkLoopback  = "loopback"
)

// ValidNetwork reports whether m is a network mode ("" included).
func ValidNetwork(m string) bool {
	switch m {
	case "", NetworkOpen, NetworkModelOnly, NetworkLoopback:
		return true
	}
	return false
}

// Isolation modes of Start.Isolate.
const (
	IsolateNone     = "none"
	IsolateWorktree = "worktree"
)

func (s *Start) Validate() error {
	const op = OpStart
	if strings.TrimSpace(s.Brief) == "" {
		return FieldError(op, "brief", "required")
	}
	if len(s.Brief) > MaxBriefBytes {
		return FieldError(op, "brief", "longer than %d bytes", MaxBriefBytes)
	}
	if s.MaxPosture != "" && !s.MaxPosture.Valid() {
		return FieldError(op, "maxPosture", "unknown posture %q", s.MaxPosture)
	}
	if s.InitialPosture != "" && !s.InitialPosture.Valid() {
		return FieldError(op, "initialPosture", "unknown posture %q", s.InitialPosture)
	}
	if s.MaxPosture != "" && s.InitialPosture.Above(s.MaxPosture) {
		return &Error{Code: CodeCeilingExceeded, Op: op, Field: "initialPosture",
			Message: "initialPosture " + string(s.InitialPosture) + " is above maxPosture " + string(s.MaxPosture)}
	}
	if s.Effort != "" && !s.Effort.Valid() {
		return FieldError(op, "effort", "unknown effort %q (want low, medium, high or max)", s.Effort)
	}
	if s.MaxRounds < 0 {
		return FieldError(op, "maxRounds", "must not be negative")
	}
	if err := validBudget(op, s.MaxCostUSD); err != nil {
		return err
	}
	if len(s.AppendSystemPrompt) > MaxAppendSystemPromptBytes {
		return FieldError(op, "appendSystemPrompt", "longer than %d bytes (it reaches the backend's command line)", MaxAppendSystemPromptBytes)
	}
	if len(s.Model) > MaxArgBytes || strings.ContainsAny(s.Model, "\x00\n") {
		return FieldError(op, "agentModel", "malformed or longer than %d bytes", MaxArgBytes)
	}
	if strings.ContainsRune(s.Brief, 0) {
		return FieldError(op, "brief", "a NUL byte cannot reach a backend")
	}
	if strings.ContainsRune(s.AppendSystemPrompt, 0) {
		return FieldError(op, "appendSystemPrompt", "a NUL byte cannot reach a backend")
	}
	if s.AllowedTools != nil {
		if len(s.AllowedTools) == 0 {
			return FieldError(op, "allowedTools", "explicitly empty: omit it to allow the backend's tools")
		}
		if len(s.AllowedTools) > MaxAllowedTools {
			return FieldError(op, "allowedTools", "more than %d entries", MaxAllowedTools)
		}
		for _, t := range s.AllowedTools {
			if strings.TrimSpace(t) == "" {
				return FieldError(op, "allowedTools", "empty tool name")
			}
			if len(t) > MaxArgBytes || strings.ContainsAny(t, "\x00\n") {
				return FieldError(op, "allowedTools", "a tool name that is malformed or longer than %d bytes", MaxArgBytes)
			}
		}
	}
	if s.ResumeSessionID != "" && strings.ContainsAny(s.ResumeSessionID, "\x00\n") {
		return FieldError(op, "resumeSessionId", "malformed")
	}
	switch s.Isolate {
	case "", IsolateNone, IsolateWorktree:
	default:
		return FieldError(op, "isolate", "unknown isolation %q (want none or worktree)", s.Isolate)
	}
	if !ValidNetwork(s.Network) {
		return FieldError(op, "network", "unknown network mode %q (want open, model-only or loopback)", s.Network)
	}
	if len(s.TaskTags) > MaxTags {
		return FieldError(op, "taskTags", "more than %d tags", MaxTags)
	}
	for _, t := range s.TaskTags {
		if t == "" || len(t) > MaxTagBytes {
			return FieldError(op, "taskTags", "each tag must be 1..%d bytes", MaxTagBytes)
		}
	}
	return nil
}

// StartResult is what start returns.
type StartResult struct {
	SessionID  string  `json:"sessionId" msgpack:"sessionId"`
	Backend    string  `json:"backend" msgpack:"backend"`
	Posture    Posture `json:"posture" msgpack:"posture"`
	MaxPosture Posture `json:"maxPosture" msgpack:"maxPosture"`
	MaxRounds  int     `json:"maxRounds" msgpack:"maxRounds"`
	MaxCostUSD float64 `json:"maxCostUsd,omitempty" msgpack:"maxCostUsd,omitempty"`
	Model      string  `json:"model,omitempty" msgpack:"model,omitempty"`
	Effort     Effort  `json:"effort,omitempty" msgpack:"effort,omitempty"`
	// Worktree is the session's own git worktree, when it is isolated.
	Worktree *Worktree `json:"worktree,omitempty" msgpack:"worktree,omitempty"`
	// Warnings say what the start went on despite (another live session
	// in the same directory).
	Warnings []string `json:"warnings,omitempty" msgpack:"warnings,omitempty"`
}

// ReadTurn blocks until the session's next read-turn result.
type ReadTurn struct {
	SessionID   string `json:"sessionId" msgpack:"sessionId"`
	IncludeDiff bool   `json:"includeDiff,omitempty" msgpack:"includeDiff,omitempty"`
}

func (r *ReadTurn) Validate() error { return validateSessionID(OpReadTurn, r.SessionID) }

// Action is one thing the agent did in a turn.
type Action struct {
	ToolUseID string          `json:"toolUseId,omitempty" msgpack:"toolUseId,omitempty"`
	ToolName  string          `json:"toolName" msgpack:"toolName"`
	Input     json.RawMessage `json:"input,omitempty" msgpack:"input,omitempty"`
	Result    string          `json:"result,omitempty" msgpack:"result,omitempty"`
	IsError   bool            `json:"isError,omitempty" msgpack:"isError,omitempty"`
}

// HistoryKind classifies a round-history entry.
type HistoryKind string

const (
	HistTurn          HistoryKind = "turn"
	HistAction        HistoryKind = "action"
	HistClarification HistoryKind = "clarification"
	HistDeny          HistoryKind = "deny"
	HistGuidance      HistoryKind = "guidance"
)

// HistoryEntry is one line of the round-history diet: a compact,
// compaction-immune account of what the driven agent did. Pinned entries
// (answered clarifications, denies, user guidance) are never dropped.
type HistoryEntry struct {
	Turn   int         `json:"turn" msgpack:"turn"`
	Kind   HistoryKind `json:"kind" msgpack:"kind"`
	Text   string      `json:"text" msgpack:"text"`
	Pinned bool        `json:"pinned,omitempty" msgpack:"pinned,omitempty"`
}

// TurnResult is the closed read-turn union, discriminated by Kind:
//
//	turn_complete  Actions, Text, RoundHistory, NumTurns?, CostUSD?, State, TurnDiff?
//	clarification  ClarificationID, ToolName, Input
//	ended          OK, Text, TurnDiff?
//	error          Message, Code?, TurnDiff?
//	max_rounds     OK, Text, Rounds, TurnDiff?
//	max_budget     OK, Text, Rounds, CostUSD (the session's total), TurnDiff?
type TurnResult struct {
	Kind      TurnKind `json:"kind" msgpack:"kind"`
	SessionID string   `json:"sessionId" msgpack:"sessionId"`
	Turn      int      `json:"turn" msgpack:"turn"`

	Text         string         `json:"text,omitempty" msgpack:"text,omitempty"`
	Actions      []Action       `json:"actions,omitempty" msgpack:"actions,omitempty"`
	RoundHistory []HistoryEntry `json:"roundHistory,omitempty" msgpack:"roundHistory,omitempty"`
	NumTurns     int            `json:"numTurns,omitempty" msgpack:"numTurns,omitempty"`
	CostUSD      float64        `json:"costUsd,omitempty" msgpack:"costUsd,omitempty"`
	State        TurnState      `json:"state,omitempty" msgpack:"state,omitempty"`

	ClarificationID string          `json:"clarificationId,omitempty" msgpack:"clarificationId,omitempty"`
	ToolName        string          `json:"toolName,omitempty" msgpack:"toolName,omitempty"`
	Input           json.RawMessage `json:"input,omitempty" msgpack:"input,omitempty"`

	OK      bool   `json:"ok,omitempty" msgpack:"ok,omitempty"`
	Message string `json:"message,omitempty" msgpack:"message,omitempty"`
	Code    Code   `json:"code,omitempty" msgpack:"code,omitempty"`
	Rounds  int    `json:"rounds,omitempty" msgpack:"rounds,omitempty"`

	TurnDiff *TurnDiff `json:"turnDiff,omitempty" msgpack:"turnDiff,omitempty"`
}

// Validate checks that the fields the kind requires are present and that a
// clarification carries no diff.
func (r *TurnResult) Validate() error {
	const op = OpReadTurn
	if !r.Kind.Valid() {
		return FieldError(op, "kind", "unknown kind %q", r.Kind)
	}
	switch r.Kind {
	case KindClarification:
		if r.ClarificationID == "" || r.ToolName == "" {
			return FieldError(op, "clarificationId", "clarification needs an id and a tool name")
		}
		if r.TurnDiff != nil {
			return FieldError(op, "turnDiff", "a clarification is not terminal and carries no diff")
		}
	case KindError:
		if r.Message == "" {
			return FieldError(op, "message", "error needs a message")
		}
	case KindMaxRounds:
		if r.Rounds <= 0 {
			return FieldError(op, "rounds", "max_rounds needs the round count")
		}
	case KindMaxBudget:
		if r.CostUSD <= 0 {
			return FieldError(op, "costUsd", "max_budget needs the session's cost")
		}
	}
	return nil
}

// Answer resolves the pending clarification.
type Answer struct {
	SessionID       string   `json:"sessionId" msgpack:"sessionId"`
	ClarificationID string   `json:"clarificationId" msgpack:"clarificationId"`
	Decision        Decision `json:"decision,omitempty" msgpack:"decision,omitempty"`
	// Allow is seed 000's wire form of the decision: true is allow_once,
	// false deny (with Reason). Validate turns it into Decision; given
	// beside a Decision, the two must agree.
	Allow  *bool  `json:"allow,omitempty" msgpack:"allow,omitempty"`
	Reason string `json:"reason,omitempty" msgpack:"reason,omitempty"`
	Note   string `json:"note,omitempty" msgpack:"note,omitempty"`
}

func (a *Answer) Validate() error {
	if err := validateSessionID(OpAnswer, a.SessionID); err != nil {
		return err
	}
	if a.ClarificationID == "" {
		return FieldError(OpAnswer, "clarificationId", "required")
	}
	if a.Allow != nil {
		switch {
		case a.Decision == "" && *a.Allow:
			a.Decision = DecisionAllowOnce
		case a.Decision == "":
			a.Decision = DecisionDeny
		case a.Decision.Valid() && a.Decision.Allows() != *a.Allow:
			return FieldError(OpAnswer, "allow", "allow %t contradicts decision %q: give one of them", *a.Allow, a.Decision)
		}
	}
	if a.Decision == "" {
		return FieldError(OpAnswer, "decision", "required (or allow: true or false)")
	}
	if !a.Decision.Valid() {
		return FieldError(OpAnswer, "decision", "unknown decision %q (want allow_once, allow_session, deny or cancel)", a.Decision)
	}
	if len(a.Reason) > MaxReasonBytes || len(a.Note) > MaxReasonBytes {
		return FieldError(OpAnswer, "reason", "longer than %d bytes", MaxReasonBytes)
	}
	return nil
}

// Clarification is a pending or answered permission question.
type Clarification struct {
	ID       string          `json:"clarificationId" msgpack:"clarificationId"`
	ToolName string          `json:"toolName" msgpack:"toolName"`
	Input    json.RawMessage `json:"input,omitempty" msgpack:"input,omitempty"`
	Decision Decision        `json:"decision,omitempty" msgpack:"decision,omitempty"`
	Reason   string          `json:"reason,omitempty" msgpack:"reason,omitempty"`
}

// AnswerResult is what answer returns.
type AnswerResult struct {
	OK            bool          `json:"ok" msgpack:"ok"`
	Clarification Clarification `json:"clarification" msgpack:"clarification"`
}

// Guide sends guidance. Mode defaults to queue; Source to driver. Model and
// Effort switch the backend's model for the next turn where it allows.
type Guide struct {
	SessionID string         `json:"sessionId" msgpack:"sessionId"`
	Text      string         `json:"text" msgpack:"text"`
	Mode      GuideMode      `json:"mode,omitempty" msgpack:"mode,omitempty"`
	Source    GuidanceSource `json:"source,omitempty" msgpack:"source,omitempty"`
	Model     string         `json:"agentModel,omitempty" msgpack:"agentModel,omitempty"`
	Effort    Effort         `json:"effort,omitempty" msgpack:"effort,omitempty"`
}

func (g *Guide) Validate() error {
	if err := validateSessionID(OpGuide, g.SessionID); err != nil {
		return err
	}
	if strings.TrimSpace(g.Text) == "" {
		return FieldError(OpGuide, "text", "required")
	}
	if len(g.Text) > MaxGuidanceBytes {
		return FieldError(OpGuide, "text", "longer than %d bytes", MaxGuidanceBytes)
	}
	if g.Mode != "" && !g.Mode.Valid() {
		return FieldError(OpGuide, "mode", "unknown mode %q (want steer, queue or interrupt)", g.Mode)
	}
	if g.Source != "" && !g.Source.Valid() {
		return FieldError(OpGuide, "source", "unknown source %q", g.Source)
	}
	if g.Effort != "" && !g.Effort.Valid() {
		return FieldError(OpGuide, "effort", "unknown effort %q", g.Effort)
	}
	return nil
}

// EffectiveMode returns the mode with the default applied.
func (g *Guide) EffectiveMode() GuideMode {
	if g.Mode == "" {
		return GuideQueue
	}
	return g.Mode
}

// OKResult is the result of ops that return only acknowledgement.
type OKResult struct {
	OK bool `json:"ok" msgpack:"ok"`
}

// SetPosture changes the session's posture, never above its ceiling.
type SetPosture struct {
	SessionID string  `json:"sessionId" msgpack:"sessionId"`
	Posture   Posture `json:"posture" msgpack:"posture"`
}

func (s *SetPosture) Validate() error {
	if err := validateSessionID(OpSetPosture, s.SessionID); err != nil {
		return err
	}
	if !s.Posture.Valid() {
		return FieldError(OpSetPosture, "posture", "unknown posture %q", s.Posture)
	}
	return nil
}

// SetPostureResult is what set-posture returns.
type SetPostureResult struct {
	OK      bool    `json:"ok" msgpack:"ok"`
	Posture Posture `json:"posture" msgpack:"posture"`
}

// Interrupt aborts the running turn.
type Interrupt struct {
	SessionID string `json:"sessionId" msgpack:"sessionId"`
}

func (i *Interrupt) Validate() error { return validateSessionID(OpInterrupt, i.SessionID) }

// Stop releases the session with an optional verdict. It is idempotent.
type Stop struct {
	SessionID string  `json:"sessionId" msgpack:"sessionId"`
	Outcome   Outcome `json:"outcome,omitempty" msgpack:"outcome,omitempty"`
	Note      string  `json:"note,omitempty" msgpack:"note,omitempty"`
}

func (s *Stop) Validate() error {
	if err := validateSessionID(OpStop, s.SessionID); err != nil {
		return err
	}
	if s.Outcome != "" && !s.Outcome.Valid() {
		return FieldError(OpStop, "outcome", "unknown outcome %q (want success, partial, failed or aborted)", s.Outcome)
	}
	if len(s.Note) > MaxReasonBytes {
		return FieldError(OpStop, "note", "longer than %d bytes", MaxReasonBytes)
	}
	return nil
}

// StopResult is what stop returns. Outcome is the verdict recorded: the
// driver's, or the inferred one.
type StopResult struct {
	OK             bool    `json:"ok" msgpack:"ok"`
	AlreadyStopped bool    `json:"alreadyStopped" msgpack:"alreadyStopped"`
	Outcome        Outcome `json:"outcome,omitempty" msgpack:"outcome,omitempty"`
}

// ListBackends asks for the capability matrix; it is sessionless.
type ListBackends struct {
	// Compact asks for CompactBackendsResult: one short row of facts per
	// backend instead of the whole descriptors (a few hundred bytes a
	// backend instead of several KB).
	Compact bool `json:"compact,omitempty" msgpack:"compact,omitempty"`
}

func (ListBackends) Validate() error { return nil }

// CompactBackend is one row of a compact list-backends: what a driver
// needs to pick a backend; the full descriptor is one call without compact.
type CompactBackend struct {
	ID             string            `json:"id" msgpack:"id"`
	DisplayName    string            `json:"displayName,omitempty" msgpack:"displayName,omitempty"`
	Available      bool              `json:"available" msgpack:"available"`
	Reason         string            `json:"reason,omitempty" msgpack:"reason,omitempty"`
	Version        string            `json:"version,omitempty" msgpack:"version,omitempty"`
	Scripted       bool              `json:"scripted,omitempty" msgpack:"scripted,omitempty"`
	ModelSelection ModelSelection    `json:"modelSelection" msgpack:"modelSelection"`
	EffortSupport  EffortSupport     `json:"effortSupport" msgpack:"effortSupport"`
	ModelClassMap  map[string]string `json:"modelClassMap,omitempty" msgpack:"modelClassMap,omitempty"`
	TrackRecord    []string          `json:"trackRecord,omitempty" msgpack:"trackRecord,omitempty"`
}

// CompactBackendsResult is a compact list-backends' answer.
type CompactBackendsResult struct {
	Backends []CompactBackend `json:"backends" msgpack:"backends"`
}

// Compact is r's compact form.
func (r ListBackendsResult) Compact() CompactBackendsResult {
	out := CompactBackendsResult{Backends: make([]CompactBackend, 0, len(r.Backends))}
	for _, b := range r.Backends {
		d, a := b.Descriptor, b.Availability
		out.Backends = append(out.Backends, CompactBackend{ID: d.ID, DisplayName: d.DisplayName, Available: a.Available, Reason: a.Reason,
			Version: a.Version, Scripted: d.Scripted, ModelSelection: d.ModelSelection, EffortSupport: d.EffortSupport,
			ModelClassMap: d.ModelClassMap, TrackRecord: b.TrackRecord})
	}
	return out
}

// ListBackendsResult is what list-backends returns.
type ListBackendsResult struct {
	Backends []BackendListing `json:"backends" msgpack:"backends"`
}

// ScopeConstraints narrow what sessions of one owner scope may do.
// Zero fields constrain nothing.
type ScopeConstraints struct {
	MaxPosture   Posture  `json:"maxPosture,omitempty" msgpack:"maxPosture,omitempty"`
	Backend      string   `json:"backend,omitempty" msgpack:"backend,omitempty"`
	MaxRounds    int      `json:"maxRounds,omitempty" msgpack:"maxRounds,omitempty"`
	MaxCostUSD   float64  `json:"maxCostUsd,omitempty" msgpack:"maxCostUsd,omitempty"`
	AllowedTools []string `json:"allowedTools,omitempty" msgpack:"allowedTools,omitempty"`
	// AdoptRecordID is a one-shot pin set by the runtime for a resumed
	// delegation (seed 000 §5, record adoption): the scope's next start
	// adopts this record (same id, gapless seq, rounds continuing, one new
	// run) instead of minting a session, and the pin is cleared.
	AdoptRecordID string `json:"adoptRecordId,omitempty" msgpack:"adoptRecordId,omitempty"`
}

func (c *ScopeConstraints) Validate() error {
	const op = "set-scope-constraints"
	if c.AdoptRecordID != "" && !ValidSessionID(c.AdoptRecordID) {
		return FieldError(op, "adoptRecordId", "not a session id")
	}
	if c.MaxPosture != "" && !c.MaxPosture.Valid() {
		return FieldError(op, "maxPosture", "unknown posture %q", c.MaxPosture)
	}
	if c.MaxRounds < 0 {
		return FieldError(op, "maxRounds", "must not be negative")
	}
	if err := validBudget(op, c.MaxCostUSD); err != nil {
		return err
	}
	if c.AllowedTools != nil && len(c.AllowedTools) == 0 {
		return FieldError(op, "allowedTools", "explicitly empty")
	}
	return nil
}

// OpResume names the resume op.
const OpResume = "resume"

// Resume revives an ended, failed or orphaned session under its own id:
// same record, gapless seq, rounds continuing, a new entry in runs[]. Brief
// is what the resumed run is told first (default: continue the task).
// Takeover lets a scope other than the record's owner resume it (the
// control plane's operator); without it only the owner scope may.
type Resume struct {
	SessionID string `json:"sessionId" msgpack:"sessionId"`
	Brief     string `json:"brief,omitempty" msgpack:"brief,omitempty"`
	Takeover  bool   `json:"takeover,omitempty" msgpack:"takeover,omitempty"`
	// MaxPosture, when set, is the ceiling the resumed run asks for: above
	// the resuming scope's ceiling it is refused (ceiling_exceeded). Left
	// empty, the record's ceiling is kept, clamped to the scope's with a
	// warning event.
	MaxPosture Posture `json:"maxPosture,omitempty" msgpack:"maxPosture,omitempty"`
}

func (r *Resume) Validate() error {
	if err := validateSessionID(OpResume, r.SessionID); err != nil {
		return err
	}
	if len(r.Brief) > MaxBriefBytes {
		return FieldError(OpResume, "brief", "longer than %d bytes", MaxBriefBytes)
	}
	if r.MaxPosture != "" && !r.MaxPosture.Valid() {
		return FieldError(OpResume, "maxPosture", "unknown posture %q", r.MaxPosture)
	}
	return nil
}

// validBudget refuses a negative, NaN or infinite maxCostUsd (0 is none).
func validBudget(op string, usd float64) error {
	if usd < 0 || math.IsNaN(usd) || math.IsInf(usd, 0) {
		return FieldError(op, "maxCostUsd", "must be a finite, non-negative amount in USD")
	}
	return nil
}
