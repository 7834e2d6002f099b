package acp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// client is the session's side of ACP: the agent's updates become events,
// its permission questions pass the gate and the posture, then become
// clarifications. The SDK calls SessionUpdate in order from one goroutine
// and RequestPermission from a goroutine per request.
type client struct{ s *session }

var _ acpsdk.Client = (*client)(nil)

// SessionUpdate normalizes one session/update. Updates outside a turn (a
// session/load's replay, the tail of a cancelled turn) are dropped.
func (c *client) SessionUpdate(ctx context.Context, n acpsdk.SessionNotification) error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loading || !s.running || n.SessionId != s.sid {
		return nil
	}
	u := n.Update
	switch {
	case u.AgentMessageChunk != nil:
		if t := u.AgentMessageChunk.Content.Text; t != nil && t.Text != "" {
			s.emitLocked(s.turn, messages.Event{Type: messages.EvText, Text: t.Text, Delta: true})
		}
	case u.AgentThoughtChunk != nil:
		if t := u.AgentThoughtChunk.Content.Text; t != nil && t.Text != "" {
			s.emitLocked(s.turn, messages.Event{Type: messages.EvThinking, Text: t.Text, Delta: true})
		}
	case u.ToolCall != nil:
		tc := u.ToolCall
		st := s.toolLocked(string(tc.ToolCallId))
		st.merge(string(tc.Kind), tc.Title, tc.RawInput, tc.Locations, tc.Content)
		s.progressLocked(string(tc.ToolCallId), st, tc.Status, tc.RawOutput)
	case u.ToolCallUpdate != nil:
		tc := u.ToolCallUpdate
		st := s.toolLocked(string(tc.ToolCallId))
		kind, title := "", ""
		if tc.Kind != nil {
			kind = string(*tc.Kind)
		}
		if tc.Title != nil {
			title = *tc.Title
		}
		st.merge(kind, title, tc.RawInput, tc.Locations, tc.Content)
		var status acpsdk.ToolCallStatus
		if tc.Status != nil {
			status = *tc.Status
		}
		s.progressLocked(string(tc.ToolCallId), st, status, tc.RawOutput)
	}
	return nil
}

func (s *session) toolLocked(id string) *toolState {
	st, ok := s.tools[id]
	if !ok {
		st = &toolState{}
		s.tools[id] = st
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

// name is the tool's name in events: its ACP kind, the one name every
// agent gives ("other" when it gives none).
func (st *toolState) name() string {
	if st.kind == "" {
		return string(acpsdk.ToolKindOther)
	}
	return st.kind
}

// input is the tool's input in events: what it is called and the paths
// it names, with the agent's own raw input.
func (st *toolState) input() json.RawMessage {
	b, err := json.Marshal(map[string]any{"title": st.title, "paths": toolPaths(st.locations, st.content, st.rawInput), "rawInput": st.rawInput})
	if err != nil {
		b, _ = json.Marshal(map[string]any{"title": st.title})
	}
	return b
}

// progressLocked emits the tool's use once it runs (or is asked about),
// and its result once it is done.
func (s *session) progressLocked(id string, st *toolState, status acpsdk.ToolCallStatus, rawOutput any) {
	if status == acpsdk.ToolCallStatusInProgress || status == acpsdk.ToolCallStatusCompleted || status == acpsdk.ToolCallStatusFailed {
		s.useLocked(id, st)
	}
	if st.done || (status != acpsdk.ToolCallStatusCompleted && status != acpsdk.ToolCallStatusFailed) {
		return
	}
	st.done = true
	out := resultText(st.content, rawOutput)
	capped, cut, orig := transports.CapOutput(out, s.t.outputCap)
	if agentCut, agentOrig := agentTruncation(rawOutput, s.spec.Home); agentCut {
		cut, orig = true, max(orig, agentOrig)
	}
	s.emitLocked(s.turn, messages.Event{Type: messages.EvToolResult, ToolUseID: id, ToolName: st.name(), Output: capped,
		IsError: status == acpsdk.ToolCallStatusFailed, Truncated: cut, OriginalBytes: orig})
}

// notRunLocked closes a call the host refused or denied with its result:
// it never ran. gemini 0.61 sends no tool_call_update for a rejected call,
// so without this the log had its tool_use and no tool_result; an agent
// that does report the failure later is not reported twice (st.done).
func (s *session) notRunLocked(turn int, id string, st *toolState, why string) {
	if st.done {
		return
	}
	st.done = true
	s.emitLocked(turn, messages.Event{Type: messages.EvToolResult, ToolUseID: id, ToolName: st.name(), Output: why, IsError: true})
}

func (s *session) useLocked(id string, st *toolState) {
	if st.used {
		return
	}
	st.used = true
	s.emitLocked(s.turn, messages.Event{Type: messages.EvToolUse, ToolUseID: id, ToolName: st.name(), Input: st.input()})
}

// agentTruncation reads what an agent says of its own cut of a tool's
// output in the raw output: qwen 0.24 sends a big shell output as a ~4.5 kB
// head-and-tail summary (under any cap of ours) with "truncated": true and
// the whole output saved in "outputFiles" under its HOME. The result is
// then Truncated, and the original size is that of the saved files (0 when
// none is a regular file under home: the size is unknown).
func agentTruncation(raw any, home string) (cut bool, original int) {
	m, ok := raw.(map[string]any)
	if !ok {
		return false, 0
	}
	if t, _ := m["truncated"].(bool); !t {
		return false, 0
	}
	files, _ := m["outputFiles"].([]any)
	for _, f := range files {
		path, _ := f.(string)
		if home == "" || !filepath.IsAbs(path) || !strings.HasPrefix(filepath.Clean(path), filepath.Clean(home)+string(filepath.Separator)) {
			continue // only what the agent saved in its own HOME
		}
		if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
			original += int(fi.Size())
		}
	}
	return true, original
}

// resultText is a tool's output: its text content, else its raw output's
// "output" or "content" field, else the raw output as JSON.
func resultText(content []acpsdk.ToolCallContent, raw any) string {
	var out string
	for _, c := range content {
		if c.Content != nil && c.Content.Content.Text != nil {
			out += c.Content.Content.Text.Text
		}
	}
	if out != "" {
		return out
	}
	if m, ok := raw.(map[string]any); ok {
		for _, k := range []string{"output", "content"} {
			if v, ok := m[k].(string); ok {
				return v
			}
		}
	}
	if raw == nil {
		return ""
	}
	b, _ := json.Marshal(raw)
	return string(b)
}

// RequestPermission decides a permission question: the gate and the
// posture first, a clarification for the rest. The
// option is chosen by its kind, since ids differ per agent.
func (c *client) RequestPermission(ctx context.Context, p acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	s := c.s
	cancelled := acpsdk.RequestPermissionResponse{Outcome: acpsdk.RequestPermissionOutcome{Cancelled: &acpsdk.RequestPermissionOutcomeCancelled{}}}
	tc := p.ToolCall
	id := string(tc.ToolCallId)
	s.mu.Lock()
	if !s.running || s.closed || p.SessionId != s.sid {
		s.mu.Unlock()
		return cancelled, nil
	}
	st := s.toolLocked(id)
	kind, title := "", ""
	if tc.Kind != nil {
		kind = string(*tc.Kind)
	}
	if tc.Title != nil {
		title = *tc.Title
	}
	st.merge(kind, title, tc.RawInput, tc.Locations, tc.Content)
	turn := s.turn
	v, why := decide(s.ws, s.posture, st.name(), toolPaths(st.locations, st.content, st.rawInput))
	s.useLocked(id, st)
	if v != verdictAsk {
		if v == verdictReject {
			s.emitLocked(turn, messages.Event{Type: messages.EvWarning, Text: "refused " + st.name() + " " + st.title + ": " + why})
			s.notes = append(s.notes, "the host refused "+st.name()+" "+st.title+": "+why)
			s.notRunLocked(turn, id, st, "refused: "+why)
		}
		s.mu.Unlock()
		d := messages.DecisionAllowOnce
		if v == verdictReject {
			d = messages.DecisionDeny
		}
		return acpsdk.RequestPermissionResponse{Outcome: outcomeFor(p.Options, d)}, nil
	}
	q := s.asks.Raise()
	s.pendingAsk = q.ID
	s.emitLocked(turn, messages.Event{Type: messages.EvClarification, ClarificationID: q.ID, ToolUseID: id, ToolName: st.name(), Input: st.input()})
	s.mu.Unlock()

	var r transports.Reply
	select {
	case r = <-q.C:
	case <-ctx.Done():
		s.asks.Withdraw(q)
		return cancelled, nil
	}
	s.mu.Lock()
	if s.pendingAsk == q.ID {
		s.pendingAsk = ""
	}
	if r.Decision == messages.DecisionDeny && r.Reason != "" {
		s.notes = append(s.notes, "the host denied "+st.name()+" "+st.title+": "+r.Reason)
	}
	if r.Decision == messages.DecisionDeny || r.Decision == messages.DecisionCancel {
		s.notRunLocked(turn, id, st, strings.TrimSuffix("denied: "+r.Reason, ": "))
	}
	s.mu.Unlock()
	return acpsdk.RequestPermissionResponse{Outcome: outcomeFor(p.Options, r.Decision)}, nil
}

// The client advertises no file system and no terminal; an agent that
// calls them anyway is told the method is not there.

func (c *client) ReadTextFile(context.Context, acpsdk.ReadTextFileRequest) (acpsdk.ReadTextFileResponse, error) {
	return acpsdk.ReadTextFileResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodFsReadTextFile)
}

func (c *client) WriteTextFile(context.Context, acpsdk.WriteTextFileRequest) (acpsdk.WriteTextFileResponse, error) {
	return acpsdk.WriteTextFileResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodFsWriteTextFile)
}

func (c *client) CreateTerminal(context.Context, acpsdk.CreateTerminalRequest) (acpsdk.CreateTerminalResponse, error) {
	return acpsdk.CreateTerminalResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalCreate)
}

func (c *client) KillTerminal(context.Context, acpsdk.KillTerminalRequest) (acpsdk.KillTerminalResponse, error) {
	return acpsdk.KillTerminalResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalKill)
}

func (c *client) TerminalOutput(context.Context, acpsdk.TerminalOutputRequest) (acpsdk.TerminalOutputResponse, error) {
	return acpsdk.TerminalOutputResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalOutput)
}

func (c *client) ReleaseTerminal(context.Context, acpsdk.ReleaseTerminalRequest) (acpsdk.ReleaseTerminalResponse, error) {
	return acpsdk.ReleaseTerminalResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalRelease)
}

func (c *client) WaitForTerminalExit(context.Context, acpsdk.WaitForTerminalExitRequest) (acpsdk.WaitForTerminalExitResponse, error) {
	return acpsdk.WaitForTerminalExitResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalWaitForExit)
}
