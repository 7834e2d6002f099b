package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// DaemonOptions configure NewDaemon. Config is required (validated).
type DaemonOptions struct {
	Config config.Config
	// Token is the bearer token; empty disables authentication (tests).
	Token string
	// Registry receives every metric family; nil makes a fresh one with
	// the Go and process collectors.
	Registry *prometheus.Registry
	// Backends replaces actors.DefaultBackends().
	Backends *transports.Registry
	// Store replaces the file store under Config.Home; the daemon closes
	// it at Shutdown.
	Store  store.Store
	Logger *slog.Logger
	Bridge BridgeOptions
	// Server tunes the HTTP side; Runtime, Bridge, Gatherer, Metrics,
	// Token and Logger are filled in.
	Server Options
	// MCP configures the code_session tool at /mcp (mcp.go).
	MCP MCPOptions
	// OnEvent, when set, also sees every live event of the runtime (the
	// cluster publishes them to the other nodes' feeds); it must not block.
	OnEvent func(sid string, ev messages.PersistedEvent)
}

// Daemon is what `codesession serve` runs: the runtime (driving every
// session under one scope), the bridge subscribed to its event seam and
// the HTTP server over both.
type Daemon struct {
	log    *slog.Logger
	rt     *actors.Runtime
	st     store.Store
	bridge *Bridge
	srv    *Server
	reg    *prometheus.Registry
	mcp    interface{ Close() }
	notify *notifier // nil without notify.url

	once    sync.Once
	stopErr error
}

// NewDaemon opens the store, starts the runtime (which marks the records
// of dead processes orphaned) with the bridge on its event seam, and builds
// the server.
func NewDaemon(o DaemonOptions) (*Daemon, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	st := o.Store
	if st == nil {
		if err := o.Config.Validate(); err != nil {
			return nil, err
		}
		fs, err := filestore.Open(o.Config.Home, filestore.WithLogger(log))
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		st = fs
	}
	bo := o.Bridge
	bo.Metrics, bo.Logger = reg, log
	bridge := NewBridge(bo)
	listen := bridge.Listen
	if o.OnEvent != nil {
		listen = func(sid string, ev messages.PersistedEvent) { bridge.Listen(sid, ev); o.OnEvent(sid, ev) }
	}
	var notify *notifier
	if o.Config.Notify.URL != "" {
		notify = newNotifier(o.Config.Notify.URL, o.Token, log)
		inner := listen
		listen = func(sid string, ev messages.PersistedEvent) { inner(sid, ev); notify.listen(sid, ev) }
	}
	opts := []actors.Option{actors.WithStore(keepOpen{st}), actors.WithMetrics(reg),
		actors.WithEventListener(listen), actors.WithLogger(log), actors.WithLearningJob()}
	if o.Backends != nil {
		opts = append(opts, actors.WithBackends(o.Backends))
	}
	rt, err := actors.New(o.Config, opts...)
	if err != nil {
		st.Close()
		if notify != nil {
			notify.close(context.Background()) // nothing queued: no runtime ran
		}
		return nil, err
	}
	bridge.Attach(rt.Store())
	rt.OnDelegationChange(newQuestionFeed(bridge).changed) // before any delegation: none runs yet
	// abandon undoes a start that failed after the runtime was up
	abandon := func(err error) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = rt.Close(ctx)
		_ = bridge.Close(ctx)
		if notify != nil {
			notify.close(ctx)
		}
		st.Close()
		return err
	}
	so := o.Server
	if err := scopesFromConfig(&so, o.Config); err != nil {
		return nil, abandon(err)
	}
	so.Runtime, so.Bridge, so.Gatherer, so.Metrics, so.Token, so.Logger = rt, bridge, reg, reg, o.Token, log
	var mcpH interface{ Close() }
	if !o.MCP.Disable && so.MCP == nil {
		h, err := newMCPHandler(rt, o.Config, so.Scope, o.MCP, log)
		if err != nil {
			return nil, abandon(err)
		}
		so.MCP, mcpH = h, h
	}
	srv, err := NewServer(so)
	if err != nil {
		return nil, abandon(err)
	}
	return &Daemon{log: log, rt: rt, st: st, bridge: bridge, srv: srv, reg: reg, mcp: mcpH, notify: notify}, nil
}

// Handler is the control plane.
func (d *Daemon) Handler() http.Handler { return d.srv.Handler() }

// Runtime is the daemon's runtime.
func (d *Daemon) Runtime() *actors.Runtime { return d.rt }

// Registry is where the daemon's metrics are.
func (d *Daemon) Registry() *prometheus.Registry { return d.reg }

// Scope is the owner scope of the daemon's sessions.
func (d *Daemon) Scope() string { return d.srv.o.Scope }

// Shutdown stops the daemon in order: new requests are refused (503),
// running turns are interrupted, the runtime is closed (every live session
// is released with reason shutdown, so its record becomes orphaned with a
// final released event and can be resumed after a restart; every backend
// process is stopped), the bridge publishes what is pending and ends every
// SSE stream with a reconnect event, and the store is flushed and closed.
// The caller stops its http.Server's listener first (http.Server.Shutdown)
// and waits for it after. Only the first call does the work; later ones
// return its result.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.once.Do(func() { d.stopErr = d.shutdown(ctx) })
	return d.stopErr
}

func (d *Daemon) shutdown(ctx context.Context) error {
	d.srv.Drain()
	if d.mcp != nil {
		d.mcp.Close() // ends the MCP hosts' open streams and calls
	}
	var errs []error
	if ids, err := d.rt.LiveSessions(ctx); err == nil && len(ids) > 0 {
		d.log.Info("shutting down: interrupting running turns", "sessions", len(ids))
		for _, sid := range ids {
			ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := d.rt.Interrupt(ictx, d.Scope(), messages.Interrupt{SessionID: sid})
			cancel()
			if err != nil && !messages.IsCode(err, messages.CodeUnsupported) && !messages.IsCode(err, messages.CodeNotLive) {
				d.log.Warn("shutdown: interrupt failed", "session", sid, "err", err)
			}
		}
	}
	if err := d.rt.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("close the runtime: %w", err))
	}
	if d.notify != nil {
		d.notify.close(ctx) // the runtime is closed: no notice comes after
	}
	if err := d.bridge.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("close the live feed: %w", err))
	}
	if err := d.st.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close the store: %w", err))
	}
	return errors.Join(errs...)
}

// keepOpen lets the daemon, not the runtime, close the store: the bridge
// reads the final records after the runtime has closed.
type keepOpen struct{ store.Store }

func (keepOpen) Close() error { return nil }
