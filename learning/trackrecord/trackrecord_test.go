package trackrecord

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/codesession/codesession/learning/outcomes"
	"github.com/codesession/codesession/messages"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func rec(backend, model string, o messages.Outcome, rounds int, ago time.Duration, reason string) outcomes.Record {
	return outcomes.Record{BackendID: backend, Model: model, Outcome: o, Rounds: rounds, EndedAt: now.Add(-ago), FailureReason: reason}
}

func TestLines(t *testing.T) {
	day := 24 * time.Hour
	all := []outcomes.Record{
		rec("codex", "gpt-5", messages.OutcomeSuccess, 4, 9*day, ""),
		rec("codex", "gpt-5", messages.OutcomeFailed, 6, 5*day, "older failure"),
		rec("codex", "gpt-5", messages.OutcomeSuccess, 3, 4*day, ""),
		rec("codex", "gpt-5-mini", messages.OutcomeAborted, 2, 3*day, "stopped while a turn was running"),
		rec("codex", "o3", messages.OutcomeSuccess, 5, 2*day, ""),
		rec("codex", "o3", messages.OutcomeSuccess, 5, 2*day, ""),
		rec("codex", "o3", messages.OutcomeSuccess, 4, day, ""),
		rec("claude-code", "haiku", messages.OutcomeSuccess, 1, time.Hour, ""),
	}
	assert.Equal(t, []string{
		"codex: 7 runs, 71% success, avg 4.1 rounds, last failure: stopped while a turn was running (3d ago)",
		"  codex / gpt-5: 3 runs, 67% success, avg 4.3 rounds",
		"  codex / o3: 3 runs, 100% success, avg 4.7 rounds",
	}, Lines("codex", all, now))
	assert.Equal(t, []string{"claude-code: 1 run, 100% success, avg 1.0 rounds"}, Lines("claude-code", all, now),
		"no failure, no failure clause; one run of a model, no sub-line")
	assert.Nil(t, Lines("gemini", all, now), "no history, no lines")
}

func TestAgo(t *testing.T) {
	assert.Equal(t, "just now", Ago(30*time.Second))
	assert.Equal(t, "12m ago", Ago(12*time.Minute))
	assert.Equal(t, "5h ago", Ago(5*time.Hour+59*time.Minute))
	assert.Equal(t, "3d ago", Ago(3*24*time.Hour+time.Hour))
}

type fakeLog struct {
	rs        []outcomes.Record
	gen       uint64
	refreshes int
}

func (f *fakeLog) All() ([]outcomes.Record, uint64) { return f.rs, f.gen }
func (f *fakeLog) Refresh() error                   { f.refreshes++; return nil }

func TestCacheTTLAndInvalidation(t *testing.T) {
	f := &fakeLog{rs: []outcomes.Record{rec("codex", "", messages.OutcomeSuccess, 1, time.Hour, "")}, gen: 1}
	c := NewCache(f)
	first := c.Lines("codex", now)
	assert.Equal(t, 1, f.refreshes)
	assert.Equal(t, first, c.Lines("codex", now.Add(59*time.Second)), "within the TTL: the same lines")
	assert.Equal(t, 1, f.refreshes, "within the TTL the disk is not read")

	// a new outcome in this process bumps the generation: rebuilt at once
	f.rs = append(f.rs, rec("codex", "", messages.OutcomeFailed, 3, 0, "boom"))
	f.gen = 2
	assert.Contains(t, c.Lines("codex", now.Add(10*time.Second))[0], "2 runs, 50% success")

	// another process's outcome becomes visible after the TTL
	f.rs = append(f.rs, rec("codex", "", messages.OutcomeSuccess, 1, 0, ""))
	before := f.refreshes
	c.Lines("codex", now.Add(30*time.Second))
	c.Invalidate()
	c.Lines("codex", now.Add(31*time.Second))
	assert.Equal(t, before+1, f.refreshes, "Invalidate forces a read")
	c.Lines("codex", now.Add(31*time.Second+TTL))
	assert.Equal(t, before+2, f.refreshes, "the TTL forces a read")
}
