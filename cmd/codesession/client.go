package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/actors/controlplane/client"
	"github.com/codesession/codesession/messages"
)

// defaultAddr is where `serve` listens and the ops commands look, unless
// --addr or $CODESESSION_ADDR says otherwise.
const defaultAddr = "127.0.0.1:7777"

// clientFlags are the flags every ops command shares: where the daemon is
// and how to authenticate to it.
type clientFlags struct {
	addr   string
	token  string
	home   string
	cacert string
}

func (c *clientFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "", "the daemon: host:port or an http(s) URL (default $CODESESSION_ADDR, else "+defaultAddr+")")
	fs.StringVar(&c.token, "token", "", "the daemon's bearer token (default $CODESESSION_TOKEN, else <home>/token)")
	fs.StringVar(&c.home, "home", "", "where the token is (default $CODESESSION_HOME, else ~/.codesession)")
	fs.StringVar(&c.cacert, "cacert", "", "PEM file of the CA that signed the daemon's TLS certificate")
}

// daemonClient is the console's handle on the daemon: the client package
// (actors/controlplane/client) for every op, and the parts tail's SSE
// reader uses directly.
type daemonClient struct {
	*client.Client
	base  string // scheme://host:port, no trailing slash
	token string
	hc    *http.Client
}

// baseURL turns --addr into a base URL.
func baseURL(cmd, addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", usagef(cmd, "--addr %q: want host:port or an http(s) URL", addr)
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/"), nil
}

// homeDir resolves the home the way config does: --home, then
// $CODESESSION_HOME, then $HOME/.codesession.
func homeDir(flag string, getenv func(string) string) string {
	switch {
	case flag != "":
		if abs, err := filepath.Abs(flag); err == nil {
			return abs
		}
		return flag
	case getenv("CODESESSION_HOME") != "":
		return getenv("CODESESSION_HOME")
	case getenv("HOME") != "":
		return filepath.Join(getenv("HOME"), ".codesession")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".codesession")
	}
	return ".codesession"
}

// client builds the daemon client from the flags and the environment.
func (c *clientFlags) client(cmd string, getenv func(string) string) (*daemonClient, error) {
	addr := firstNonEmpty(c.addr, getenv("CODESESSION_ADDR"), defaultAddr)
	base, err := baseURL(cmd, addr)
	if err != nil {
		return nil, err
	}
	tok := firstNonEmpty(c.token, getenv("CODESESSION_TOKEN"))
	if tok == "" {
		home := homeDir(c.home, getenv)
		if tok, err = controlplane.ReadToken(home); err != nil {
			return nil, usagef(cmd, "no token: %v (start the daemon with 'codesession serve', or pass --token)", err)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // a loopback daemon is never behind the user's proxy
	if c.cacert != "" {
		pem, err := os.ReadFile(c.cacert)
		if err != nil {
			return nil, usagef(cmd, "--cacert: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef(cmd, "--cacert %s: no PEM certificate in it", c.cacert)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	hc := &http.Client{Transport: tr}
	cl, err := client.New(base, tok, client.WithHTTPClient(hc))
	if err != nil {
		return nil, usagef(cmd, "--addr %q: %v", addr, err)
	}
	return &daemonClient{Client: cl, base: base, token: tok, hc: hc}, nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// do sends one request through the client package: data into out, or
// the daemon's error as a *messages.Error.
func (c *daemonClient) do(ctx context.Context, method, path string, body, out any) error {
	return c.Do(ctx, method, path, body, out)
}

// remoteErr names the op an error came from and makes a request refused
// for what was asked a usage error (exit 2), as run does.
func remoteErr(cmd, op string, err error) error {
	var ue *usageError
	if errors.As(err, &ue) {
		return err
	}
	if messages.IsCode(err, messages.CodeUnauthorized) {
		return &usageError{cmd: cmd, err: fmt.Errorf("%s: %w (check --token or <home>/token)", op, err)}
	}
	return rejected(cmd, opErr(op, err))
}

// sessionArg checks a SESSION argument before it is put into a URL.
// parseSessionFlags parses args into fs and returns the command's one
// SESSION argument, validated.
func parseSessionFlags(cmd string, fs *pflag.FlagSet, args []string) (string, error) {
	if err := parseFlags(fs, args); err != nil {
		return "", err
	}
	if fs.NArg() != 1 {
		return "", usagef(cmd, "want one SESSION argument, got %d", fs.NArg())
	}
	return sessionArg(cmd, fs.Arg(0))
}

func sessionArg(cmd, id string) (string, error) {
	if _, ok := messages.SessionIDPrefixOf(id); !ok {
		return "", usagef(cmd, "%q is not a session id or the start of one (at least %d of its hex digits; see 'codesession ls')", id, messages.MinIDPrefixHex)
	}
	return id, nil // the daemon resolves a unique prefix
}

// placeholderSessionID has a whole id's shape. An op's Validate wants a
// whole id, but a SESSION argument may be a prefix that only the daemon
// resolves (sessionArg has checked its shape): the CLI validates a copy of
// the op with this in its place, so the other fields are still checked.
const placeholderSessionID = messages.SessionIDPrefix + "0000000000000000000000000000000000000000000000000000000000000000"

// writeJSON prints v as one line.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// age renders how long ago t was, coarsely.
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case t.IsZero():
		return "-"
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// budgetText is the " (budget $N)" suffix of a session with a maxCostUsd.
func budgetText(usd float64) string {
	if usd <= 0 {
		return ""
	}
	return fmt.Sprintf(" (budget $%.2f)", usd)
}

// addBudgetFlag is --max-cost-usd of start and run.
func addBudgetFlag(fs *pflag.FlagSet, v *float64) {
	fs.Float64Var(v, "max-cost-usd", 0, "stop cleanly (max_budget) once the backend's reported cost reaches this many USD (0: no budget)")
}

func cost(usd float64) string {
	if usd <= 0 {
		return "-"
	}
	return fmt.Sprintf("$%.4f", usd)
}
