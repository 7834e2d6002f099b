package contain

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/codesession/codesession/messages"
)

// A secret that contains another is redacted whole, whatever order the
// environment listed them in: redacting the shorter first would leave the
// longer one's tail in the event.
func TestRedactsTheLongestValueFirst(t *testing.T) {
	short, long := "hunter2-db", "hunter2-db-PRIMARY-KEY-7f3a"
	for _, order := range [][]string{{short, long}, {long, short}} {
		r := newRedactor(order)
		got := r.text("dsn=" + long + " fallback=" + short)
		assert.Equal(t, "dsn="+Redacted+" fallback="+Redacted, got, "order %q", order)
		assert.NotContains(t, got, "PRIMARY-KEY", "order %q: the longer secret's tail leaked", order)
	}
}

// A tool input that is not JSON is redacted as text: a backend's truncated
// or malformed input holding a secret must not reach the log verbatim.
func TestRedactsMalformedToolInputAsText(t *testing.T) {
	secret := "s3cr3t-token-value"
	r := newRedactor([]string{secret})
	for _, raw := range []string{
		`{"command":"curl -H 'Authorization: ` + secret, // truncated mid-string
		`{"command": echo ` + secret + `}`,              // unquoted
		`{"command":"echo ` + secret + `",}`,            // trailing comma
		`not json at all ` + secret,
	} {
		ev := r.event(messages.Event{Type: messages.EvToolUse, Input: json.RawMessage(raw)})
		assert.NotContains(t, string(ev.Input), secret, raw)
		assert.True(t, json.Valid(ev.Input), "the redacted input is JSON: %s", ev.Input)
		assert.Contains(t, string(ev.Input), Redacted, raw)
	}
	// one without a secret is kept as the backend sent it
	raw := `{"command":"ls",}`
	assert.Equal(t, raw, string(r.event(messages.Event{Input: json.RawMessage(raw)}).Input))
	// and a well-formed one is redacted inside its strings, escapes and all
	esc := strings.ReplaceAll(secret, "t", `\u0074`)
	ev := r.event(messages.Event{Input: json.RawMessage(`{"command":"echo ` + esc + `"}`)})
	assert.NotContains(t, string(ev.Input), "s3cr")
	assert.JSONEq(t, `{"command":"echo `+Redacted+`"}`, string(ev.Input))
}
