package messages

import (
	"encoding/json"
	"time"
)

// EventType names a normalized agent event or a registry annotation.
type EventType string

// Agent events: produced by a transport from its backend's protocol.
const (
	// EvStarted: the backend session is open (ExternalSessionID, Model).
	EvStarted EventType = "started"
	// EvText: assistant text; Delta marks an incremental chunk.
	EvText EventType = "text"
	// EvThinking: reasoning text.
	EvThinking EventType = "thinking"
	// EvToolUse: the agent called a tool (ToolUseID, ToolName, Input).
	EvToolUse EventType = "tool_use"
	// EvToolResult: a tool's output (ToolUseID, Output, IsError, Truncated, OriginalBytes).
	EvToolResult EventType = "tool_result"
	// EvTurnEnd: the backend closed the turn (State, Text, NumTurns, CostUSD, TotalCostUSD, Usage).
	EvTurnEnd EventType = "turn_end"
	// EvEnded: the agent closed the session itself (Text).
	EvEnded EventType = "ended"
	// EvError: a transport or agent failure (Text; Fatal when the backend is gone).
	EvError EventType = "error"
	// EvWarning: a degradation that is not a failure (Text).
	EvWarning EventType = "warning"
)

// Registry annotations: produced by the runtime around the agent's events.
const (
	// EvTurnStarted: a turn began (Text is what was sent to the agent).
	EvTurnStarted EventType = "turn_started"
	// EvGuidance: guidance sent (Source, Mode, Text).
	EvGuidance EventType = "guidance"
	// EvPosture: posture changed (Posture).
	EvPosture EventType = "posture"
	// EvClarification: raised by the agent (ClarificationID, ToolName, Input)
	// and, when answered, again with Decision (and Reason for a deny).
	EvClarification EventType = "clarification"
	// EvTurnDiff: what the turn changed (Diff).
	EvTurnDiff EventType = "turn_diff"
	// EvInterrupt: an interrupt was requested.
	EvInterrupt EventType = "interrupt"
	// EvSupervision: a child of the session failed and was restarted (Text, Child).
	EvSupervision EventType = "supervision"
	// EvReleased: the session was released; always its last event (Reason, Outcome, Note).
	EvReleased EventType = "released"
	// EvOrphaned: the process that owned the session died before releasing it.
	EvOrphaned EventType = "orphaned"
	// EvAdopted: a resumed run adopted the record.
	EvAdopted EventType = "adopted"
)

var agentEventTypes = map[EventType]bool{EvStarted: true, EvText: true, EvThinking: true, EvToolUse: true,
	EvToolResult: true, EvTurnEnd: true, EvEnded: true, EvError: true, EvWarning: true}
var annotationTypes = map[EventType]bool{EvTurnStarted: true, EvGuidance: true, EvPosture: true,
	EvClarification: true, EvTurnDiff: true, EvInterrupt: true, EvSupervision: true, EvReleased: true,
	EvOrphaned: true, EvAdopted: true}

func (t EventType) Valid() bool      { return agentEventTypes[t] || annotationTypes[t] }
func (t EventType) Annotation() bool { return annotationTypes[t] }
func (t EventType) String() string   { return string(t) }

// Usage is token accounting for a turn.
type Usage struct {
	InputTokens      int64 `json:"inputTokens,omitempty" msgpack:"inputTokens,omitempty"`
	OutputTokens     int64 `json:"outputTokens,omitempty" msgpack:"outputTokens,omitempty"`
	CacheReadTokens  int64 `json:"cacheReadTokens,omitempty" msgpack:"cacheReadTokens,omitempty"`
	CacheWriteTokens int64 `json:"cacheWriteTokens,omitempty" msgpack:"cacheWriteTokens,omitempty"`
}

// Event is one normalized agent event or registry annotation. It is a flat
// struct discriminated by Type; only the fields named for a type are set.
type Event struct {
	Type EventType `json:"type" msgpack:"type"`

	Text  string `json:"text,omitempty" msgpack:"text,omitempty"`
	Delta bool   `json:"delta,omitempty" msgpack:"delta,omitempty"`

	ToolUseID     string          `json:"toolUseId,omitempty" msgpack:"toolUseId,omitempty"`
	ToolName      string          `json:"toolName,omitempty" msgpack:"toolName,omitempty"`
	Input         json.RawMessage `json:"input,omitempty" msgpack:"input,omitempty"`
	Output        string          `json:"output,omitempty" msgpack:"output,omitempty"`
	IsError       bool            `json:"isError,omitempty" msgpack:"isError,omitempty"`
	Truncated     bool            `json:"truncated,omitempty" msgpack:"truncated,omitempty"`
	OriginalBytes int             `json:"originalBytes,omitempty" msgpack:"originalBytes,omitempty"`

	State        TurnState `json:"state,omitempty" msgpack:"state,omitempty"`
	NumTurns     int       `json:"numTurns,omitempty" msgpack:"numTurns,omitempty"`
	CostUSD      float64   `json:"costUsd,omitempty" msgpack:"costUsd,omitempty"`
	TotalCostUSD float64   `json:"totalCostUsd,omitempty" msgpack:"totalCostUsd,omitempty"`
	Usage        *Usage    `json:"usage,omitempty" msgpack:"usage,omitempty"`
	Fatal        bool      `json:"fatal,omitempty" msgpack:"fatal,omitempty"`

	ExternalSessionID string `json:"externalSessionId,omitempty" msgpack:"externalSessionId,omitempty"`
	Model             string `json:"model,omitempty" msgpack:"model,omitempty"`
	// Containment (on EvStarted) is what the runtime's containment applied
	// to the session's processes; the record's run keeps it. Read only.
	Containment *Applied `json:"containment,omitempty" msgpack:"containment,omitempty"`

	Source          GuidanceSource `json:"source,omitempty" msgpack:"source,omitempty"`
	Mode            GuideMode      `json:"mode,omitempty" msgpack:"mode,omitempty"`
	Posture         Posture        `json:"posture,omitempty" msgpack:"posture,omitempty"`
	ClarificationID string         `json:"clarificationId,omitempty" msgpack:"clarificationId,omitempty"`
	Decision        Decision       `json:"decision,omitempty" msgpack:"decision,omitempty"`
	Reason          string         `json:"reason,omitempty" msgpack:"reason,omitempty"`
	Child           string         `json:"child,omitempty" msgpack:"child,omitempty"`

	Diff *TurnDiff `json:"diff,omitempty" msgpack:"diff,omitempty"`

	ReleaseReason ReleaseReason `json:"releaseReason,omitempty" msgpack:"releaseReason,omitempty"`
	Outcome       Outcome       `json:"outcome,omitempty" msgpack:"outcome,omitempty"`
	Note          string        `json:"note,omitempty" msgpack:"note,omitempty"`
}

// PersistedEvent is one line of a session's events.jsonl. Seq is assigned
// by the session actor (1, 2, 3, ... with no gap), never by the store; Turn
// is the turn the event belongs to (0 before the first turn).
type PersistedEvent struct {
	Seq   uint64    `json:"seq" msgpack:"seq"`
	At    time.Time `json:"at" msgpack:"at"`
	Turn  int       `json:"turn" msgpack:"turn"`
	Event Event     `json:"event" msgpack:"event"`
}
