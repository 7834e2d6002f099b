package main

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/config"
)

// configFlags are the flags that form the last configuration layer.
type configFlags struct {
	path string            // --config: the file; required when set
	home string            // --home: cfg.Home (and where <home>/config.json is looked for)
	env  map[string]string // --env KEY=VALUE: merged into cfg.Env
	// verbose: --verbose, the runtime's info lines on stderr (addVerbose)
	verbose bool
}

func (c *configFlags) addConfig(fs *pflag.FlagSet) {
	fs.StringVar(&c.path, "config", "", "config file (default $CODESESSION_CONFIG, else <home>/config.json when present)")
}

func (c *configFlags) addHome(fs *pflag.FlagSet) {
	fs.StringVar(&c.home, "home", "", "codesession home: sessions, learning data (default $CODESESSION_HOME, else ~/.codesession)")
}

// addEnv collects repeated --env KEY=VALUE flags; parseEnv checks them.
func addEnv(fs *pflag.FlagSet, dst *[]string) {
	fs.StringArrayVar(dst, "env", nil, "extra environment for the backend, KEY=VALUE (repeatable)")
}

// parseEnv turns KEY=VALUE strings into a map, rejecting malformed ones.
func parseEnv(cmd string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\n\x00") {
			return nil, usagef(cmd, "--env %q: want KEY=VALUE", kv)
		}
		out[k] = v
	}
	return out, nil
}

// load builds the command's Config: defaults, the file, CODESESSION_*
// variables, then these flags, then Validate. Every problem is a usage
// error (exit 2) that names the file, variable or field.
func (c *configFlags) load(cmd string, getenv func(string) string, flags ...func(*config.Config)) (config.Config, error) {
	home := c.home
	if home != "" {
		abs, err := filepath.Abs(home)
		if err != nil {
			return config.Config{}, usagef(cmd, "--home %q: %v", home, err)
		}
		home = abs
		// --home stands for CODESESSION_HOME everywhere, including where
		// <home>/config.json is looked for.
		outer := getenv
		getenv = func(k string) string {
			if k == "CODESESSION_HOME" {
				return home
			}
			return outer(k)
		}
	}
	cfg, err := config.Load(c.path, getenv)
	if err != nil {
		return cfg, &usageError{cmd: cmd, err: err}
	}
	if home != "" {
		cfg.Home = home
	}
	for _, k := range sortedKeys(c.env) {
		if cfg.Env == nil {
			cfg.Env = map[string]string{}
		}
		cfg.Env[k] = c.env[k]
	}
	for _, f := range flags {
		f(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, &usageError{cmd: cmd, err: fieldErrors(err)}
	}
	return cfg, nil
}

// fieldErrors introduces Validate's errors, which are joined one per line.
func fieldErrors(err error) error {
	return fmt.Errorf("invalid configuration:\n%w", err)
}

// addVerbose adds -v/--verbose: the runtime's log lines on stderr.
func (c *configFlags) addVerbose(fs *pflag.FlagSet) {
	fs.BoolVarP(&c.verbose, "verbose", "v", false, "log the runtime's info lines on stderr (default: warnings only; config logLevel sets it too)")
}

// cliLogLevel is a CLI command's log level: quiet (warn) by default like gh
// or kubectl, the config's logLevel when set, at least info with --verbose.
func (c *configFlags) cliLogLevel(cfg config.Config) string {
	level := cmp.Or(cfg.LogLevel, "warn")
	if c.verbose && level != "debug" {
		level = "info"
	}
	return level
}

// cliLogger is the logger a CLI command hands its runtime: stderr at
// cliLogLevel, in the config's format. It also becomes the process's default
// logger when main runs (for the actor library's own warnings).
func (c *configFlags) cliLogger(cfg config.Config, stderr io.Writer) *slog.Logger {
	level := c.cliLogLevel(cfg)
	if installLogger != nil {
		installLogger(stderr, level, cfg.LogFormat)
	}
	return newLogger(stderr, level, cfg.LogFormat)
}

// newLogger is a text or json slog logger on w at level.
func newLogger(w io.Writer, level, format string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // config.Validate has checked it
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
