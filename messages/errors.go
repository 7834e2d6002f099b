package messages

import (
	"errors"
	"fmt"
)

// Code classifies an error. It is mapped to an HTTP status or an exit code
// only at the edges (the control plane, the CLI), never here.
type Code string

const (
	CodeInvalid         Code = "invalid"
	CodeNotFound        Code = "not_found"
	CodeNotLive         Code = "not_live"
	CodeAlreadyLive     Code = "already_live"
	CodeCeilingExceeded Code = "ceiling_exceeded"
	CodeUnsupported     Code = "unsupported"
	CodeConflict        Code = "conflict"
	CodeUnauthorized    Code = "unauthorized"
	CodeTimeout         Code = "timeout"
	CodeInternal        Code = "internal"
	// CodeUnavailable: a dependency (the store: a full disk, a read-only
	// home) keeps failing; nothing acknowledged was lost, retry later.
	CodeUnavailable Code = "unavailable"
	// CodeCorrupt: stored data does not parse (a corrupt middle line of an
	// event log, a garbage record); it is reported, never appended to.
	CodeCorrupt Code = "corrupt"
	// CodeFailed: the actor serving the op (a session, the registry)
	// crashed while the op was in flight; the message names the cause and
	// the session's record is marked failed.
	CodeFailed Code = "failed"
)

var allCodes = []Code{CodeInvalid, CodeNotFound, CodeNotLive, CodeAlreadyLive, CodeCeilingExceeded,
	CodeUnsupported, CodeConflict, CodeUnauthorized, CodeTimeout, CodeInternal, CodeUnavailable, CodeCorrupt, CodeFailed}

// Codes lists every error code, for tables at the edges.
func Codes() []Code { return append([]Code(nil), allCodes...) }

func (c Code) String() string { return string(c) }

// Valid reports whether c is one of the known codes.
func (c Code) Valid() bool {
	for _, k := range allCodes {
		if c == k {
			return true
		}
	}
	return false
}

// Error is codesession's one error type: a code, the operation that failed,
// a message that is safe to show to a caller, and whether retrying the same
// request may succeed. Field names a request field when the error is about one.
type Error struct {
	Code      Code   `json:"code" msgpack:"code"`
	Op        string `json:"op,omitempty" msgpack:"op,omitempty"`
	Field     string `json:"field,omitempty" msgpack:"field,omitempty"`
	Message   string `json:"message" msgpack:"message"`
	Retryable bool   `json:"retryable,omitempty" msgpack:"retryable,omitempty"`
	// Err is the underlying cause; it is never serialized (it may hold
	// details that are not safe to show).
	Err error `json:"-" msgpack:"-"`
}

func (e *Error) Error() string {
	s := string(e.Code)
	if e.Op != "" {
		s = e.Op + ": " + s
	}
	if e.Field != "" {
		s += ": " + e.Field
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, &Error{Code: X}) match on the code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Op == "" && t.Message == ""
}

// Errorf builds an *Error with a formatted safe message.
func Errorf(code Code, op, format string, args ...any) *Error {
	return &Error{Code: code, Op: op, Message: fmt.Sprintf(format, args...)}
}

// FieldError builds an invalid-argument error that names the field.
func FieldError(op, field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Op: op, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Wrap builds an *Error around a cause. The cause's text is not copied into
// the safe message.
func Wrap(code Code, op string, err error, msg string) *Error {
	return &Error{Code: code, Op: op, Message: msg, Err: err}
}

// ErrorCode returns the code of err: the code of the first *Error in its
// chain, CodeTimeout for context deadlines surfaced as such, else
// CodeInternal. A nil error has the empty code.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// IsCode reports whether err carries the given code.
func IsCode(err error, code Code) bool { return err != nil && ErrorCode(err) == code }

// AsError returns err as an *Error, wrapping a foreign error as internal.
func AsError(op string, err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Wrap(CodeInternal, op, err, "internal error")
}
