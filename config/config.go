// Package config is codesession's one configuration struct and how it is
// built: defaults, then a JSON file decoded strictly (unknown keys are
// errors), then CODESESSION_* environment variables, then flags (applied by
// cmd, the only package that knows flags). Validate returns errors that name
// the field.
//
// Config is plain data; build it once, validate it, then share it read-only.
// Tests build a Config with Default and set fields directly.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
)

// Duration is a time.Duration that reads and writes as "30s" in JSON.
type Duration = messages.Duration

// Supervision is the restart policy of a session's children.
type Supervision struct {
	// MaxRestarts within Window before the session fails.
	MaxRestarts int      `json:"maxRestarts"`
	Window      Duration `json:"window"`
	// BackoffInitial and BackoffMax bound the exponential backoff (with jitter).
	BackoffInitial Duration `json:"backoffInitial"`
	BackoffMax     Duration `json:"backoffMax"`
	// ShutdownTimeout bounds each child's stop; after it the child (and its
	// process group) is abandoned or killed.
	ShutdownTimeout Duration `json:"shutdownTimeout"`
	// Strategy is "one-for-one" or "rest-for-one".
	Strategy string `json:"strategy"`
}

// Config is everything a runtime, the daemon and the CLI are configured by.
type Config struct {
	// Home is $CODESESSION_HOME: sessions, learning data, the token.
	Home string `json:"home"`
	// DefaultBackend is used when start names none.
	DefaultBackend string `json:"defaultBackend"`
	// DefaultMaxPosture is the ceiling when start names none.
	DefaultMaxPosture messages.Posture `json:"defaultMaxPosture"`
	// DefaultPosture is the initial posture when start names none (clamped to the ceiling).
	DefaultPosture messages.Posture `json:"defaultPosture"`
	// DefaultMaxRounds applies when start names none; 0 means unlimited.
	DefaultMaxRounds int `json:"defaultMaxRounds"`
	// SessionLifetime releases a session this long after its start; 0 disables.
	SessionLifetime Duration `json:"sessionLifetime"`
	// StallAfter marks a running turn stalled after this long without output; 0 disables.
	StallAfter Duration `json:"stallAfter"`
	// Env is extra environment for backend processes, KEY -> VALUE.
	Env map[string]string `json:"env,omitempty"`
	// Supervision is the restart policy of each session's children.
	Supervision Supervision `json:"supervision"`
	// LogLevel is debug, info, warn or error. Empty (the default) means
	// each command's own: info for the daemon (serve), warn for the CLI
	// commands, which are quiet like gh or kubectl unless --verbose.
	LogLevel string `json:"logLevel,omitempty"`
	// LogFormat is text (key=value lines) or json (one object a line).
	LogFormat string `json:"logFormat,omitempty"`
	// Learning configures the learning loop's lesson distiller.
	Learning Learning `json:"learning"`
	// TurnTimeout is the per-turn wall clock of every backend, enforced by
	// the runtime (an over-time turn is interrupted, then ended); 0 disables.
	TurnTimeout Duration `json:"turnTimeout"`
	// Backends holds per-backend settings, by backend id.
	Backends map[string]BackendConfig `json:"backends,omitempty"`
	// Network is the default network confinement of a session's processes:
	// "" or "open", "model-only" or "loopback" (Landlock TCP port rules:
	// only the model endpoint's ports and NetworkPorts; see messages).
	Network string `json:"network,omitempty"`
	// NetworkPorts are more TCP ports a confined session may connect to
	// (an MCP server's, a package mirror's).
	NetworkPorts []int `json:"networkPorts,omitempty"`
	// Isolate is the default isolation of a session in a git repository:
	// "" or "none" (the session works in its cwd), or "worktree" (its own
	// git worktree and branch under <home>/worktrees).
	Isolate string `json:"isolate,omitempty"`
	// Daemon configures `codesession serve`: the scopes of its tokens.
	Daemon Daemon `json:"daemon"`

	// WarmPool is how many initialized agent processes a backend that can
	// (claude-code, codex, droid, opencode, copilot, gemini) keeps ready per
	// (binary, cwd, environment, start-only settings) for the next start;
	// 0 disables it.
	WarmPool int `json:"warmPool"`

	// Cluster makes the daemon a node of a cluster (cluster.go).
	Cluster Cluster `json:"cluster,omitzero"`

	// Capabilities configures capability curation's outbound reads.
	Capabilities Capabilities `json:"capabilities,omitzero"`

	// Notify tells someone outside when a session waits on a human.
	Notify Notify `json:"notify,omitzero"`
}

// Capabilities says whether capability curation may reach the network.
// codesession contacts no host on its own: with Fetch off (the default) a
// pinned skill is provisioned only from <home>/skill-cache, and the
// daemon runs no weekly pin check; `codesession capabilities check` still
// asks upstream when a person runs it.
type Capabilities struct {
	// Fetch lets session starts fetch pinned skills from GitHub's Contents
	// API (cached per pin) and the daemon check pins weekly.
	Fetch bool `json:"fetch,omitempty"`
	// GitHubAPI is the Contents API root; "" is https://api.github.com.
	GitHubAPI string `json:"githubAPI,omitempty"`
}

// Notify configures the daemon's webhook: a POST of a JSON
// code_session_waiting notice to URL each time a session starts waiting on
// an answer, signed with an HMAC-SHA256 of the body keyed by the daemon's
// bearer token (header X-Codesession-Signature: sha256=<hex>).
type Notify struct {
	// URL is the webhook, http or https; "" sends none.
	URL string `json:"url,omitempty"`
}

// Daemon configures the control plane's bearer tokens and their scopes.
// Every request runs under the owner scope of the token it carries; a
// token sees and drives only its own scope's sessions.
type Daemon struct {
	// MaxPosture is the posture ceiling of the default token's scope
	// (<home>/token, scope "daemon"); default acceptEdits.
	MaxPosture messages.Posture `json:"maxPosture"`
	// Scopes are further tokens, each with its own scope and constraints.
	Scopes []Scope `json:"scopes,omitempty"`
}

// Scope is one bearer token's owner scope and its constraints.
type Scope struct {
	// Name is the owner scope's id: unique, and not "daemon".
	Name string `json:"name"`
	// TokenFile holds the token (one line); it must be mode 0600.
	TokenFile string `json:"tokenFile"`
	// Admin lets the token read and set its own scope's constraints over
	// HTTP (GET and PUT /api/scope).
	Admin bool `json:"admin,omitempty"`
	// MaxPosture caps every session's ceiling; empty caps at
	// Daemon.MaxPosture.
	MaxPosture messages.Posture `json:"maxPosture,omitempty"`
	// MaxRounds caps every session's rounds; 0 leaves the default.
	MaxRounds int `json:"maxRounds,omitempty"`
	// AllowedTools, when set, is intersected with a start's tools.
	AllowedTools []string `json:"allowedTools,omitempty"`
	// Backends, when set, are the only backends the scope may start.
	Backends []string `json:"backends,omitempty"`
}

// DefaultScope is the owner scope of the daemon's default token.
const DefaultScope = "daemon"

// Isolation modes.
const (
	IsolateNone     = "none"
	IsolateWorktree = "worktree"
)

// BackendConfig is one backend's settings.
type BackendConfig struct {
	// PassEnv names variables of the daemon's environment this backend's
	// processes get, founder credentials included (which otherwise refuse
	// the start).
	PassEnv []string `json:"passEnv,omitempty"`
	// TurnTimeout overrides the config's turnTimeout for this backend.
	TurnTimeout *Duration `json:"turnTimeout,omitempty"`
	// Network overrides the config's network for this backend.
	Network string `json:"network,omitempty"`
}

// Learning configures the nightly lesson distillation (seed 000 §7).
type Learning struct {
	// Distill runs the daemon's nightly pass (default on).
	Distill bool `json:"distill"`
	// DistillAt is the local time of day the pass runs, "HH:MM" (default 04:00).
	DistillAt string `json:"distillAt"`
	// Provider is anthropic or openai-chat; empty picks by the keys set.
	Provider string `json:"provider,omitempty"`
	// Model is the cheap model the distiller asks; empty is the provider's default.
	Model string `json:"model,omitempty"`
}

// Default returns the built-in defaults. Home is $HOME/.codesession.
func Default() Config {
	home := ".codesession"
	if h, err := os.UserHomeDir(); err == nil {
		home = filepath.Join(h, ".codesession")
	}
	return Config{
		Home:              home,
		DefaultBackend:    "claude-code",
		DefaultMaxPosture: messages.PostureAcceptEdits,
		DefaultPosture:    messages.PostureDefault,
		DefaultMaxRounds:  50,
		SessionLifetime:   Duration(24 * time.Hour),
		StallAfter:        Duration(5 * time.Minute),
		Supervision: Supervision{
			MaxRestarts:     3,
			Window:          Duration(30 * time.Second),
			BackoffInitial:  Duration(250 * time.Millisecond),
			BackoffMax:      Duration(30 * time.Second),
			ShutdownTimeout: Duration(5 * time.Second),
			Strategy:        "one-for-one",
		},
		Learning:    Learning{Distill: true, DistillAt: "04:00"},
		TurnTimeout: Duration(30 * time.Minute),
		Daemon:      Daemon{MaxPosture: messages.PostureAcceptEdits},

		WarmPool: 1,
	}
}

// FieldError is a validation error that names the field.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return "config: " + e.Field + ": " + e.Message }

// Validate checks every field and returns all problems joined.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if strings.TrimSpace(c.Home) == "" {
		bad("home", "required")
	}
	if c.DefaultBackend == "" {
		bad("defaultBackend", "required")
	}
	if !c.DefaultMaxPosture.Valid() {
		bad("defaultMaxPosture", "unknown posture %q", c.DefaultMaxPosture)
	}
	if !c.DefaultPosture.Valid() {
		bad("defaultPosture", "unknown posture %q", c.DefaultPosture)
	}
	if c.DefaultMaxRounds < 0 {
		bad("defaultMaxRounds", "must not be negative")
	}
	if c.SessionLifetime < 0 {
		bad("sessionLifetime", "must not be negative")
	}
	if c.StallAfter < 0 {
		bad("stallAfter", "must not be negative")
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			bad("env", "invalid variable name %q", k)
		}
	}
	s := c.Supervision
	if s.MaxRestarts < 0 {
		bad("supervision.maxRestarts", "must not be negative")
	}
	if s.Window <= 0 {
		bad("supervision.window", "must be positive")
	}
	if s.BackoffInitial <= 0 || s.BackoffMax < s.BackoffInitial {
		bad("supervision.backoffInitial", "must be positive and not above backoffMax")
	}
	if s.ShutdownTimeout <= 0 {
		bad("supervision.shutdownTimeout", "must be positive")
	}
	if s.Strategy != "one-for-one" && s.Strategy != "rest-for-one" {
		bad("supervision.strategy", "want one-for-one or rest-for-one, got %q", s.Strategy)
	}
	if c.TurnTimeout < 0 {
		bad("turnTimeout", "must not be negative")
	}
	if c.WarmPool < 0 || c.WarmPool > 16 {
		bad("warmPool", "want 0 (off) to 16, got %d", c.WarmPool)
	}
	for id, b := range c.Backends {
		if id == "" {
			bad("backends", "a backend id is empty")
		}
		for _, k := range b.PassEnv {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				bad("backends."+id+".passEnv", "invalid variable name %q", k)
			}
		}
		if b.TurnTimeout != nil && *b.TurnTimeout < 0 {
			bad("backends."+id+".turnTimeout", "must not be negative")
		}
		if !messages.ValidNetwork(b.Network) {
			bad("backends."+id+".network", "want open, model-only or loopback, got %q", b.Network)
		}
	}
	if !messages.ValidNetwork(c.Network) {
		bad("network", "want open, model-only or loopback, got %q", c.Network)
	}
	for _, p := range c.NetworkPorts {
		if p < 1 || p > 65535 {
			bad("networkPorts", "want TCP ports 1..65535, got %d", p)
		}
	}
	switch c.Isolate {
	case "", IsolateNone, IsolateWorktree:
	default:
		bad("isolate", "want none or worktree, got %q", c.Isolate)
	}
	c.validateDaemon(bad)
	if u := c.Notify.URL; u != "" {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			bad("notify.url", "want an http or https URL, got %q", u)
		}
	}
	switch c.LogFormat {
	case "", "text", "json":
	default:
		bad("logFormat", "want text or json, got %q", c.LogFormat)
	}
	switch c.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		bad("logLevel", "want debug, info, warn or error, got %q", c.LogLevel)
	}
	if _, err := time.Parse("15:04", c.Learning.DistillAt); err != nil {
		bad("learning.distillAt", "want HH:MM, got %q", c.Learning.DistillAt)
	}
	switch c.Learning.Provider {
	case "", "anthropic", "openai-chat":
	default:
		bad("learning.provider", "want anthropic or openai-chat, got %q", c.Learning.Provider)
	}
	c.Cluster.validate(bad)
	return errors.Join(errs...)
}

// EnvList returns Env as sorted KEY=VALUE strings.
func (c *Config) EnvList() []string {
	out := make([]string, 0, len(c.Env))
	for k, v := range c.Env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// LoadFile merges a JSON config file over c. Unknown keys are errors; a
// missing file is an error only when required.
func (c *Config) LoadFile(path string, required bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !required {
			return nil
		}
		return fmt.Errorf("config: read %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	if dec.More() {
		return fmt.Errorf("config: %s: trailing data after the JSON object", path)
	}
	return nil
}

// envVars maps CODESESSION_* variables to setters.
var envVars = map[string]func(c *Config, v string) error{
	"CODESESSION_HOME":            func(c *Config, v string) error { c.Home = v; return nil },
	"CODESESSION_BACKEND":         func(c *Config, v string) error { c.DefaultBackend = v; return nil },
	"CODESESSION_MAX_POSTURE":     func(c *Config, v string) error { return setPosture(&c.DefaultMaxPosture, v) },
	"CODESESSION_POSTURE":         func(c *Config, v string) error { return setPosture(&c.DefaultPosture, v) },
	"CODESESSION_MAX_ROUNDS":      func(c *Config, v string) error { return setInt(&c.DefaultMaxRounds, v) },
	"CODESESSION_LIFETIME":        func(c *Config, v string) error { return setDuration(&c.SessionLifetime, v) },
	"CODESESSION_STALL_AFTER":     func(c *Config, v string) error { return setDuration(&c.StallAfter, v) },
	"CODESESSION_LOG_LEVEL":       func(c *Config, v string) error { c.LogLevel = v; return nil },
	"CODESESSION_LOG_FORMAT":      func(c *Config, v string) error { c.LogFormat = v; return nil },
	"CODESESSION_SUPERVISION_MAX": func(c *Config, v string) error { return setInt(&c.Supervision.MaxRestarts, v) },
	"CODESESSION_LESSONS":         func(c *Config, v string) error { return setBool(&c.Learning.Distill, v) },
	"CODESESSION_LESSONS_MODEL":   func(c *Config, v string) error { c.Learning.Model = v; return nil },
	"CODESESSION_TURN_TIMEOUT":    func(c *Config, v string) error { return setDuration(&c.TurnTimeout, v) },
	"CODESESSION_ISOLATE":         func(c *Config, v string) error { c.Isolate = v; return nil },
	"CODESESSION_NOTIFY_URL":      func(c *Config, v string) error { c.Notify.URL = v; return nil },
	"CODESESSION_DAEMON_MAX_POSTURE": func(c *Config, v string) error {
		return setPosture(&c.Daemon.MaxPosture, v)
	},

	"CODESESSION_WARM_POOL": func(c *Config, v string) error { return setInt(&c.WarmPool, v) },
	"CODESESSION_CAPABILITIES_FETCH": func(c *Config, v string) error {
		return setBool(&c.Capabilities.Fetch, v)
	},
}

// EnvNames lists the CODESESSION_* variables that config reads.
func EnvNames() []string {
	out := make([]string, 0, len(envVars))
	for k := range envVars {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// LoadEnv applies CODESESSION_* variables from getenv over c.
func (c *Config) LoadEnv(getenv func(string) string) error {
	for _, name := range EnvNames() {
		v := getenv(name)
		if v == "" {
			continue
		}
		if err := envVars[name](c, v); err != nil {
			return fmt.Errorf("config: %s: %w", name, err)
		}
	}
	return nil
}

// Load builds a Config: defaults, then the file (path, or
// $CODESESSION_CONFIG, or <home>/config.json if present), then the
// environment. Flags are applied by the caller, then Validate.
func Load(path string, getenv func(string) string) (Config, error) {
	c := Default()
	if h := getenv("HOME"); h != "" {
		c.Home = filepath.Join(h, ".codesession") // the caller's environment, not the process's
	}
	if h := getenv("CODESESSION_HOME"); h != "" {
		c.Home = h
	}
	required := path != ""
	if path == "" {
		path = getenv("CODESESSION_CONFIG")
		required = path != ""
	}
	if path == "" {
		path = filepath.Join(c.Home, "config.json")
	}
	if err := c.LoadFile(path, required); err != nil {
		return c, err
	}
	if err := c.LoadEnv(getenv); err != nil {
		return c, err
	}
	return c, nil
}

func setPosture(dst *messages.Posture, v string) error {
	p, err := messages.ParsePosture(v)
	if err != nil {
		return err
	}
	*dst = p
	return nil
}

func setInt(dst *int, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("not an integer: %q", v)
	}
	*dst = n
	return nil
}

func setBool(dst *bool, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("not a boolean: %q", v)
	}
	*dst = b
	return nil
}

func setDuration(dst *Duration, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	*dst = Duration(d)
	return nil
}

// validateDaemon checks the daemon's scopes: unique names other than the
// default scope's, a token file each, valid constraints.
func (c *Config) validateDaemon(bad func(field, format string, args ...any)) {
	if !c.Daemon.MaxPosture.Valid() {
		bad("daemon.maxPosture", "unknown posture %q", c.Daemon.MaxPosture)
	}
	seen := map[string]bool{}
	for i, sc := range c.Daemon.Scopes {
		f := fmt.Sprintf("daemon.scopes[%d]", i)
		switch {
		case sc.Name == "":
			bad(f+".name", "required")
		case sc.Name == DefaultScope:
			bad(f+".name", "%q is the default token's scope", DefaultScope)
		case seen[sc.Name]:
			bad(f+".name", "%q appears twice", sc.Name)
		}
		seen[sc.Name] = true
		if sc.TokenFile == "" {
			bad(f+".tokenFile", "required")
		}
		if sc.MaxPosture != "" && !sc.MaxPosture.Valid() {
			bad(f+".maxPosture", "unknown posture %q", sc.MaxPosture)
		}
		if sc.MaxRounds < 0 {
			bad(f+".maxRounds", "must not be negative")
		}
		if sc.AllowedTools != nil && len(sc.AllowedTools) == 0 {
			bad(f+".allowedTools", "explicitly empty: omit it to allow every tool")
		}
	}
}
