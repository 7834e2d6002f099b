package main

import (
	"context"
	"encoding/json"

	"github.com/spf13/pflag"
)

// configCmd prints the effective configuration: defaults, the file, the
// CODESESSION_* variables and the flags, merged and validated, as the
// other commands would use it.
type configCmd struct {
	cfg configFlags
}

type configCmdFlags struct {
	cfg configFlags
	env []string
}

func (f *configCmdFlags) flagSet() *pflag.FlagSet {
	fs := newFlagSet("config")
	addEnv(fs, &f.env)
	f.cfg.addHome(fs)
	f.cfg.addConfig(fs)
	return fs
}

func configCommand() command {
	return command{
		name:    "config",
		summary: "print the effective configuration (defaults, file, environment, flags) as JSON",
		usage:   "config [--config FILE] [--home DIR] [--env KEY=VALUE]...",
		flags:   func() *pflag.FlagSet { return (&configCmdFlags{}).flagSet() },
		parse: func(args []string) (runner, error) {
			const cmd = "config"
			var f configCmdFlags
			fs := f.flagSet()
			if err := parseFlags(fs, args); err != nil {
				return nil, err
			}
			if fs.NArg() > 0 {
				return nil, usagef(cmd, "takes no arguments, got %q", fs.Arg(0))
			}
			c := &configCmd{cfg: f.cfg}
			var err error
			if c.cfg.env, err = parseEnv(cmd, f.env); err != nil {
				return nil, err
			}
			return c, nil
		},
	}
}

// redacted is what a backend environment value is shown as: the config
// may carry API keys there.
const redacted = "<redacted>"

func (c *configCmd) exec(_ context.Context, s *streams) error {
	cfg, err := c.cfg.load("config", s.getenv)
	if err != nil {
		return err
	}
	for k := range cfg.Env {
		cfg.Env[k] = redacted
	}
	enc := json.NewEncoder(s.stdout)
	enc.SetEscapeHTML(false) // for a person: & stays &
	enc.SetIndent("", "  ")
	return enc.Encode(cfg)
}
