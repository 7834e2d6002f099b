// Package client is a Go client for the codesession daemon's HTTP control
// plane (`codesession serve`, package controlplane): the JSON envelopes in
// and out, the bearer token, TLS with a private CA, and the daemon's
// errors as *messages.Error values (code, op, field, safe message), so a
// caller handles a refused op the way an embedded actors.Runtime caller
// does. The console (cmd/codesession) is built on it.
//
//	c, err := client.New("127.0.0.1:7777", token)
//	st, err := c.Start(ctx, messages.Start{Brief: "add a test", Cwd: "/src/app"})
//	res, err := c.ReadTurn(ctx, st.SessionID, client.ReadOptions{})
//	_, err = c.Stop(ctx, messages.Stop{SessionID: st.SessionID})
//
// A Client is safe for concurrent use. It imports only messages, so a
// program can drive a daemon without linking the runtime. The live SSE
// feed (/api/events) is left to the caller's own reader: Request builds
// its authenticated request.
//
// Testing: client_test.go runs every method against a real control plane
// over a scripted backend.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
)

// maxResponseBytes bounds one response body.
const maxResponseBytes = 64 << 20

// Client talks to one daemon.
type Client struct {
	base  string // scheme://host[:port][/path], no trailing slash
	token string
	hc    *http.Client
}

// Option configures New.
type Option func(*options)

type options struct {
	hc      *http.Client
	rootCAs *x509.CertPool
}

// WithHTTPClient replaces the HTTP client (its transport, timeouts).
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.hc = hc } }

// WithRootCAs trusts the CA that signed the daemon's TLS certificate.
func WithRootCAs(pool *x509.CertPool) Option { return func(o *options) { o.rootCAs = pool } }

// New returns a client for the daemon at addr (host:port, or an http or
// https URL) authenticating with token. Without WithHTTPClient it never
// goes through the environment's proxy: a loopback daemon is never behind
// one.
func New(addr, token string, opts ...Option) (*Client, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, messages.FieldError("client", "addr", "%q: want host:port or an http(s) URL", addr)
	}
	hc := o.hc
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		if o.rootCAs != nil {
			tr.TLSClientConfig = &tls.Config{RootCAs: o.rootCAs, MinVersion: tls.VersionTLS12}
		}
		hc = &http.Client{Transport: tr}
	}
	return &Client{base: strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/"), token: token, hc: hc}, nil
}

// BaseURL is the daemon's base URL.
func (c *Client) BaseURL() string { return c.base }

// UnreachableError says the daemon could not be reached at all (no
// envelope came back): it is not running there, or the network failed.
type UnreachableError struct {
	Base string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the daemon at %s: %v (is 'codesession serve' running there?)", e.Base, e.Err)
}
func (e *UnreachableError) Unwrap() error { return e.Err }

// Request builds an authenticated request for path (which starts with
// /), for routes Do does not cover, such as the SSE feed.
func (c *Client) Request(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	return req, nil
}

// HTTPClient is the client's HTTP client, for requests made with Request.
func (c *Client) HTTPClient() *http.Client { return c.hc }

// Do sends one request (body marshalled as JSON unless nil) and decodes
// the envelope: its data into out (unless nil), or its error as a
// *messages.Error. A transport failure is an *UnreachableError; the
// context ending is its error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := c.Request(ctx, method, path, rd)
	if err != nil {
		return err
	}
	res, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &UnreachableError{Base: c.base, Err: err}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return &UnreachableError{Base: c.base, Err: err}
	}
	var env struct {
		OK    bool            `json:"ok"`
		Data  json.RawMessage `json:"data"`
		Error *messages.Error `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("the daemon at %s answered %s with something that is not its JSON envelope", c.base, res.Status)
	}
	if !env.OK {
		if env.Error == nil {
			return fmt.Errorf("the daemon answered %s without an error", res.Status)
		}
		return env.Error
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(env.Data, out)
}

func sessionPath(sid, tail string) string { return "/api/code-sessions/" + url.PathEscape(sid) + tail }

// Backends is list-backends: every backend's descriptor and a live probe.
func (c *Client) Backends(ctx context.Context) (messages.ListBackendsResult, error) {
	var out messages.ListBackendsResult
	return out, c.Do(ctx, http.MethodGet, "/api/backends", nil, &out)
}

// Start starts a session from op (Cwd is the daemon's path).
func (c *Client) Start(ctx context.Context, op messages.Start) (messages.StartResult, error) {
	var out messages.StartResult
	return out, c.Do(ctx, http.MethodPost, "/api/code-sessions", op, &out)
}

// Sessions lists the records the token's scope sees, newest first.
func (c *Client) Sessions(ctx context.Context) ([]messages.SessionRecord, error) {
	var out struct {
		Sessions []messages.SessionRecord `json:"sessions"`
	}
	err := c.Do(ctx, http.MethodGet, "/api/code-sessions", nil, &out)
	return out.Sessions, err
}

// Session is one session's record and a page of its events.
type Session struct {
	Record  messages.SessionRecord    `json:"record"`
	Events  []messages.PersistedEvent `json:"events"`
	LastSeq uint64                    `json:"lastSeq"`
	// ExternalAttach is the backend's own resume command, when it has one.
	ExternalAttach *struct {
		Command string `json:"command"`
		Note    string `json:"note,omitempty"`
		Caution string `json:"caution,omitempty"`
	} `json:"externalAttach,omitempty"`
}

// Session reads a session (a whole id or a unique prefix): its record and
// up to limit events after afterSeq (limit 0: the daemon's page).
func (c *Client) Session(ctx context.Context, sid string, afterSeq uint64, limit int) (Session, error) {
	q := url.Values{}
	if afterSeq > 0 {
		q.Set("afterSeq", fmt.Sprint(afterSeq))
	}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	path := sessionPath(sid, "")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out Session
	return out, c.Do(ctx, http.MethodGet, path, nil, &out)
}

// ReadOptions tune ReadTurn.
type ReadOptions struct {
	IncludeDiff bool
	// Wait is the longest one long poll waits (0: the daemon's default,
	// at most five minutes). ReadTurn polls again until ctx ends.
	Wait time.Duration
}

// ReadTurn waits for the session's next result: turn_complete,
// clarification (returned again while it waits for its answer), ended,
// error or max_rounds. It long-polls until a result comes or ctx ends.
func (c *Client) ReadTurn(ctx context.Context, sid string, o ReadOptions) (messages.TurnResult, error) {
	body := map[string]any{"includeDiff": o.IncludeDiff}
	if o.Wait > 0 {
		body["timeoutMs"] = o.Wait.Milliseconds()
	}
	for {
		var out messages.TurnResult
		err := c.Do(ctx, http.MethodPost, sessionPath(sid, "/read-turn"), body, &out)
		if messages.IsCode(err, messages.CodeTimeout) && ctx.Err() == nil {
			continue // nothing yet: the result is never lost by a timed-out poll
		}
		return out, err
	}
}

// Answer answers the pending clarification.
func (c *Client) Answer(ctx context.Context, op messages.Answer) (messages.AnswerResult, error) {
	var out messages.AnswerResult
	body := map[string]any{"clarificationId": op.ClarificationID, "decision": op.Decision}
	if op.Reason != "" {
		body["reason"] = op.Reason
	}
	if op.Note != "" {
		body["note"] = op.Note
	}
	return out, c.Do(ctx, http.MethodPost, sessionPath(op.SessionID, "/answer"), body, &out)
}

// Guide sends the user's guidance (steer, queue or interrupt).
func (c *Client) Guide(ctx context.Context, op messages.Guide) (messages.OKResult, error) {
	var out messages.OKResult
	body := map[string]any{"text": op.Text}
	if op.Mode != "" {
		body["mode"] = op.Mode
	}
	if op.Model != "" {
		body["agentModel"] = op.Model
	}
	if op.Effort != "" {
		body["effort"] = op.Effort
	}
	return out, c.Do(ctx, http.MethodPost, sessionPath(op.SessionID, "/guidance"), body, &out)
}

// SetPosture changes a live session's posture (never above its ceiling).
func (c *Client) SetPosture(ctx context.Context, sid string, p messages.Posture) (messages.SetPostureResult, error) {
	var out messages.SetPostureResult
	return out, c.Do(ctx, http.MethodPost, sessionPath(sid, "/posture"), map[string]any{"posture": p}, &out)
}

// Interrupt aborts the running turn.
func (c *Client) Interrupt(ctx context.Context, sid string) (messages.OKResult, error) {
	var out messages.OKResult
	return out, c.Do(ctx, http.MethodPost, sessionPath(sid, "/interrupt"), map[string]any{}, &out)
}

// Stop releases the session with an optional verdict; it is idempotent.
func (c *Client) Stop(ctx context.Context, op messages.Stop) (messages.StopResult, error) {
	var out messages.StopResult
	body := map[string]any{}
	if op.Outcome != "" {
		body["outcome"] = op.Outcome
	}
	if op.Note != "" {
		body["note"] = op.Note
	}
	return out, c.Do(ctx, http.MethodPost, sessionPath(op.SessionID, "/stop"), body, &out)
}

// Resume revives an ended, failed or orphaned session (same id, a new run).
func (c *Client) Resume(ctx context.Context, sid, brief string) (messages.StartResult, error) {
	var out messages.StartResult
	body := map[string]any{}
	if brief != "" {
		body["brief"] = brief
	}
	return out, c.Do(ctx, http.MethodPost, sessionPath(sid, "/resume"), body, &out)
}

// Scope is the token's scope and its constraints (GET and PUT /api/scope).
type Scope struct {
	Scope       string                    `json:"scope"`
	Admin       bool                      `json:"admin"`
	Constraints messages.ScopeConstraints `json:"constraints"`
	Backends    []string                  `json:"backends,omitempty"`
}

// ScopeConstraints is what SetScope sets: the whole set, replacing the old.
type ScopeConstraints struct {
	MaxPosture   messages.Posture `json:"maxPosture,omitempty"`
	MaxRounds    int              `json:"maxRounds,omitempty"`
	AllowedTools []string         `json:"allowedTools,omitempty"`
	Backends     []string         `json:"backends,omitempty"`
}

// Scope reads the token's own scope.
func (c *Client) Scope(ctx context.Context) (Scope, error) {
	var out Scope
	return out, c.Do(ctx, http.MethodGet, "/api/scope", nil, &out)
}

// SetScope replaces the token's own scope's constraints (an admin token's
// only); they apply to sessions started from then on.
func (c *Client) SetScope(ctx context.Context, sc ScopeConstraints) (Scope, error) {
	var out Scope
	return out, c.Do(ctx, http.MethodPut, "/api/scope", sc, &out)
}

// IsUnreachable reports whether err says the daemon could not be reached.
func IsUnreachable(err error) bool {
	var u *UnreachableError
	return errors.As(err, &u)
}
