package controlplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
)

// envelope is every JSON response: {ok:true,data} or {ok:false,error}.
type envelope struct {
	OK    bool            `json:"ok"`
	Data  any             `json:"data,omitempty"`
	Error *messages.Error `json:"error,omitempty"`
}

// statusOf is the one place an error code becomes an HTTP status.
func statusOf(e *messages.Error) int {
	switch e.Code {
	case messages.CodeInvalid:
		return http.StatusBadRequest
	case messages.CodeUnauthorized:
		return http.StatusUnauthorized
	case messages.CodeNotFound:
		return http.StatusNotFound
	case messages.CodeNotLive, messages.CodeAlreadyLive, messages.CodeConflict:
		return http.StatusConflict
	case messages.CodeCeilingExceeded, messages.CodeUnsupported:
		return http.StatusUnprocessableEntity
	case messages.CodeTimeout, messages.CodeUnavailable:
		return http.StatusServiceUnavailable
	case messages.CodeInternal:
		if e.Retryable {
			return http.StatusServiceUnavailable
		}
		return http.StatusInternalServerError
	}
	return http.StatusInternalServerError
}

// writeData writes a success envelope.
func writeData(w http.ResponseWriter, data any) error {
	b, err := json.Marshal(envelope{OK: true, Data: data})
	if err != nil {
		return messages.Wrap(messages.CodeInternal, "encode", err, "cannot encode the response")
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}

// writeDataFlushed is writeData pushed through to the connection at once,
// so a client already gone fails the write here, while the caller can
// still act on it, not after the handler returned. A write that succeeds
// says only that the answer left this process.
func writeDataFlushed(w http.ResponseWriter, data any) error {
	if err := writeData(w, data); err != nil {
		return err
	}
	if err := http.NewResponseController(w).Flush(); err != nil {
		return messages.Wrap(messages.CodeUnavailable, "http", err, "the client is gone: the answer was not sent")
	}
	return nil
}

// writeError is the one error writer: it maps err's code to a status and
// writes the error envelope. The message is the error's safe message; the
// cause of an internal error is logged, never sent.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := messages.AsError("http", err)
	status := statusOf(e)
	if status >= 500 && e.Code != messages.CodeTimeout {
		s.log.Error("control plane request failed", "method", r.Method, "path", r.URL.Path, "code", e.Code, "err", err)
	}
	out := *e
	out.Err = nil
	if e.Code == messages.CodeUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="codesession"`)
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	b, merr := json.Marshal(envelope{OK: false, Error: &out})
	if merr != nil {
		b = []byte(`{"ok":false,"error":{"code":"internal","message":"cannot encode the error"}}`)
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// bodyReadTimeout bounds reading a request body.
const bodyReadTimeout = 30 * time.Second

// decodeBody strictly decodes a JSON request body into dst: the body is
// size-limited, unknown fields and trailing data are errors, and the
// Content-Type must be application/json (so a browser cannot send it
// cross-origin without a preflight). An empty body leaves dst as is.
func decodeBody(w http.ResponseWriter, r *http.Request, max int64, dst any) error {
	const op = "request"
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		return messages.Errorf(messages.CodeInvalid, op, "Content-Type must be application/json, got %q", ct)
	}
	// a slow sender gets bodyReadTimeout, then the connection is cut
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	defer rc.SetReadDeadline(time.Time{})
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		return bodyError(err, max)
	}
	return decodeJSON(body, max, dst)
}

// decodeJSON is decodeBody after the read: the nesting bound first, in one
// allocation-free pass, then the exact-keys check, then encoding/json.
// Every failure is an invalid *messages.Error.
func decodeJSON(body []byte, max int64, dst any) error {
	const op = "request"
	if err := checkDepth(body); err != nil {
		return err
	}
	if err := checkKeys(body, dst); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty body: every field takes its default
		}
		return bodyError(err, max)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return messages.Errorf(messages.CodeInvalid, op, "trailing data after the JSON object")
	}
	return nil
}

func bodyError(err error, max int64) error {
	const op = "request"
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return messages.Errorf(messages.CodeInvalid, op, "request body larger than %d bytes", max)
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return messages.Errorf(messages.CodeInvalid, op, "malformed JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return &messages.Error{Code: messages.CodeInvalid, Op: op, Field: te.Field,
			Message: fmt.Sprintf("wrong type: want %s", te.Type)}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return messages.Errorf(messages.CodeInvalid, op, "truncated JSON")
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		field := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
		return &messages.Error{Code: messages.CodeInvalid, Op: op, Field: field, Message: "unknown field"}
	}
	return messages.Errorf(messages.CodeInvalid, op, "malformed request body")
}
