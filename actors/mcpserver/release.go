package mcpserver

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codesession/codesession/actors/optool"
	"github.com/codesession/codesession/messages"
)

// Hosts that drive through MCP get a driver's end (seed 000 §2): when an
// MCP client disconnects (stdio closed, or its streamable-HTTP session
// ended or timed out), every session it started is released, as a
// settled driver's are. The server keeps, per MCP session, the ids its
// starts returned; when the session ends it hands them to
// Options.OnDisconnect, by default stopping each through the dispatcher
// (idempotent: one the host stopped already answers alreadyStopped).

type releaser struct {
	d    *optool.Dispatcher
	log  *slog.Logger
	onDC func(ctx context.Context, sessionIDs []string)

	mu      sync.Mutex
	started map[*mcp.ServerSession][]string
}

func newReleaser(d *optool.Dispatcher, log *slog.Logger, onDC func(context.Context, []string)) *releaser {
	r := &releaser{d: d, log: log, onDC: onDC, started: map[*mcp.ServerSession][]string{}}
	if r.onDC == nil {
		r.onDC = r.stopAll
	}
	return r
}

// add keeps sid for ss; the first one watches ss end.
func (r *releaser) add(ss *mcp.ServerSession, sid string) {
	if ss == nil {
		return
	}
	r.mu.Lock()
	_, watched := r.started[ss]
	r.started[ss] = append(r.started[ss], sid)
	r.mu.Unlock()
	if !watched {
		go func() {
			_ = ss.Wait()
			r.mu.Lock()
			ids := r.started[ss]
			delete(r.started, ss)
			r.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r.log.Info("mcp: client disconnected; releasing the sessions it started", "count", len(ids))
			r.onDC(ctx, ids)
		}()
	}
}

func (r *releaser) stopAll(ctx context.Context, ids []string) {
	for _, sid := range ids {
		if _, err := r.d.Dispatch(ctx, messages.ToolCall{Op: messages.OpStop, Args: &messages.Stop{SessionID: sid}}, nil); err != nil {
			r.log.Warn("mcp: releasing a disconnected client's session failed", "session", sid, "err", err)
		}
	}
}
