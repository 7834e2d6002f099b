package native

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
)

// provider is one model API: it sends a conversation and streams the
// answer. Implementations translate the provider-neutral request into their
// SDK's parameters and the stream back into blocks; everything else (the
// loop, retries, the gate) is provider-independent.
type provider interface {
	// name is the provider's id (ProviderAnthropic, ...).
	name() string
	// endpoint is the base URL requests go to, for error messages.
	endpoint() string
	// stream sends req and returns the model's answer. Text and thinking
	// arrive through emit as they stream, on the calling goroutine. An
	// HTTP failure is an *apiError.
	stream(ctx context.Context, req request, emit func(delta)) (response, error)
}

// Provider ids, as CODESESSION_NATIVE_PROVIDER takes them.
const (
	ProviderAnthropic       = "anthropic"
	ProviderOpenAIResponses = "openai-responses"
	ProviderOpenAIChat      = "openai-chat"
)

// request is one model call.
type request struct {
	model     string
	system    string
	messages  []message
	tools     []ToolSpec
	effort    messages.Effort
	maxTokens int64
}

// role of a message.
const (
	roleUser      = "user"
	roleAssistant = "assistant"
)

// message is one conversation message.
type message struct {
	role   string
	blocks []block
}

// blockKind says what a block holds.
type blockKind int

const (
	blockInvalid blockKind = iota
	blockText
	blockThinking
	blockToolUse
	blockToolResult
	// blockOpaque is provider state carried back verbatim (a redacted
	// thinking block, an OpenAI reasoning item).
	blockOpaque
)

func (k blockKind) String() string {
	switch k {
	case blockText:
		return "text"
	case blockThinking:
		return "thinking"
	case blockToolUse:
		return "tool_use"
	case blockToolResult:
		return "tool_result"
	case blockOpaque:
		return "opaque"
	}
	return "invalid"
}

// block is one content block.
type block struct {
	kind blockKind
	// text: a text's or thinking's text; a tool result's output.
	text string
	// signature: a thinking block's signature (Anthropic).
	signature string
	// id: a tool use's id; for a tool result, the id of its tool use.
	id    string
	name  string          // tool use
	input json.RawMessage // tool use
	// isError: a tool result that failed.
	isError bool
	// raw: an opaque block's wire JSON, and which provider made it.
	raw      json.RawMessage
	rawOwner string
}

// delta is a piece of streamed text or thinking.
type delta struct {
	thinking bool
	text     string
}

// response is the model's answer to one request.
type response struct {
	blocks []block
	// stop is the provider's stop reason, normalized: "end_turn",
	// "tool_use", "max_tokens" or the provider's own word.
	stop  string
	usage messages.Usage
	model string
}

func (r response) toolUses() []block {
	var out []block
	for _, b := range r.blocks {
		if b.kind == blockToolUse {
			out = append(out, b)
		}
	}
	return out
}

// text is the response's text blocks joined.
func (r response) text() string {
	var parts []string
	for _, b := range r.blocks {
		if b.kind == blockText && b.text != "" {
			parts = append(parts, b.text)
		}
	}
	return strings.Join(parts, "\n")
}

// apiError is a model endpoint's HTTP failure, provider-neutral.
type apiError struct {
	provider   string
	endpoint   string
	status     int
	message    string
	retryAfter time.Duration // from Retry-After / retry-after-ms; 0 when absent
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("%s endpoint %s answered %d %s", e.provider, e.endpoint, e.status, http.StatusText(e.status))
	if e.message != "" {
		msg += ": " + e.message
	}
	switch e.status {
	case http.StatusUnauthorized:
		msg += " (check the API key in the backend environment)"
	case http.StatusForbidden:
		msg += " (the API key may lack access to this model)"
	case http.StatusNotFound:
		msg += " (check the base URL and the model name)"
	}
	return msg
}

// retryable reports whether a call that failed with status may succeed
// when sent again: rate limits, timeouts, overload and server errors.
func retryable(status int) bool {
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusConflict, status == http.StatusTooManyRequests:
		return true
	case status >= 500:
		return true
	}
	return false
}

// retryAfter reads a response's Retry-After (seconds or an HTTP date) and
// retry-after-ms headers; 0 when there is none.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if ms := h.Get("Retry-After-Ms"); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v > 0 {
			return time.Duration(v * float64(time.Millisecond))
		}
	}
	ra := h.Get("Retry-After")
	if ra == "" {
		return 0
	}
	if v, err := strconv.ParseFloat(ra, 64); err == nil {
		if v <= 0 {
			return 0
		}
		return time.Duration(v * float64(time.Second))
	}
	if t, err := http.ParseTime(ra); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// requestWriteBuffer is the size of the buffer a session's connection
// writes its requests through (net/http's default is 4 KiB). A call's
// body is the whole conversation: past 4 KiB it left in two writes (the
// buffer's 4 KiB, then the rest through a buffer io.Copy allocates each
// time), each a system call here and a read on the server; up to this
// size it leaves in one, and allocates nothing. It is held once per open
// connection (one per session), so it is sized for a conversation's
// first calls (the bench's average 10 KiB), not for its longest.
const requestWriteBuffer = 16 << 10

// sessionHTTPClient is the HTTP client of one session: its own
// connections (closed with it), net/http's default transport otherwise.
func sessionHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.WriteBufferSize = requestWriteBuffer
	return &http.Client{Transport: t}
}
