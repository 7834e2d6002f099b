package grok

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The shapes seed 003 quotes from grok 0.2.93, pretty-printed as grok
// writes them.
const (
	successPretty = "{\n  \"text\": \"PONG97531\",\n  \"stopReason\": \"EndTurn\",\n  \"sessionId\": \"6f1c2b8e-1111-4222-8333-444455556666\",\n  \"requestId\": \"0a1b2c3d-1111-4222-8333-444455556666\",\n  \"thought\": \"short\"\n}\n"
	errorPretty   = "{\n  \"type\": \"error\",\n  \"message\": \"Internal error: {...API error (status 400 Bad Request): invalid-argument: Incorrect API key provided...}\"\n}\n"
)

func TestParseOutput(t *testing.T) {
	r, junk, err := ParseOutput([]byte(successPretty))
	require.NoError(t, err)
	assert.Empty(t, junk)
	assert.Equal(t, Result{Text: "PONG97531", StopReason: "EndTurn", SessionID: "6f1c2b8e-1111-4222-8333-444455556666",
		RequestID: "0a1b2c3d-1111-4222-8333-444455556666", Thought: "short"}, r)

	r, _, err = ParseOutput([]byte(errorPretty))
	require.NoError(t, err)
	assert.True(t, r.IsError)
	assert.Contains(t, r.Message, "Incorrect API key")

	r, junk, err = ParseOutput([]byte("banner {not json\n" + successPretty))
	require.NoError(t, err)
	assert.Equal(t, "banner {not json", junk)
	assert.Equal(t, "PONG97531", r.Text)

	_, _, err = ParseOutput([]byte("  \n"))
	assert.ErrorIs(t, err, ErrNoObject)
	_, _, err = ParseOutput([]byte("{\n  \"text\": \"cut off"))
	assert.ErrorIs(t, err, ErrNoObject)

	// a future release's field names still give the text
	r, _, err = ParseOutput([]byte(`{"result": "via result"}`))
	require.NoError(t, err)
	assert.Equal(t, "via result", r.Text)
}

// FuzzParseOutput: any bytes parse or fail with ErrNoObject, never panic;
// junk is always a prefix of the input's text.
func FuzzParseOutput(f *testing.F) {
	for _, s := range []string{successPretty, errorPretty, "x\n" + successPretty, "{", "{}", "\n{\"type\":\"error\"}", `{"text":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, junk, err := ParseOutput(b)
		if err != nil {
			if err != ErrNoObject {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if r.IsError && r.Message == "" {
			t.Fatal("an error envelope without a message")
		}
		_ = junk
	})
}
