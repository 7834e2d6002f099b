package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/controlplane/web"
	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
)

// Server defaults.
const (
	// DefaultScope is the owner scope of every session the daemon drives.
	DefaultScope = "daemon"
	// DefaultMaxBodyBytes bounds a request body (a start's brief may be
	// 256 KiB).
	DefaultMaxBodyBytes = 1 << 20
	// DefaultReadTurnWait is how long a read-turn long poll waits when the
	// request names no timeoutMs; MaxReadTurnWait is the most it may ask.
	DefaultReadTurnWait = 30 * time.Second
	MaxReadTurnWait     = 5 * time.Minute
	// DefaultHeartbeat is the interval of the SSE heartbeat comments.
	DefaultHeartbeat = 15 * time.Second
	// DefaultWriteTimeout bounds each write to an SSE stream.
	DefaultWriteTimeout = 10 * time.Second
	// opTimeout bounds every op but read-turn.
	opTimeout = time.Minute
	// maxEventsPage bounds the events one GET of a session returns.
	maxEventsPage     = 5000
	defaultEventsPage = 500
)

// Options configure a Server. Runtime is required; the rest is optional.
type Options struct {
	Runtime *actors.Runtime
	// Bridge serves /api/events; without it the route answers 503.
	Bridge *Bridge
	// Gatherer serves /metrics; without it the route answers 503.
	Gatherer prometheus.Gatherer
	// Metrics receives the server's own families (requests, probes).
	Metrics prometheus.Registerer
	// Token is the bearer token every route but /healthz requires; empty
	// disables authentication (tests only).
	Token string
	// Scope is the owner scope of the default token's requests (default
	// DefaultScope); DefaultConstraints are its constraints.
	Scope              string
	DefaultConstraints messages.ScopeConstraints
	// Scopes are further tokens, each with its own scope (scopes.go).
	Scopes       []ScopeToken
	Logger       *slog.Logger
	MaxBodyBytes int64
	// ReadTurnWait is the default long-poll wait.
	ReadTurnWait time.Duration
	Heartbeat    time.Duration
	WriteTimeout time.Duration
	// MCP, when set, is served at /mcp behind the same bearer token: the
	// code_session op tool over streamable HTTP (actors/mcpserver).
	MCP http.Handler
}

// Server is the HTTP control plane: every route is in routes.go, every
// handler returns an error, and writeError is the one place errors become
// responses.
type Server struct {
	o        Options
	patterns []string // every pattern routes() registered, in order (the OpenAPI test walks them)
	rt       *actors.Runtime
	bridge   *Bridge
	log      *slog.Logger
	m        *serverMetrics
	metrics  http.Handler
	handler  http.Handler
	draining atomic.Bool
	scopes   *scopes
	// web is the browser console; its session cookie is the API's second
	// credential (see package web).
	web *web.Console

	// stallLive, when set (by tests), runs after an SSE stream's replay and
	// before it goes live, so a test can make a subscriber slow.
	stallLive func()
	// afterSubscribe, when set (by tests), runs once an SSE stream's
	// subscription is registered and before its replay, so a test can
	// publish an event that the stream both replays and finds queued.
	afterSubscribe func()
}

// NewServer builds the control plane over a runtime.
func NewServer(o Options) (*Server, error) {
	if o.Runtime == nil {
		return nil, errors.New("controlplane: Options.Runtime is required")
	}
	if o.Scope == "" {
		o.Scope = DefaultScope
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.ReadTurnWait <= 0 {
		o.ReadTurnWait = DefaultReadTurnWait
	}
	if o.ReadTurnWait > MaxReadTurnWait {
		return nil, fmt.Errorf("controlplane: ReadTurnWait %s is above %s", o.ReadTurnWait, MaxReadTurnWait)
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{o: o, rt: o.Runtime, bridge: o.Bridge, log: log, m: newServerMetrics(o.Metrics)}
	sc, err := newScopes(o)
	if err != nil {
		return nil, err
	}
	s.scopes = sc
	sc.delegationOwner = s.delegationOwner
	if err := sc.register(s); err != nil {
		return nil, err
	}
	s.web = web.New(web.Options{Token: o.Token})
	if o.Gatherer != nil {
		s.metrics = promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorLog: slogPrinter{log}})
	}
	s.handler = s.routes()
	return s, nil
}

// Handler is the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Drain makes every new request but /healthz's answer 503 (the daemon is
// shutting down); requests already running go on.
func (s *Server) Drain() { s.draining.Store(true) }

func (s *Server) store() store.Store { return s.rt.Store() }

// handlerFunc is a handler that returns its error for writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

var errDraining = &messages.Error{Code: messages.CodeInternal, Op: "http", Retryable: true,
	Message: "the daemon is shutting down; retry once it is back"}

// handle registers h for pattern: panics become a 500, a draining server
// answers 503, auth is checked unless open, and the outcome is counted.
func (s *Server) handle(mux *http.ServeMux, pattern string, open bool, h handlerFunc) {
	route := pattern
	s.patterns = append(s.patterns, pattern)
	mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("control plane handler panicked", "route", route, "panic", p)
				if !rec.wrote {
					s.writeError(rec, r, messages.Errorf(messages.CodeInternal, "http", "internal error"))
				}
			}
			s.m.request(route, rec.code())
		}()
		var err error
		scope := s.scopes.authenticate(r)
		if scope == "" && s.web.Authorized(r) {
			scope = s.o.Scope // the browser console logs in with the default token
		}
		switch {
		case s.draining.Load() && pattern != routeHealthz:
			err = errDraining
		case !open && scope == "":
			err = errUnauthorized
		default:
			if scope != "" {
				r = r.WithContext(context.WithValue(r.Context(), scopeKey{}, scope))
			}
			err = h(rec, r)
		}
		if err != nil {
			if rec.wrote {
				s.log.Warn("control plane: error after the response began", "route", route, "err", err)
				return
			}
			s.writeError(rec, r, err)
		}
	}))
}

// statusRecorder remembers the status written; Unwrap keeps
// http.ResponseController (flush, write deadlines) working through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// slogPrinter adapts slog to promhttp's logger.
type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.l.Error("metrics: " + fmt.Sprint(v...)) }
