package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors/cluster"
	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/actors/curation"
	"github.com/codesession/codesession/config"
)

// serveCmd runs the daemon: the runtime with the HTTP control plane and the
// live SSE feed, until SIGINT or SIGTERM, then shuts it down in order.
type serveCmd struct {
	cfg             configFlags
	cluster         clusterFlags
	addr            string
	tlsCert, tlsKey string
	insecureRemote  bool
	shutdownTimeout time.Duration
	logLevel        string
	logFormat       string
}

type serveFlags struct {
	cfg             configFlags
	cluster         clusterFlags
	env             []string
	addr            string
	tlsCert, tlsKey string
	insecureRemote  bool
	shutdownTimeout time.Duration
	logLevel        string
	logFormat       string
}

func (f *serveFlags) flagSet() *pflag.FlagSet {
	fs := newFlagSet("serve")
	fs.StringVar(&f.addr, "addr", "", "listen on host:port (default $CODESESSION_ADDR, else "+defaultAddr+"; port 0 picks one)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve TLS with this certificate (PEM); needs --tls-key")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the TLS certificate's private key (PEM)")
	fs.BoolVar(&f.insecureRemote, "insecure-remote", false, "allow a non-loopback --addr without TLS (the token then crosses the network in clear)")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful shutdown may take")
	fs.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (default: the config's logLevel)")
	fs.StringVar(&f.logFormat, "log-format", "", "text or json, one object a line (default: the config's logFormat)")
	addEnv(fs, &f.env)
	f.cluster.add(fs)
	f.cfg.addHome(fs)
	f.cfg.addConfig(fs)
	return fs
}

func serveCommand() command {
	return command{
		name:    "serve",
		summary: "run the daemon: the HTTP control plane, the live event feed and metrics",
		usage:   "serve [--addr HOST:PORT] [--tls-cert FILE --tls-key FILE] [--env KEY=VALUE]... [--node-id ID --cluster-listen HOST:PORT [--join HOST:PORT,...] [--cluster-root DIR]...]",
		flags:   func() *pflag.FlagSet { return (&serveFlags{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseServeFlags(args) },
	}
}

func parseServeFlags(args []string) (*serveCmd, error) {
	const cmd = "serve"
	var f serveFlags
	fs := f.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef(cmd, "takes no arguments, got %q", fs.Arg(0))
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return nil, usagef(cmd, "--tls-cert and --tls-key go together")
	}
	if f.shutdownTimeout <= 0 {
		return nil, usagef(cmd, "--shutdown-timeout must be positive")
	}
	c := &serveCmd{cfg: f.cfg, cluster: f.cluster, addr: f.addr, tlsCert: f.tlsCert, tlsKey: f.tlsKey,
		insecureRemote: f.insecureRemote, shutdownTimeout: f.shutdownTimeout, logLevel: f.logLevel, logFormat: f.logFormat}
	var err error
	if c.cfg.env, err = parseEnv(cmd, f.env); err != nil {
		return nil, err
	}
	return c, nil
}

// loopbackHost reports whether host names only this machine.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (c *serveCmd) exec(ctx context.Context, s *streams) (err error) {
	const cmd = "serve"
	addr := firstNonEmpty(c.addr, s.getenv("CODESESSION_ADDR"), defaultAddr)
	host, _, serr := net.SplitHostPort(addr)
	if serr != nil {
		return usagef(cmd, "--addr %q: %v", addr, serr)
	}
	if !loopbackHost(host) && c.tlsCert == "" && !c.insecureRemote {
		return usagef(cmd, "--addr %q is not a loopback address: serve TLS (--tls-cert, --tls-key) or pass --insecure-remote", addr)
	}
	cfg, err := c.cfg.load(cmd, s.getenv, func(cfg *config.Config) {
		cfg.LogLevel = cmp.Or(c.logLevel, cfg.LogLevel, "info") // the daemon logs at info by default
		cfg.LogFormat = cmp.Or(c.logFormat, cfg.LogFormat)
	})
	if err != nil {
		return err
	}
	c.cluster.apply(&cfg.Cluster)
	if err := cfg.Validate(); err != nil {
		return &usageError{cmd: cmd, err: err}
	}
	if installLogger != nil {
		installLogger(s.stderr, cfg.LogLevel, cfg.LogFormat)
	}
	var tlsCfg *tls.Config
	if c.tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return usagef(cmd, "--tls-cert/--tls-key: %v", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	tok, created, err := controlplane.LoadOrCreateToken(cfg.Home)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(s.stderr, "codesession serve: created the bearer token %s (mode 0600); it is shown this once:\n%s\n",
			controlplane.TokenPath(cfg.Home), tok)
	}
	var pub publisher
	do := controlplane.DaemonOptions{Config: cfg, Token: tok, Logger: slog.Default()}
	if cfg.Cluster.Enabled() {
		do.OnEvent = pub.publish
	}
	d, err := controlplane.NewDaemon(do)
	if err != nil {
		return fmt.Errorf("start the daemon: %w", err)
	}
	handler := d.Handler()
	leaveCluster := func() {} // a cluster node leaves before the daemon drains
	// the weekly capability pin check (data only; it never bumps a pin)
	refreshCtx, stopRefresh := context.WithCancel(ctx)
	defer stopRefresh()
	if cfg.Capabilities.Fetch { // off by default: the daemon contacts no host on its own
		go curation.RefreshJob(refreshCtx, cfg.Home, &curation.Refresher{Token: s.getenv("GITHUB_TOKEN"), GitHubBase: cfg.Capabilities.GitHubAPI}, slog.Default())
	}
	if cfg.Cluster.Enabled() {
		node, h, err := startClusterNode(cfg, d, &pub, s.getenv(cluster.LoseFeedEnv))
		if err != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout)
			defer cancel()
			return errors.Join(usagef(cmd, "cluster: %v", err), d.Shutdown(sctx))
		}
		defer node.Close()
		leaveCluster = func() { _ = node.Close() }
		handler = h
		fmt.Fprintf(s.stderr, "codesession serve: cluster node %s: gossip on %s, wire on %s\n", cfg.Cluster.NodeID, cfg.Cluster.Listen, node.Meta().Addr)
	}
	shutdown := func(hs *http.Server) error {
		leaveCluster() // the others see it leave at once; its gossip and wire ports are free
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout)
		defer cancel()
		httpDone := make(chan error, 1)
		if hs != nil {
			go func() { httpDone <- hs.Shutdown(sctx) }() // stop accepting; wait for the running requests
		} else {
			httpDone <- nil
		}
		err := d.Shutdown(sctx) // ends the long polls and the streams those requests are
		if herr := <-httpDone; herr != nil {
			hs.Close()
			err = errors.Join(err, fmt.Errorf("http shutdown: %w", herr))
		}
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Join(fmt.Errorf("listen on %s: %w", addr, err), shutdown(nil))
	}
	hs := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		TLSConfig:         tlsCfg,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
		go func() { served <- hs.ServeTLS(ln, "", "") }()
	} else {
		go func() { served <- hs.Serve(ln) }()
	}
	fmt.Fprintf(s.stderr, "codesession serve: listening on %s://%s (home %s)\n", scheme, ln.Addr(), cfg.Home)
	fmt.Fprintf(s.stderr, "codesession serve: the code_session MCP tool is at %s://%s/mcp (same bearer token)\n", scheme, ln.Addr())
	var runErr error
	select {
	case <-ctx.Done():
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			runErr = fmt.Errorf("serve: %w", err)
		}
	}
	fmt.Fprintln(s.stderr, "codesession serve: shutting down: live sessions are released as orphaned (resume them later)")
	if err := shutdown(hs); err != nil {
		runErr = errors.Join(runErr, err)
	}
	fmt.Fprintln(s.stderr, "codesession serve: stopped")
	return runErr
}
