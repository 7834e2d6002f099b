package modelmock

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
)

// MaxBodyBytes caps a request body the server reads.
const MaxBodyBytes = 64 << 20

// Kind says what a recorded request was.
type Kind string

const (
	// KindMain is a model call the scenario answered.
	KindMain Kind = "main"
	// KindTitle is Claude Code's session-title side request.
	KindTitle Kind = "title"
	// KindClassifier is Claude Code's auto/plan-mode safety classifier.
	KindClassifier Kind = "classifier"
	// KindModelCheck is the one-token call Claude Code makes to check a
	// model after set_model.
	KindModelCheck Kind = "model_check"
	// KindProbe is a connectivity probe (HEAD on any path, GET / or
	// /api/hello).
	KindProbe Kind = "probe"
	// KindCountTokens is a token-counting call.
	KindCountTokens Kind = "count_tokens"
	// KindInvalid is a request the server could not decode.
	KindInvalid Kind = "invalid"
	// KindUnknown is a path the server does not serve (answered 404).
	KindUnknown Kind = "unknown"
)

func (k Kind) String() string { return string(k) }

// Request is one recorded request.
type Request struct {
	Seq    int         `json:"seq"`
	At     time.Time   `json:"at"`
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Query  string      `json:"query,omitempty"`
	Header http.Header `json:"header"` // secrets redacted
	Body   []byte      `json:"-"`
	Wire   string      `json:"wire,omitempty"` // "anthropic", "openai-responses", "openai-chat" or "gemini"
	Kind   Kind        `json:"kind"`
	Model  string      `json:"model,omitempty"`
	// Rule is the index of the scenario rule that answered; -1 for a
	// default reply or a side request.
	Rule   int `json:"rule"`
	Status int `json:"status"`

	conv *Conversation
}

// Conversation returns the decoded conversation of a model call (nil for
// other requests).
func (r *Request) Conversation() *Conversation { return r.conv }

// MarshalJSON writes the body as JSON when it is JSON, else as a string.
func (r Request) MarshalJSON() ([]byte, error) {
	type plain Request
	out := struct {
		plain
		Body any `json:"body,omitempty"`
	}{plain: plain(r)}
	if json.Valid(r.Body) {
		out.Body = json.RawMessage(r.Body)
	} else if len(r.Body) > 0 {
		out.Body = string(r.Body)
	}
	return json.Marshal(out)
}

// secretHeaders are redacted when recorded.
var secretHeaders = []string{"X-Api-Key", "Authorization", "Api-Key", "X-Goog-Api-Key", "Cookie", "Proxy-Authorization"}

// Server is a running scripted model server. Its methods are safe for
// concurrent use.
type Server struct {
	picker *picker
	srv    *http.Server
	ln     net.Listener
	url    string
	done   chan struct{}

	mu      sync.Mutex
	reqs    []Request
	nextID  int
	onReq   func(Request)
	closeMu sync.Once
}

// Option configures a Server.
type Option func(*options)

type options struct {
	addr  string
	onReq func(Request)
}

// WithAddr listens on addr instead of 127.0.0.1:0. Only loopback
// addresses are accepted.
func WithAddr(addr string) Option { return func(o *options) { o.addr = addr } }

// WithRequestHook calls f with every request once it has been answered
// (from the request's goroutine; f must not block).
func WithRequestHook(f func(Request)) Option { return func(o *options) { o.onReq = f } }

// cleaner is what Start needs of a test: *testing.T and *testing.B have it.
type cleaner interface{ Cleanup(func()) }

// Start serves sc on 127.0.0.1 at a random port. owner decides when the
// server closes: a context.Context (when it ends), a test or benchmark
// (anything with Cleanup(func()), such as *testing.T: at cleanup), or nil
// (call Close). A nil sc serves Reference(). An invalid scenario or address
// is a *messages.Error with code invalid.
func Start(owner any, sc *Scenario, opts ...Option) (*Server, error) {
	o := options{addr: "127.0.0.1:0"}
	for _, f := range opts {
		f(&o)
	}
	if sc == nil {
		sc = Reference()
	}
	pk, err := newPicker(sc)
	if err != nil {
		return nil, err
	}
	host, _, err := net.SplitHostPort(o.addr)
	if err != nil {
		return nil, messages.FieldError("modelmock", "addr", "%q is not host:port: %v", o.addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, messages.FieldError("modelmock", "addr", "%q is not a loopback address: the mock serves this machine only", o.addr)
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return nil, messages.Wrap(messages.CodeInternal, "modelmock", err, "cannot listen on "+o.addr)
	}
	s := &Server{picker: pk, ln: ln, url: "http://" + ln.Addr().String(), done: make(chan struct{}), onReq: o.onReq}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	switch ow := owner.(type) {
	case nil:
	case cleaner:
		ow.Cleanup(s.Close)
	case context.Context:
		go func() {
			select {
			case <-ow.Done():
				s.Close()
			case <-s.done:
			}
		}()
	default:
		s.Close()
		return nil, messages.FieldError("modelmock", "owner", "want a context.Context, a test (Cleanup(func())) or nil, got %T", owner)
	}
	return s, nil
}

// URL is the server's base URL, such as http://127.0.0.1:41234 (what
// ANTHROPIC_BASE_URL takes).
func (s *Server) URL() string { return s.url }

// Close stops the server and waits for it; open streams are cut. It is
// idempotent.
func (s *Server) Close() {
	s.closeMu.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			_ = s.srv.Close()
		}
		<-s.done
	})
}

// Requests returns a copy of every request recorded so far, in arrival
// order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// MainRequests returns the model calls the scenario answered.
func (s *Server) MainRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Kind == KindMain {
			out = append(out, r)
		}
	}
	return out
}

// Saw reports whether any model call so far showed the model substr: in a
// message's text, a tool call's input or a tool result, or anywhere in the
// raw request body.
func (s *Server) Saw(substr string) bool {
	for _, r := range s.MainRequests() {
		if strings.Contains(string(r.Body), substr) {
			return true
		}
		if r.conv == nil {
			continue
		}
		for _, m := range r.conv.Messages {
			for _, p := range m.Parts {
				if strings.Contains(p.Text, substr) || strings.Contains(string(p.Input), substr) {
					return true
				}
			}
		}
	}
	return false
}

// ToolResults returns every tool result the model received at the end of a
// request, in order.
func (s *Server) ToolResults() []ToolResult {
	var out []ToolResult
	for _, r := range s.MainRequests() {
		if r.conv == nil {
			continue
		}
		if tr, ok := r.conv.LastToolResult(); ok {
			out = append(out, tr)
		}
	}
	return out
}

// ServeHTTP routes one request and records it. A request is recorded as
// soon as it is understood, before any delay or stream, so a test sees that
// the model was asked while the answer is still streaming; its Status is
// filled in when the answer is done.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	rec := &Request{At: time.Now(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: redact(r.Header), Rule: -1}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	rec.Body = body
	defer s.finish(rec)
	if err != nil || len(body) > MaxBodyBytes {
		rec.Kind, rec.Status = KindInvalid, http.StatusRequestEntityTooLarge
		http.Error(rw, "request body unreadable or over the cap", rec.Status)
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case r.Method == http.MethodHead, r.Method == http.MethodGet && (path == "" || path == "/api/hello"):
		rec.Kind, rec.Status = KindProbe, http.StatusOK
		rw.WriteHeader(http.StatusOK)
	case path == "/v1/messages" && r.Method == http.MethodPost:
		rec.Wire = "anthropic"
		anthWire{s}.messages(rw, r, rec)
	case path == "/v1/messages/count_tokens" && r.Method == http.MethodPost:
		rec.Wire = "anthropic"
		anthWire{s}.countTokens(rw, r, rec)
	case path == "/v1/responses" && r.Method == http.MethodPost:
		rec.Wire = "openai-responses"
		respWire{s}.responses(rw, r, rec)
	case path == "/v1/chat/completions" && r.Method == http.MethodPost:
		rec.Wire = "openai-chat"
		chatWire{s}.completions(rw, r, rec)
	case strings.HasPrefix(path, "/v1beta/models/") && r.Method == http.MethodPost:
		rec.Wire = "gemini"
		geminiWire{s}.serve(rw, r, rec)
	case r.Method == http.MethodGet && (path == "/v1/responses" || path == "/v1/models" || path == "/models"):
		rec.Kind, rec.Status = KindProbe, http.StatusOK
		openaiProbe(rw, path)
	default:
		rec.Kind, rec.Status = KindUnknown, http.StatusNotFound
		http.Error(rw, fmt.Sprintf("modelmock does not serve %s %s", r.Method, r.URL.Path), http.StatusNotFound)
	}
}

// publish records rec now (once); finish records it if publish did not,
// and stores its final status.
func (s *Server) publish(rec *Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec.Seq != 0 {
		return
	}
	rec.Seq = len(s.reqs) + 1
	s.reqs = append(s.reqs, *rec)
}

func (s *Server) finish(rec *Request) {
	s.publish(rec)
	s.mu.Lock()
	s.reqs[rec.Seq-1] = *rec
	hook := s.onReq
	s.mu.Unlock()
	if hook != nil {
		hook(*rec)
	}
}

func redact(h http.Header) http.Header {
	out := h.Clone()
	for _, k := range secretHeaders {
		if _, ok := out[k]; ok {
			out[k] = []string{"REDACTED"}
		}
	}
	return out
}

// render expands a step into a response with fresh ids.
func (s *Server) render(model string, st *Step, vars map[string]string) rendered {
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	m := rendered{id: "msg_mock_" + strconv.Itoa(id), model: model, in: st.InputTokens, out: st.OutputTokens}
	if m.in == 0 {
		m.in = 100
	}
	if m.out == 0 {
		m.out = 20
	}
	if st.Thinking != "" {
		m.blocks = append(m.blocks, renderedBlock{kind: PartThinking, text: expand(st.Thinking, vars)})
	}
	if st.Text != "" {
		m.blocks = append(m.blocks, renderedBlock{kind: PartText, text: expand(st.Text, vars)})
	}
	for k, t := range st.tools() {
		tid := t.ID
		if tid == "" {
			tid = fmt.Sprintf("toolu_mock_%d_%d", id, k)
		}
		m.blocks = append(m.blocks, renderedBlock{kind: PartToolUse, id: tid, name: t.Name, input: expandJSON(t.Input, vars)})
	}
	m.stopReason = st.StopReason
	if m.stopReason == "" {
		m.stopReason = "end_turn"
		if len(st.tools()) > 0 {
			m.stopReason = "tool_use"
		}
	}
	return m
}
