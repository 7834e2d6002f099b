package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/mcpserver"
	"github.com/codesession/codesession/actors/optool"
	"github.com/codesession/codesession/messages"
)

// mcpCmd serves the code_session op tool over MCP on stdin/stdout, for an
// agent host that spawns it (Claude Code, Codex, any MCP host). It drives
// sessions in its own embedded runtime, or, with --addr, through a daemon.
// The scope and the ceilings are this command's flags and config, never
// the calling agent's.
type mcpCmd struct {
	cfg        configFlags
	env        []string
	addr       string
	token      string
	cacert     string
	scope      string
	maxPosture string
	maxRounds  int
	pin        string
	readWait   time.Duration
	schema     bool
}

func (c *mcpCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("mcp")
	fs.StringVar(&c.addr, "addr", "", "drive sessions through the daemon at host:port or URL instead of an embedded runtime")
	fs.StringVar(&c.token, "token", "", "with --addr: the daemon's bearer token (default $CODESESSION_TOKEN, else <home>/token)")
	fs.StringVar(&c.cacert, "cacert", "", "with --addr: PEM file of the CA of the daemon's TLS certificate")
	fs.StringVar(&c.scope, "scope", "mcp", "the owner scope of the sessions this server starts (embedded runtime)")
	fs.StringVar(&c.maxPosture, "max-posture", "", "the ceiling of every session started here: plan, default, acceptEdits or full (default: the config's defaultMaxPosture)")
	fs.IntVar(&c.maxRounds, "max-rounds", 0, "at most this many turns per session (0: no limit beyond the config's)")
	fs.StringVar(&c.pin, "pin-backend", "", "only this backend may be started")
	fs.DurationVar(&c.readWait, "read-wait", optool.DefaultReadTurnWait, "how long read-turn blocks when the call names no timeoutMs")
	fs.BoolVar(&c.schema, "schema", false, "print the tool's definition (name, description, inputSchema) as JSON and exit")
	addEnv(fs, &c.env)
	c.cfg.addHome(fs)
	c.cfg.addConfig(fs)
	c.cfg.addVerbose(fs)
	return fs
}

func mcpCommand() command {
	return command{
		name:    "mcp",
		summary: "serve the code_session op tool over MCP on stdio, for an agent host",
		usage:   "mcp [--addr HOST:PORT] [--max-posture P] [--max-rounds N] [--pin-backend ID] [--env KEY=VALUE]...",
		flags:   func() *pflag.FlagSet { return (&mcpCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseMCPFlags(args) },
	}
}

func parseMCPFlags(args []string) (*mcpCmd, error) {
	const cmd = "mcp"
	c := &mcpCmd{}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef(cmd, "takes no arguments, got %q", fs.Arg(0))
	}
	if c.maxPosture != "" {
		if _, err := messages.ParsePosture(c.maxPosture); err != nil {
			return nil, usagef(cmd, "--max-posture: %v", err)
		}
	}
	if c.maxRounds < 0 {
		return nil, usagef(cmd, "--max-rounds must not be negative")
	}
	if c.readWait <= 0 || c.readWait > optool.MaxReadTurnWait {
		return nil, usagef(cmd, "--read-wait must be in (0, %s]", optool.MaxReadTurnWait)
	}
	if strings.TrimSpace(c.scope) == "" {
		return nil, usagef(cmd, "--scope must not be empty")
	}
	var err error
	if c.cfg.env, err = parseEnv(cmd, c.env); err != nil {
		return nil, err
	}
	if c.addr != "" && len(c.cfg.env) > 0 {
		return nil, usagef(cmd, "--env configures an embedded runtime; a daemon (--addr) has its own")
	}
	return c, nil
}

func (c *mcpCmd) exec(ctx context.Context, s *streams) (err error) {
	const cmd = "mcp"
	if c.schema {
		schema, err := messages.ToolInputSchema()
		if err != nil {
			return err
		}
		return writeJSON(s.stdout, map[string]any{"name": messages.ToolName,
			"description": messages.ToolDescription(), "inputSchema": schema})
	}
	cfg, err := c.cfg.load(cmd, s.getenv)
	if err != nil {
		return err
	}
	log := c.cfg.cliLogger(cfg, s.stderr) // stdout is the protocol's
	limits := messages.ScopeConstraints{MaxPosture: messages.Posture(c.maxPosture), MaxRounds: c.maxRounds, Backend: c.pin}
	if limits.MaxPosture == "" {
		limits.MaxPosture = cfg.DefaultMaxPosture
	}
	opts := optool.Options{Scope: c.scope, Limits: limits, DefaultMaxPosture: cfg.DefaultMaxPosture, ReadTurnWait: c.readWait}
	if c.addr != "" {
		cf := clientFlags{addr: c.addr, token: c.token, home: c.cfg.home, cacert: c.cacert}
		dc, err := cf.client(cmd, s.getenv)
		if err != nil {
			return err
		}
		ops := daemonOps{dc: dc}
		opts.Ops, opts.Watch = ops, ops.watch
		// the daemon's scope is shared: at disconnect, stop what this
		// client started
		return c.serve(ctx, s, opts, log, func(ctx context.Context, d *optool.Dispatcher, ids []string) {
			for _, sid := range ids {
				if _, err := d.Dispatch(ctx, messages.ToolCall{Op: messages.OpStop, Args: &messages.Stop{SessionID: sid}}, nil); err != nil {
					log.Warn("mcp: releasing a session at disconnect failed", "session", sid, "err", err)
				}
			}
		})
	}
	rt, err := actors.New(cfg, actors.WithLogger(log))
	if err != nil {
		return fmt.Errorf("start the runtime: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if cerr := rt.Close(cctx); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	// the runtime holds the same limits as the scope's constraints too
	if err := rt.SetScopeConstraints(ctx, c.scope, limits); err != nil {
		return err
	}
	opts.Ops, opts.Watch = rt, optool.StoreWatch(rt.Store())
	// the scope is this process's own: at disconnect every session it owns
	// is released{sweep}, as a settled driver's
	return c.serve(ctx, s, opts, log, func(ctx context.Context, _ *optool.Dispatcher, _ []string) {
		if n, err := rt.ReleaseScope(ctx, c.scope); err != nil {
			log.Warn("mcp: releasing the scope at disconnect failed", "err", err)
		} else if n > 0 {
			log.Info("mcp: client disconnected; released its sessions", "count", n)
		}
	})
}

// serve runs the MCP server on stdin/stdout until the client disconnects
// (or ctx ends), then releases what the client started (release), before
// the command returns.
func (c *mcpCmd) serve(ctx context.Context, s *streams, opts optool.Options, log *slog.Logger, release func(context.Context, *optool.Dispatcher, []string)) error {
	tracker := &startTracker{Ops: opts.Ops}
	opts.Ops = tracker
	d, err := optool.New(opts)
	if err != nil {
		return usagef("mcp", "%v", err)
	}
	srv, err := mcpserver.New(d, mcpserver.Options{Version: buildVersion(), Logger: log,
		// released below, once Run has returned, before the command does
		OnDisconnect: func(context.Context, []string) {}})
	if err != nil {
		return err
	}
	t := &mcp.IOTransport{Reader: io.NopCloser(s.stdin), Writer: nopWriteCloser{s.stdout}}
	runErr := srv.Run(ctx, t)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	release(rctx, d, tracker.ids())
	if runErr != nil && ctx.Err() == nil && !errors.Is(runErr, io.EOF) {
		return fmt.Errorf("mcp: %w", runErr)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// startTracker keeps the ids of the sessions its starts opened.
type startTracker struct {
	optool.Ops
	mu      sync.Mutex
	started []string
}

func (t *startTracker) Start(ctx context.Context, scope string, op messages.Start) (messages.StartResult, error) {
	res, err := t.Ops.Start(ctx, scope, op)
	if err == nil {
		t.mu.Lock()
		t.started = append(t.started, res.SessionID)
		t.mu.Unlock()
	}
	return res, err
}

func (t *startTracker) ids() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.started...)
}
