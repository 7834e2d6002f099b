package loop

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/learning/outcomes"
	"github.com/codesession/codesession/messages"
)

func TestNextRun(t *testing.T) {
	loc := time.FixedZone("here", 3600)
	at := func(h, m int) time.Time { return time.Date(2026, 12, 1, h, m, 0, 0, loc) }
	assert.Equal(t, at(4, 0), NextRun("04:00", at(3, 59)))
	assert.Equal(t, at(4, 0).AddDate(0, 0, 1), NextRun("04:00", at(4, 0)), "strictly after now")
	assert.Equal(t, at(23, 30), NextRun("23:30", at(12, 0)))
	assert.Equal(t, at(4, 0).AddDate(0, 0, 1), NextRun("bogus", at(5, 0)), "a bad time falls back to 04:00")
}

type emptySource struct{}

func (emptySource) GetMeta(context.Context, string) (messages.SessionRecord, error) {
	return messages.SessionRecord{}, errors.New("none")
}
func (emptySource) ReadEvents(context.Context, string, uint64, int) ([]messages.PersistedEvent, error) {
	return nil, nil
}
func (emptySource) List(context.Context) ([]messages.SessionRecord, error) { return nil, nil }

type brokenModel struct{}

func (brokenModel) Name() string { return "broken" }
func (brokenModel) Complete(context.Context, string, string) (string, error) {
	return "", errors.New("503 from the model")
}

func TestDistillFailsSoftAndTheJobHonoursConfig(t *testing.T) {
	home := t.TempDir()
	cfg := config.Default().Learning
	l, err := Open(home, cfg, emptySource{}, Options{Model: brokenModel{}})
	require.NoError(t, err)
	_, err = l.Outcomes().Append(outcomes.Record{SessionID: "s1", Run: 1, BackendID: "script", Outcome: messages.OutcomeSuccess})
	require.NoError(t, err)
	_, err = l.Distill(context.Background())
	require.Error(t, err)
	require.NotNil(t, l.LastPass())
	assert.Contains(t, l.LastPass().Err, "503")
	assert.Equal(t, []string{"script: 1 run, 100% success, avg 0.0 rounds"}, l.TrackRecord("script"))

	// a failed start or release lookup is logged, never raised
	l.Started("missing")
	l.Released("missing")
	l.Close()

	cfg.Distill = false
	off, err := Open(home, cfg, emptySource{}, Options{})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { off.RunJob(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("RunJob ran although distillation is off by config")
	}
}
