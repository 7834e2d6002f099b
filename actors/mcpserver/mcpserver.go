// Package mcpserver offers the code_session op tool over the Model Context
// Protocol, on the official Go SDK (github.com/modelcontextprotocol/go-sdk):
// one tool, `code_session`, whose input schema is messages.ToolInputSchema
// and whose every call goes to an optool.Dispatcher. New builds the server
// for any transport (stdio for a host that spawns `codesession mcp`, the
// SDK's in-memory transports in tests); NewHTTPHandler serves it as
// streamable HTTP (mounted at /mcp on `codesession serve`, behind the
// control plane's bearer token).
//
// A call's outcome is always a tool result, never a protocol error: a
// result is its JSON (text content, and the same value as structured
// content); a refused or failed op is a result with isError set whose text
// is {"error":{code, op, field?, message}} (the typed *messages.Error,
// without its cause). A read-turn called with a progress token sends
// notifications/progress while it blocks (the session's log moving). A
// host cancelling the call (notifications/cancelled) cancels the call's
// context, which withdraws the read and leaves the session running.
//
// When a client disconnects (stdio closed, its HTTP session ended), the
// sessions it started are released (release.go), as a driver's are when
// it settles.
//
// Concurrency: the server and the handler are safe for concurrent use;
// HTTPHandler.Close ends every request in flight (the daemon's shutdown).
// Testing: mcpserver_test.go connects the SDK's client over in-memory
// transports and over HTTP to a dispatcher over a real runtime.
package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codesession/codesession/actors/optool"
	"github.com/codesession/codesession/messages"
)

// Implementation is the server's name in the MCP handshake.
const Implementation = "codesession"

// Options configure the server. All are optional.
type Options struct {
	// Version is reported in the handshake.
	Version string
	Logger  *slog.Logger
	// OnDisconnect is told the sessions an MCP client started when it
	// disconnects (release.go); nil stops each through the dispatcher.
	OnDisconnect func(ctx context.Context, sessionIDs []string)
}

// New builds an MCP server with the one tool over d.
func New(d *optool.Dispatcher, o Options) (*mcp.Server, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	schema, err := messages.ToolInputSchema()
	if err != nil {
		return nil, err
	}
	version := o.Version
	if version == "" {
		version = "dev"
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: Implementation, Version: version}, &mcp.ServerOptions{
		Logger: log,
		Instructions: "codesession drives coding agents as supervised sessions through one tool, " + messages.ToolName +
			": call it with op list-backends first, then start, read-turn (answer clarifications), stop with a verdict.",
	})
	destructive, openWorld := true, true
	srv.AddTool(&mcp.Tool{
		Name:        messages.ToolName,
		Title:       "codesession: drive a coding agent",
		Description: messages.ToolDescription(),
		InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive, OpenWorldHint: &openWorld},
	}, toolHandler(d, log, newReleaser(d, log, o.OnDisconnect)))
	return srv, nil
}

// toolHandler turns every outcome of a call into a tool result.
func toolHandler(d *optool.Dispatcher, log *slog.Logger, rel *releaser) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var progress optool.ProgressFunc
		tok := req.Params.GetProgressToken()
		log.Debug("mcp: tool call", "tool", req.Params.Name, "progressToken", tok != nil)
		if tok != nil && req.Session != nil {
			progress = func(p float64, msg string) {
				nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if err := req.Session.NotifyProgress(nctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p, Message: msg}); err != nil {
					log.Debug("mcp: progress notification not sent", "err", err)
					return
				}
				log.Debug("mcp: progress notification sent", "progress", p)
			}
		}
		res, err := d.Call(ctx, req.Params.Arguments, progress)
		if err != nil {
			return errorResult(log, err), nil
		}
		if st, ok := res.(messages.StartResult); ok {
			rel.add(req.Session, st.SessionID)
		}
		b, merr := json.Marshal(res)
		if merr != nil {
			return errorResult(log, messages.Wrap(messages.CodeInternal, "tool", merr, "cannot encode the result")), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
	}
}

// ToolError is the body of a failed call's result.
type ToolError struct {
	Error *messages.Error `json:"error"`
}

func errorResult(log *slog.Logger, err error) *mcp.CallToolResult {
	e := messages.AsError("tool", err)
	if e.Code == messages.CodeInternal {
		log.Error("mcp: tool call failed", "op", e.Op, "err", err)
	}
	out := *e
	out.Err = nil // the cause may hold what is not safe to show
	b, _ := json.Marshal(ToolError{Error: &out})
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
}

// HTTPHandler serves the MCP server as streamable HTTP. Close ends every
// request in flight, so a daemon's shutdown is not held by a host's open
// stream.
type HTTPHandler struct {
	srv    *mcp.Server
	h      http.Handler
	mu     sync.Mutex
	closed bool
	live   map[*http.Request]context.CancelFunc
}

// NewHTTPHandler serves srv over streamable HTTP, one MCP session per
// client (so a host's notifications/cancelled reaches its call); idle
// sessions end after an hour.
func NewHTTPHandler(srv *mcp.Server, log *slog.Logger) *HTTPHandler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Logger: log, SessionTimeout: time.Hour})
	return &HTTPHandler{srv: srv, h: h, live: map[*http.Request]context.CancelFunc{}}
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	r = r.WithContext(ctx)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	h.live[r] = cancel
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.live, r)
		h.mu.Unlock()
	}()
	h.h.ServeHTTP(w, r)
}

// Close refuses new requests, cancels those in flight and ends every MCP
// session of the server.
func (h *HTTPHandler) Close() {
	h.mu.Lock()
	h.closed = true
	for _, cancel := range h.live {
		cancel()
	}
	h.mu.Unlock()
	for ss := range h.srv.Sessions() {
		_ = ss.Close()
	}
}
