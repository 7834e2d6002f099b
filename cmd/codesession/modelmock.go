package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/transports/modelmock"
)

// modelmockCmd serves a scripted model on loopback until interrupted: the
// model side of a manual run against a real agent CLI.
type modelmockCmd struct {
	scenario string // a file, or builtin:reference
	addr     string
	log      string // append every request as a JSON line here ("-": stderr)
}

type modelmockFlags struct {
	scenario, addr, log string
}

func (f *modelmockFlags) flagSet() *pflag.FlagSet {
	fs := newFlagSet("modelmock")
	fs.StringVar(&f.scenario, "scenario", "builtin:reference", "the scenario: a JSON file, or builtin:reference (TOOL:WRITE, TOOL:BASH, SLOW, PONG)")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:0", "the loopback address to listen on (port 0: a free one)")
	fs.StringVar(&f.log, "log", "", "append every request the server receives as a JSON line to this file (\"-\": stderr)")
	fs.StringVar(new(string), "home", "", "accepted as every command accepts it; the mock reads nothing from a home")
	return fs
}

func modelmockCommand() command {
	return command{
		name:    "modelmock",
		summary: "serve a scripted model (Anthropic Messages) on loopback and print its URL",
		usage:   "modelmock [--scenario FILE] [--addr 127.0.0.1:0] [--log FILE]",
		flags:   func() *pflag.FlagSet { return (&modelmockFlags{}).flagSet() },
		parse: func(args []string) (runner, error) {
			var f modelmockFlags
			fs := f.flagSet()
			if err := parseFlags(fs, args); err != nil {
				return nil, err
			}
			if fs.NArg() > 0 {
				return nil, usagef("modelmock", "takes no arguments, got %q", fs.Args())
			}
			return &modelmockCmd{scenario: f.scenario, addr: f.addr, log: f.log}, nil
		},
	}
}

func (c *modelmockCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "modelmock"
	sc, err := modelmock.LoadScenario(c.scenario)
	if err != nil {
		return &usageError{cmd: cmd, err: err}
	}
	var opts []modelmock.Option
	opts = append(opts, modelmock.WithAddr(c.addr))
	if c.log != "" {
		w := s.stderr
		if c.log != "-" {
			f, err := os.OpenFile(c.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
			if err != nil {
				return usagef(cmd, "--log: %v", err)
			}
			defer f.Close()
			w = f
		}
		var mu sync.Mutex
		enc := json.NewEncoder(w)
		opts = append(opts, modelmock.WithRequestHook(func(r modelmock.Request) {
			mu.Lock()
			defer mu.Unlock()
			_ = enc.Encode(r)
		}))
	}
	srv, err := modelmock.Start(nil, sc, opts...)
	if err != nil {
		return &usageError{cmd: cmd, err: err}
	}
	defer srv.Close()
	fmt.Fprintln(s.stdout, srv.URL())
	fmt.Fprintf(s.stderr, "modelmock: serving %s on %s until interrupted (ANTHROPIC_BASE_URL=%s)\n", c.scenario, srv.URL(), srv.URL())
	<-ctx.Done()
	return nil
}
