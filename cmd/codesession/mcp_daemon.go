package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/codesession/codesession/actors/optool"
	"github.com/codesession/codesession/messages"
)

// daemonOps is optool.Ops over a daemon's control plane, so `codesession
// mcp --addr` offers the op tool for sessions the daemon drives. The
// daemon decides the owner scope (its own); the scope argument is unused.
// Guidance through the daemon is recorded as the daemon's guidance route
// records it (source user).
type daemonOps struct{ dc *daemonClient }

var _ optool.Ops = daemonOps{}

func sessionPath(sid, op string) string { return "/api/code-sessions/" + sid + "/" + op }

// call is daemonClient.do with every failure typed: the daemon's own errors
// pass through; not reaching it is a retryable internal error that says so.
func (o daemonOps) call(ctx context.Context, method, path string, body, out any) error {
	err := o.dc.do(ctx, method, path, body, out)
	var e *messages.Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	if ctx.Err() != nil {
		return messages.Wrap(messages.CodeTimeout, "daemon", err, "cancelled before the daemon answered")
	}
	return &messages.Error{Code: messages.CodeInternal, Op: "daemon", Retryable: true, Err: err,
		Message: "cannot reach the codesession daemon at " + o.dc.base}
}

func (o daemonOps) Start(ctx context.Context, _ string, op messages.Start) (res messages.StartResult, err error) {
	return res, o.call(ctx, http.MethodPost, "/api/code-sessions", op, &res)
}

// ReadTurn long-polls (at most a minute per poll) until a result or ctx
// ends; a poll's own timeout is not the caller's.
func (o daemonOps) ReadTurn(ctx context.Context, _ string, op messages.ReadTurn) (res messages.TurnResult, err error) {
	for {
		poll := readPoll
		if dl, ok := ctx.Deadline(); ok {
			poll = min(poll, time.Until(dl))
		}
		if poll < time.Millisecond {
			return res, messages.Errorf(messages.CodeTimeout, messages.OpReadTurn, "the deadline passed before the session answered")
		}
		body := map[string]any{"includeDiff": op.IncludeDiff, "timeoutMs": poll.Milliseconds()}
		err = o.call(ctx, http.MethodPost, sessionPath(op.SessionID, "read-turn"), body, &res)
		switch {
		case err == nil:
			return res, nil
		case ctx.Err() != nil:
			return res, messages.Wrap(messages.CodeTimeout, messages.OpReadTurn, ctx.Err(), "cancelled before the session answered")
		case messages.IsCode(err, messages.CodeTimeout):
			continue
		}
		return res, err
	}
}

func (o daemonOps) Answer(ctx context.Context, _ string, op messages.Answer) (res messages.AnswerResult, err error) {
	body := map[string]any{"clarificationId": op.ClarificationID, "decision": op.Decision, "reason": op.Reason, "note": op.Note}
	return res, o.call(ctx, http.MethodPost, sessionPath(op.SessionID, "answer"), body, &res)
}

func (o daemonOps) Guide(ctx context.Context, _ string, op messages.Guide) (res messages.OKResult, err error) {
	body := map[string]any{"text": op.Text, "mode": op.Mode, "agentModel": op.Model, "effort": op.Effort}
	return res, o.call(ctx, http.MethodPost, sessionPath(op.SessionID, "guidance"), body, &res)
}

func (o daemonOps) SetPosture(ctx context.Context, _ string, op messages.SetPosture) (res messages.SetPostureResult, err error) {
	return res, o.call(ctx, http.MethodPost, sessionPath(op.SessionID, "posture"), map[string]any{"posture": op.Posture}, &res)
}

func (o daemonOps) Interrupt(ctx context.Context, _ string, op messages.Interrupt) (res messages.OKResult, err error) {
	return res, o.call(ctx, http.MethodPost, sessionPath(op.SessionID, "interrupt"), struct{}{}, &res)
}

func (o daemonOps) Stop(ctx context.Context, _ string, op messages.Stop) (res messages.StopResult, err error) {
	body := map[string]any{"outcome": op.Outcome, "note": op.Note}
	return res, o.call(ctx, http.MethodPost, sessionPath(op.SessionID, "stop"), body, &res)
}

func (o daemonOps) ListBackends(ctx context.Context, _ string) (res messages.ListBackendsResult, err error) {
	return res, o.call(ctx, http.MethodGet, "/api/backends", nil, &res)
}

// watch reads a session's Mark from the daemon's record view.
func (o daemonOps) watch(ctx context.Context, sid string) (optool.Mark, error) {
	var v struct {
		Events  []messages.PersistedEvent `json:"events"`
		LastSeq uint64                    `json:"lastSeq"`
	}
	if err := o.call(ctx, http.MethodGet, "/api/code-sessions/"+sid+"?limit=1", nil, &v); err != nil {
		return optool.Mark{}, err
	}
	m := optool.Mark{Seq: v.LastSeq}
	if v.LastSeq == 0 {
		return m, nil
	}
	path := fmt.Sprintf("/api/code-sessions/%s?afterSeq=%d&limit=1", sid, v.LastSeq-1)
	if err := o.call(ctx, http.MethodGet, path, nil, &v); err == nil && len(v.Events) == 1 {
		m.Last = v.Events[0].Event.Type
	}
	return m, nil
}
