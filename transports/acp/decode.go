package acp

import (
	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// decoder turns one turn's session/update notifications and the tool
// calls of its permission requests into events. ACP sends a tool call in
// pieces (tool_call, tool_call_update, the permission request's copy),
// so the decoder keeps what it has seen of each call; apart from that
// state it is a pure function of what it is given (the one look outside is
// agentTruncation's at the sizes of files an agent saved under home), so
// it is replayed against captures (TestDecodeGolden) and fuzzed
// (FuzzDecode) without a session. The session holds it under its lock
// and starts a fresh one each turn.
type decoder struct {
	outputCap int
	home      string
	tools     map[string]*toolState
}

func newDecoder(outputCap int, home string) *decoder {
	return &decoder{outputCap: outputCap, home: home, tools: map[string]*toolState{}}
}

// toolState is what is known of one tool call so far.
type toolState struct {
	kind      string
	title     string
	rawInput  any
	locations []acpsdk.ToolCallLocation
	content   []acpsdk.ToolCallContent
	used      bool // EvToolUse emitted
	done      bool // EvToolResult emitted
}

// update is the events of one session/update: text and thinking chunks,
// a tool call's use once it runs and its result once it is done; other
// kinds (plans, mode and command lists) report nothing.
func (d *decoder) update(u acpsdk.SessionUpdate) []messages.Event {
	switch {
	case u.AgentMessageChunk != nil:
		if t := u.AgentMessageChunk.Content.Text; t != nil && t.Text != "" {
			return []messages.Event{{Type: messages.EvText, Text: t.Text, Delta: true}}
		}
	case u.AgentThoughtChunk != nil:
		if t := u.AgentThoughtChunk.Content.Text; t != nil && t.Text != "" {
			return []messages.Event{{Type: messages.EvThinking, Text: t.Text, Delta: true}}
		}
	case u.ToolCall != nil:
		tc := u.ToolCall
		st := d.tool(string(tc.ToolCallId))
		st.merge(string(tc.Kind), tc.Title, tc.RawInput, tc.Locations, tc.Content)
		return d.progress(string(tc.ToolCallId), st, tc.Status, tc.RawOutput)
	case u.ToolCallUpdate != nil:
		tc := u.ToolCallUpdate
		st := d.tool(string(tc.ToolCallId))
		st.mergeUpdate(tc.Kind, tc.Title, tc.RawInput, tc.Locations, tc.Content)
		var status acpsdk.ToolCallStatus
		if tc.Status != nil {
			status = *tc.Status
		}
		return d.progress(string(tc.ToolCallId), st, status, tc.RawOutput)
	}
	return nil
}

// permission merges a permission request's copy of its tool call and
// returns the call's state (what the gate decides on) and its EvToolUse,
// unless that was emitted already: a call asked about is in use.
func (d *decoder) permission(tc acpsdk.ToolCallUpdate) (*toolState, []messages.Event) {
	id := string(tc.ToolCallId)
	st := d.tool(id)
	st.mergeUpdate(tc.Kind, tc.Title, tc.RawInput, tc.Locations, tc.Content)
	return st, d.use(id, st)
}

func (d *decoder) tool(id string) *toolState {
	st, ok := d.tools[id]
	if !ok {
		st = &toolState{}
		d.tools[id] = st
	}
	return st
}

func (st *toolState) merge(kind, title string, raw any, locs []acpsdk.ToolCallLocation, content []acpsdk.ToolCallContent) {
	if kind != "" {
		st.kind = kind
	}
	if title != "" {
		st.title = title
	}
	if raw != nil {
		st.rawInput = raw
	}
	if len(locs) > 0 {
		st.locations = locs
	}
	if len(content) > 0 {
		st.content = content
	}
}

// mergeUpdate merges an update's piece, whose kind and title are optional.
func (st *toolState) mergeUpdate(kind *acpsdk.ToolKind, title *string, raw any, locs []acpsdk.ToolCallLocation, content []acpsdk.ToolCallContent) {
	k, t := "", ""
	if kind != nil {
		k = string(*kind)
	}
	if title != nil {
		t = *title
	}
	st.merge(k, t, raw, locs, content)
}

// progress is the tool's use once it runs (or is asked about), and its
// result once it is done.
func (d *decoder) progress(id string, st *toolState, status acpsdk.ToolCallStatus, rawOutput any) []messages.Event {
	var evs []messages.Event
	if status == acpsdk.ToolCallStatusInProgress || status == acpsdk.ToolCallStatusCompleted || status == acpsdk.ToolCallStatusFailed {
		evs = d.use(id, st)
	}
	if st.done || (status != acpsdk.ToolCallStatusCompleted && status != acpsdk.ToolCallStatusFailed) {
		return evs
	}
	st.done = true
	out := resultText(st.content, rawOutput)
	capped, cut, orig := transports.CapOutput(out, d.outputCap)
	if agentCut, agentOrig := agentTruncation(rawOutput, d.home); agentCut {
		cut, orig = true, max(orig, agentOrig)
	}
	return append(evs, messages.Event{Type: messages.EvToolResult, ToolUseID: id, ToolName: st.name(), Output: capped,
		IsError: status == acpsdk.ToolCallStatusFailed, Truncated: cut, OriginalBytes: orig})
}

// notRun closes a call the host refused or denied with its result: it
// never ran. gemini 0.61 sends no tool_call_update for a rejected call,
// so without this the log had its tool_use and no tool_result; an agent
// that does report the failure later is not reported twice (st.done).
func (d *decoder) notRun(id string, st *toolState, why string) []messages.Event {
	if st.done {
		return nil
	}
	st.done = true
	return []messages.Event{{Type: messages.EvToolResult, ToolUseID: id, ToolName: st.name(), Output: why, IsError: true}}
}

func (d *decoder) use(id string, st *toolState) []messages.Event {
	if st.used {
		return nil
	}
	st.used = true
	return []messages.Event{{Type: messages.EvToolUse, ToolUseID: id, ToolName: st.name(), Input: st.input()}}
}
