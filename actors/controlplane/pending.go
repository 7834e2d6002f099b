package controlplane

import (
	"context"
	"slices"
	"time"

	"github.com/codesession/codesession/messages"
)

// pendingTail is how many of a session's last events are searched for an
// unanswered clarification: a question is raised in the running turn, so
// it sits near the end of the log.
const pendingTail = 256

// pendingFirstWait is how long a read-turn asks the session before it
// looks for a question already read and still unanswered: anything the
// session holds (a result not yet read) comes first and in order.
const pendingFirstWait = 300 * time.Millisecond

// pendingClarification returns, as the read-turn result it was, the oldest
// clarification of sid's running turn that has no answer yet, or nil.
// It reads only the durable log, so it never sees a question the session
// has not made durable (and so has not yet delivered).
func (s *Server) pendingClarification(ctx context.Context, sid string) (*messages.TurnResult, error) {
	last, err := s.store().LastSeq(ctx, sid)
	if err != nil {
		return nil, err
	}
	var after uint64
	if last > pendingTail {
		after = last - pendingTail
	}
	evs, err := s.store().ReadEvents(ctx, sid, after, 0)
	if err != nil {
		return nil, err
	}
	return pendingIn(sid, evs), nil
}

// pendingIn folds a log (tail) into the oldest unanswered clarification
// of its last turn: a question leaves when its answer is logged, and every
// one leaves when the turn closes or the session is released or adopted.
func pendingIn(sid string, evs []messages.PersistedEvent) *messages.TurnResult {
	var open []messages.PersistedEvent
	for _, pe := range evs {
		ev := pe.Event
		switch ev.Type {
		case messages.EvClarification:
			switch {
			case ev.ClarificationID == "":
			case ev.Decision == "":
				open = append(open, pe)
			default:
				open = slices.DeleteFunc(open, func(p messages.PersistedEvent) bool {
					return p.Event.ClarificationID == ev.ClarificationID
				})
			}
		case messages.EvTurnStarted, messages.EvTurnEnd, messages.EvTurnDiff, messages.EvEnded,
			messages.EvReleased, messages.EvOrphaned, messages.EvAdopted:
			open = nil
		}
	}
	if len(open) == 0 {
		return nil
	}
	p := open[0]
	return &messages.TurnResult{Kind: messages.KindClarification, SessionID: sid, Turn: p.Turn,
		ClarificationID: p.Event.ClarificationID, ToolName: p.Event.ToolName, Input: p.Event.Input}
}

// readOrPending is read-turn as a person needs it: whatever the session
// holds comes first; when it holds nothing yet and its turn waits on a
// question already read, that question is the answer again, at once,
// instead of a poll that blocks until someone answers it. deliver passes
// the result on; when it fails, a result from the session's queue goes
// back to it for the next read (a question read again is still pending).
func (s *Server) readOrPending(ctx context.Context, scope string, op messages.ReadTurn, deliver func(messages.TurnResult) error) error {
	first, cancel := context.WithTimeout(ctx, pendingFirstWait)
	err := s.rt.ReadTurnTo(first, scope, op, deliver)
	cancel()
	if err == nil || !messages.IsCode(err, messages.CodeTimeout) || ctx.Err() != nil {
		return err
	}
	if p, perr := s.pendingClarification(ctx, op.SessionID); perr == nil && p != nil {
		return deliver(*p)
	}
	return s.rt.ReadTurnTo(ctx, scope, op, deliver)
}
