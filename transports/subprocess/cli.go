package subprocess

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// CLI names an agent CLI and where it comes from, for finding it.
type CLI struct {
	// Name is the CLI in messages: "droid".
	Name string
	// Command is looked up on PATH.
	Command string
	// EnvVar names the executable (CODESESSION_DROID_BIN; CI sets it to
	// the pinned install). May be empty.
	EnvVar string
	// Install says how to install it: "npm install droid@0.215.0".
	Install string
}

// Find returns the executable: explicit (a WithBinary option) when set,
// else EnvVar in env (a session's extra environment; the last entry wins),
// else EnvVar in this process's environment, else Command on PATH; or an
// error that says what is missing and how to install it.
func (c CLI) Find(explicit string, env []string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if c.EnvVar != "" {
		if b := EnvValue(env, c.EnvVar); b != "" {
			return b, nil
		}
		if b := os.Getenv(c.EnvVar); b != "" {
			return b, nil
		}
	}
	b, err := exec.LookPath(c.Command)
	if err != nil {
		return "", fmt.Errorf("the %s CLI is not installed here: no %s and no %s on PATH (%s)", c.Name, c.EnvVar, c.Command, c.Install)
	}
	return b, nil
}

// VersionProbe asks a CLI for its version with `--version`.
type VersionProbe struct {
	// Timeout bounds the run (the caller's ctx may bound it tighter).
	Timeout time.Duration
	// Env is the run's environment; nil is this process's.
	Env []string
	// Parse picks the version out of stdout; nil takes it trimmed.
	Parse func(stdout string) string
}

// Availability is what a transport's Probe reports: findErr when there is
// no executable, else bin's version, or why there is none.
func (p VersionProbe) Availability(ctx context.Context, bin string, findErr error) messages.Availability {
	a := messages.Availability{CheckedAt: time.Now()}
	if findErr != nil {
		a.Reason = findErr.Error()
		return a
	}
	a.Binary = bin
	v, err := p.Version(ctx, bin)
	if err != nil {
		a.Reason = err.Error()
		return a
	}
	a.Version, a.Available = v, true
	return a
}

// Version runs `bin --version` and returns the version Parse finds, or an
// error that says why there is none (with the end of its stderr).
func (p VersionProbe) Version(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = p.Env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("%s --version did not answer within %s (%v)", bin, p.Timeout, context.Cause(ctx))
		}
		return "", fmt.Errorf("%s --version failed (%v): %s", bin, err, transports.TailText(errb.Bytes(), 300))
	}
	parse := p.Parse
	if parse == nil {
		parse = strings.TrimSpace
	}
	v := parse(out.String())
	switch {
	case v == "" && strings.TrimSpace(out.String()) == "":
		return "", fmt.Errorf("%s --version printed nothing", bin)
	case v == "":
		return "", fmt.Errorf("%s --version printed no version", bin)
	}
	return v, nil
}

// FirstField is the first word of s ("0.215.0" of "0.215.0\n"), or "".
func FirstField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// LastField is the last word of s ("0.169.0" of "codex-cli 0.169.0"), or "".
func LastField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

// Positive sets *dst to v when v is above zero: an option given zero or
// less keeps its default.
func Positive[T ~int | ~int64](dst *T, v T) {
	if v > 0 {
		*dst = v
	}
}
