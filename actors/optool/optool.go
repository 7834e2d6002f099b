// Package optool is the one dispatcher of the code_session op tool (seed
// 000 §1): it takes a tool call's JSON arguments, decodes them with
// messages.DecodeToolCall, holds them to the server's limits and runs the
// op on an Ops — the embedded actors.Runtime, or a client of a daemon —
// under the server's owner scope. Every surface that offers the tool (the
// MCP server in actors/mcpserver over stdio and streamable HTTP, and any Go
// program embedding the runtime) calls Dispatcher.Call, so they share one
// contract.
//
// The calling agent never chooses its scope or its ceilings: Options.Scope
// and Options.Limits come from the server's configuration (or the token
// the caller authenticated with). An explicit maxPosture above the limit,
// an explicit backend other than a pinned one, a set-posture above the
// limit, and allowedTools outside the limit's list are refused with a typed
// error; an omitted maxPosture or maxRounds takes the limit.
//
// read-turn blocks until the session's next result or the call's wait;
// while it blocks, Dispatcher.Call reports progress (the session's event
// log moving) through the caller's ProgressFunc. A caller's context ending
// (the host cancelled the call) withdraws the read and leaves the session
// running: read again later.
//
// A Dispatcher is safe for concurrent use. Testing: optool_test.go drives
// a Dispatcher over a real runtime with the scripted backend.
package optool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/codesession/codesession/messages"
)

// Ops is what the dispatcher drives; *actors.Runtime implements it.
type Ops interface {
	Start(ctx context.Context, scope string, op messages.Start) (messages.StartResult, error)
	ReadTurn(ctx context.Context, scope string, op messages.ReadTurn) (messages.TurnResult, error)
	Answer(ctx context.Context, scope string, op messages.Answer) (messages.AnswerResult, error)
	Guide(ctx context.Context, scope string, op messages.Guide) (messages.OKResult, error)
	SetPosture(ctx context.Context, scope string, op messages.SetPosture) (messages.SetPostureResult, error)
	Interrupt(ctx context.Context, scope string, op messages.Interrupt) (messages.OKResult, error)
	Stop(ctx context.Context, scope string, op messages.Stop) (messages.StopResult, error)
	ListBackends(ctx context.Context, scope string) (messages.ListBackendsResult, error)
}

// Mark is where a session's event log stands: its last seq and that
// event's type.
type Mark struct {
	Seq  uint64
	Last messages.EventType
}

// WatchFunc reads a session's Mark, for read-turn's progress.
type WatchFunc func(ctx context.Context, sessionID string) (Mark, error)

// ProgressFunc receives read-turn progress: a count that only grows (the
// events logged since the read began) and a line saying what moved.
type ProgressFunc func(progress float64, message string)

// Read-turn waits.
const (
	DefaultReadTurnWait = 5 * time.Minute
	MaxReadTurnWait     = 30 * time.Minute
	// DefaultProgressEvery is how often a blocked read-turn looks at the
	// session's log.
	DefaultProgressEvery = time.Second
)

// Options configure a Dispatcher. Ops and Scope are required.
type Options struct {
	Ops Ops
	// Scope is the owner scope every call runs under.
	Scope string
	// Limits are the server's ceilings (zero fields limit nothing).
	Limits messages.ScopeConstraints
	// DefaultMaxPosture is the ceiling an omitted maxPosture gets, clamped
	// to Limits.MaxPosture (empty: the limit itself, else the runtime's
	// default).
	DefaultMaxPosture messages.Posture
	// ReadTurnWait is read-turn's wait when the call names no timeoutMs.
	ReadTurnWait time.Duration
	// Watch, when set, lets a blocked read-turn report progress.
	Watch         WatchFunc
	ProgressEvery time.Duration
}

// Dispatcher runs tool calls. Build it with New.
type Dispatcher struct{ o Options }

// New checks o and fills its defaults.
func New(o Options) (*Dispatcher, error) {
	if o.Ops == nil {
		return nil, errors.New("optool: Options.Ops is required")
	}
	if o.Scope == "" {
		return nil, errors.New("optool: Options.Scope is required")
	}
	if err := o.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("optool: limits: %w", err)
	}
	if o.DefaultMaxPosture != "" && !o.DefaultMaxPosture.Valid() {
		return nil, fmt.Errorf("optool: unknown default posture %q", o.DefaultMaxPosture)
	}
	if o.ReadTurnWait <= 0 {
		o.ReadTurnWait = DefaultReadTurnWait
	}
	if o.ReadTurnWait > MaxReadTurnWait {
		return nil, fmt.Errorf("optool: read-turn wait %s is above %s", o.ReadTurnWait, MaxReadTurnWait)
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = DefaultProgressEvery
	}
	return &Dispatcher{o: o}, nil
}

// Scope is the owner scope the dispatcher's calls run under.
func (d *Dispatcher) Scope() string { return d.o.Scope }

// Limits are the server's ceilings.
func (d *Dispatcher) Limits() messages.ScopeConstraints { return d.o.Limits }

// Call decodes a tool call's JSON arguments and dispatches it. The result
// is the op's result (messages.StartResult, messages.TurnResult, ...);
// every error is a *messages.Error. progress may be nil.
func (d *Dispatcher) Call(ctx context.Context, args json.RawMessage, progress ProgressFunc) (any, error) {
	c, err := messages.DecodeToolCall(args)
	if err != nil {
		return nil, err
	}
	res, err := d.Dispatch(ctx, c, progress)
	if err != nil {
		return nil, messages.AsError(c.Op, err)
	}
	return res, nil
}

// Dispatch runs one decoded call: the one switch over the ops.
func (d *Dispatcher) Dispatch(ctx context.Context, c messages.ToolCall, progress ProgressFunc) (any, error) {
	scope, ops := d.o.Scope, d.o.Ops
	switch a := c.Args.(type) {
	case *messages.ListBackends:
		res, err := ops.ListBackends(ctx, scope)
		if err != nil || !a.Compact {
			return res, err
		}
		return res.Compact(), nil
	case *messages.Start:
		op, err := d.limitStart(*a)
		if err != nil {
			return nil, err
		}
		return ops.Start(ctx, scope, op)
	case *messages.ToolReadTurn:
		return d.readTurn(ctx, *a, progress)
	case *messages.Answer:
		return ops.Answer(ctx, scope, *a)
	case *messages.Guide:
		g := *a
		g.Source = messages.SourceDriver // the calling agent is the driver, never the user
		return ops.Guide(ctx, scope, g)
	case *messages.SetPosture:
		if lim := d.o.Limits.MaxPosture; lim != "" && a.Posture.Above(lim) {
			return nil, &messages.Error{Code: messages.CodeCeilingExceeded, Op: messages.OpSetPosture, Field: "posture",
				Message: fmt.Sprintf("posture %s is above this server's ceiling %s", a.Posture, lim)}
		}
		return ops.SetPosture(ctx, scope, *a)
	case *messages.Interrupt:
		return ops.Interrupt(ctx, scope, *a)
	case *messages.Stop:
		return ops.Stop(ctx, scope, *a)
	}
	return nil, messages.Errorf(messages.CodeInvalid, "tool", "unknown op %q", c.Op)
}

// limitStart holds a start to the server's limits, with the registry's
// rules for scope constraints (actors/constraints.go): refuse what is
// explicitly above, fill what is omitted.
func (d *Dispatcher) limitStart(op messages.Start) (messages.Start, error) {
	const o = messages.OpStart
	lim := d.o.Limits
	if lim.Backend != "" {
		if op.Backend != "" && op.Backend != lim.Backend {
			return op, &messages.Error{Code: messages.CodeInvalid, Op: o, Field: "backend",
				Message: fmt.Sprintf("backend %q contradicts this server's pinned backend %q", op.Backend, lim.Backend)}
		}
		op.Backend = lim.Backend
	}
	if lim.MaxPosture != "" {
		if op.MaxPosture != "" && op.MaxPosture.Above(lim.MaxPosture) {
			return op, &messages.Error{Code: messages.CodeCeilingExceeded, Op: o, Field: "maxPosture",
				Message: fmt.Sprintf("maxPosture %s is above this server's ceiling %s", op.MaxPosture, lim.MaxPosture)}
		}
		if op.MaxPosture == "" {
			op.MaxPosture = lim.MaxPosture
			if d.o.DefaultMaxPosture != "" {
				op.MaxPosture = messages.MinPosture(d.o.DefaultMaxPosture, lim.MaxPosture)
			}
		}
		if op.InitialPosture.Above(op.MaxPosture) {
			return op, &messages.Error{Code: messages.CodeCeilingExceeded, Op: o, Field: "initialPosture",
				Message: fmt.Sprintf("initialPosture %s is above the ceiling %s", op.InitialPosture, op.MaxPosture)}
		}
	}
	if lim.MaxRounds > 0 && (op.MaxRounds == 0 || op.MaxRounds > lim.MaxRounds) {
		op.MaxRounds = lim.MaxRounds
	}
	if lim.MaxCostUSD > 0 && (op.MaxCostUSD == 0 || op.MaxCostUSD > lim.MaxCostUSD) {
		op.MaxCostUSD = lim.MaxCostUSD
	}
	if lim.AllowedTools != nil {
		if op.AllowedTools == nil {
			op.AllowedTools = append([]string(nil), lim.AllowedTools...)
		} else {
			allowed := make(map[string]bool, len(lim.AllowedTools))
			for _, t := range lim.AllowedTools {
				allowed[t] = true
			}
			var keep []string
			for _, t := range op.AllowedTools {
				if allowed[t] {
					keep = append(keep, t)
				}
			}
			if len(keep) == 0 {
				return op, &messages.Error{Code: messages.CodeInvalid, Op: o, Field: "allowedTools",
					Message: "no requested tool is allowed by this server"}
			}
			op.AllowedTools = keep
		}
	}
	return op, nil
}

// readTurn blocks for the session's next result within the call's wait,
// reporting the log's movement meanwhile. The wait passing is a retryable
// timeout (the session goes on); the caller's ctx ending withdraws the read.
func (d *Dispatcher) readTurn(ctx context.Context, a messages.ToolReadTurn, progress ProgressFunc) (messages.TurnResult, error) {
	wait := d.o.ReadTurnWait
	if a.TimeoutMs > 0 {
		wait = min(time.Duration(a.TimeoutMs)*time.Millisecond, MaxReadTurnWait)
	}
	rctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if progress != nil && d.o.Watch != nil {
		stop := d.watch(rctx, a.SessionID, progress)
		defer stop()
	}
	res, err := d.o.Ops.ReadTurn(rctx, d.o.Scope, a.ReadTurn)
	if err != nil && ctx.Err() == nil && rctx.Err() != nil && messages.IsCode(err, messages.CodeTimeout) {
		return res, &messages.Error{Code: messages.CodeTimeout, Op: messages.OpReadTurn, Retryable: true,
			Message: fmt.Sprintf("no result within %s; the session goes on: read-turn again", wait)}
	}
	return res, err
}

// watch polls the session's log every ProgressEvery until stopped and
// reports each time it moved.
func (d *Dispatcher) watch(ctx context.Context, sid string, progress ProgressFunc) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start, err := d.o.Watch(ctx, sid)
		if err != nil {
			return
		}
		seen := start.Seq
		tick := time.NewTicker(d.o.ProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			m, err := d.o.Watch(ctx, sid)
			if err != nil || m.Seq <= seen {
				continue
			}
			seen = m.Seq
			n := m.Seq - start.Seq
			progress(float64(n), fmt.Sprintf("%d new events in the session's log, the last %s (seq %d)", n, m.Last, m.Seq))
		}
	}()
	return func() { cancel(); <-done }
}
