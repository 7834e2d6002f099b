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
	s.emitAllLocked(s.turn, s.dec.update(n.Update))
	return nil
}

// emitAllLocked emits the decoder's events of turn, in order.
func (s *session) emitAllLocked(turn int, evs []messages.Event) {
	for _, ev := range evs {
		s.emitLocked(turn, ev)
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
	st, use := s.dec.permission(tc)
	turn := s.turn
	v, why := decide(s.ws, s.posture, st.name(), toolPaths(st.locations, st.content, st.rawInput))
	s.emitAllLocked(turn, use)
	if v != verdictAsk {
		if v == verdictReject {
			s.emitLocked(turn, messages.Event{Type: messages.EvWarning, Text: "refused " + st.name() + " " + st.title + ": " + why})
			s.notes = append(s.notes, "the host refused "+st.name()+" "+st.title+": "+why)
			s.emitAllLocked(turn, s.dec.notRun(id, st, "refused: "+why))
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
		s.emitAllLocked(turn, s.dec.notRun(id, st, strings.TrimSuffix("denied: "+r.Reason, ": ")))
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
