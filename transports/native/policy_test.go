package native

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

func TestPermit(t *testing.T) {
	t.Parallel()
	const (
		run    = verdictRun
		ask    = verdictAsk
		refuse = verdictRefuse
	)
	P := messages.PosturePlan
	D := messages.PostureDefault
	A := messages.PostureAcceptEdits
	F := messages.PostureFull
	cases := []struct {
		tool     string
		posture  messages.Posture
		allowed  []string
		remember bool
		want     verdict
		reason   string
	}{
		{ToolRead, P, nil, false, run, ""},
		{ToolGlob, P, nil, false, run, ""},
		{ToolGrep, P, nil, false, run, ""},
		{ToolLs, P, nil, false, run, ""},
		{ToolWrite, P, nil, false, refuse, "plan posture"},
		{ToolEdit, P, nil, true, refuse, "plan posture"},
		{ToolBash, P, nil, false, refuse, "plan posture"},
		{ToolRead, D, nil, false, run, ""},
		{ToolWrite, D, nil, false, ask, ""},
		{ToolEdit, D, nil, false, ask, ""},
		{ToolBash, D, nil, false, ask, ""},
		{ToolBash, D, nil, true, run, ""},
		{ToolWrite, A, nil, false, run, ""},
		{ToolEdit, A, nil, false, run, ""},
		{ToolBash, A, nil, false, ask, ""},
		{ToolBash, F, nil, false, run, ""},
		{ToolWrite, F, nil, false, run, ""},
		{ToolBash, F, []string{ToolRead}, false, refuse, "not in this session's allowed tools"},
		{ToolRead, P, []string{ToolWrite}, false, refuse, "not in this session's allowed tools"},
		{"Write", F, nil, false, refuse, `there is no tool "Write"`},
	}
	for _, c := range cases {
		d := permit(c.tool, c.posture, c.allowed, c.remember)
		assert.Equal(t, c.want, d.verdict, "%s in %s (allowed %v, remembered %v)", c.tool, c.posture, c.allowed, c.remember)
		assert.Contains(t, d.reason, c.reason)
	}
	names := func(specs []ToolSpec) []string {
		var out []string
		for _, s := range specs {
			out = append(out, s.Name)
		}
		return out
	}
	assert.Equal(t, []string{ToolRead, ToolGlob, ToolGrep, ToolLs}, names(offered(P, nil)))
	assert.Equal(t, ToolNames(), names(offered(D, nil)))
	assert.Equal(t, []string{ToolRead, ToolEdit}, names(offered(F, []string{ToolEdit, ToolRead})))
	assert.Empty(t, names(offered(P, []string{ToolBash})))
}

func TestEffortAndPrices(t *testing.T) {
	t.Parallel()
	assert.Equal(t, messages.EffortHigh, clampEffort(messages.EffortMax, false))
	assert.Equal(t, messages.EffortMax, clampEffort(messages.EffortMax, true))
	assert.Equal(t, messages.Effort(""), clampEffort("", false))
	table := map[string]Price{"claude-sonnet": {Input: 3, Output: 15}, "claude-sonnet-5-5": {Input: 4, Output: 16}}
	p, ok := priceFor(table, "claude-sonnet-5-5-20260101")
	require.True(t, ok)
	assert.Equal(t, 4.0, p.Input, "the longest prefix wins")
	_, ok = priceFor(table, "gpt-5")
	assert.False(t, ok)
	assert.InDelta(t, 0.0045, Price{Input: 3, Output: 15, CacheRead: 0.3}.cost(messages.Usage{InputTokens: 1000, OutputTokens: 100, CacheReadTokens: 0}), 1e-12)
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := func(k, v string) http.Header { return http.Header{http.CanonicalHeaderKey(k): []string{v}} }
	assert.Equal(t, 2*time.Second, retryAfter(h("Retry-After", "2"), now))
	assert.Equal(t, 1500*time.Millisecond, retryAfter(h("Retry-After", "1.5"), now))
	assert.Equal(t, 250*time.Millisecond, retryAfter(h("retry-after-ms", "250"), now))
	assert.Equal(t, 30*time.Second, retryAfter(h("Retry-After", now.Add(30*time.Second).Format(http.TimeFormat)), now))
	assert.Zero(t, retryAfter(h("Retry-After", "soon"), now))
	assert.Zero(t, retryAfter(nil, now))
}

func TestRetrying(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{MaxRetries: 3, Initial: time.Millisecond, Max: 2 * time.Millisecond, MaxRetryAfter: time.Second}
	type answer struct {
		streamed bool
		err      error
	}
	run := func(answers ...answer) (int, error) {
		n := 0
		_, err := retrying(context.Background(), p, func(context.Context) (response, bool, error) {
			a := answers[min(n, len(answers)-1)]
			n++
			return response{}, a.streamed, a.err
		}, nil)
		return n, err
	}
	e := func(status int) error { return &apiError{provider: "x", endpoint: "http://x", status: status} }
	n, err := run(answer{err: e(429)}, answer{err: e(503)}, answer{})
	assert.NoError(t, err)
	assert.Equal(t, 3, n, "429 and 503 are retried")
	n, err = run(answer{err: e(400)})
	assert.Error(t, err)
	assert.Equal(t, 1, n, "400 is final")
	n, _ = run(answer{err: errors.New("connection refused")}, answer{})
	assert.Equal(t, 2, n, "a connection failure is retried")
	n, _ = run(answer{streamed: true, err: errors.New("stream cut")})
	assert.Equal(t, 1, n, "nothing is retried once the answer began to stream")
	n, _ = run(answer{err: e(500)})
	assert.Equal(t, 4, n, "MaxRetries bounds the retries")
	n, _ = run(answer{err: &apiError{status: 429, retryAfter: time.Hour}})
	assert.Equal(t, 1, n, "a Retry-After beyond MaxRetryAfter fails at once")
}
