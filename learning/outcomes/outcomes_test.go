package outcomes

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

type fakeSource struct {
	mu     sync.Mutex
	recs   map[string]messages.SessionRecord
	events map[string][]messages.PersistedEvent
}

func newFake() *fakeSource {
	return &fakeSource{recs: map[string]messages.SessionRecord{}, events: map[string][]messages.PersistedEvent{}}
}

func (f *fakeSource) GetMeta(_ context.Context, id string) (messages.SessionRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[id]
	if !ok {
		return r, messages.Errorf(messages.CodeNotFound, "get", "no %s", id)
	}
	return r, nil
}

func (f *fakeSource) ReadEvents(_ context.Context, id string, _ uint64, _ int) ([]messages.PersistedEvent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.events[id], nil
}

func (f *fakeSource) List(context.Context) ([]messages.SessionRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []messages.SessionRecord
	for _, r := range f.recs {
		out = append(out, r)
	}
	return out, nil
}

// session adds a released session: one turn that changed files (or not).
func (f *fakeSource) session(id, backend string, changed int, outcome messages.Outcome, note string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	files := make([]messages.FileChange, changed)
	evs := []messages.Event{
		{Type: messages.EvStarted, Model: "model-concrete-1"},
		{Type: messages.EvTurnStarted, Text: "fix it"},
		{Type: messages.EvTurnEnd, State: messages.TurnCompleted, CostUSD: 0.25},
		{Type: messages.EvTurnDiff, Diff: &messages.TurnDiff{Source: messages.DiffGit, Files: files}},
		{Type: messages.EvGuidance, Source: messages.SourceUser, Mode: messages.GuideQueue, Text: "again"},
		{Type: messages.EvTurnStarted, Text: "again"},
		{Type: messages.EvTurnEnd, State: messages.TurnCompleted, CostUSD: 0.5},
		{Type: messages.EvTurnDiff, Diff: &messages.TurnDiff{Source: messages.DiffGit, Files: []messages.FileChange{}}},
		{Type: messages.EvReleased, ReleaseReason: messages.ReleaseExplicit, Outcome: outcome, Note: note},
	}
	var pes []messages.PersistedEvent
	for i, e := range evs {
		pes = append(pes, messages.PersistedEvent{Seq: uint64(i + 1), At: t0.Add(time.Duration(i) * time.Second), Event: e})
	}
	f.events[id] = pes
	f.recs[id] = messages.SessionRecord{SessionID: id, BackendID: backend, Cwd: "/nowhere", Model: "cheap",
		MaxPosture: messages.PostureAcceptEdits, TaskBrief: "fix it", TaskTags: []string{"bugfix"},
		Status: messages.StatusEnded, CreatedAt: t0, RoundsElapsed: 2, Runs: []messages.Run{{StartedAt: t0}}}
}

func TestBuild(t *testing.T) {
	f := newFake()
	f.session("s1", "codex", 2, messages.OutcomeSuccess, "")
	r, ok := Build(f.recs["s1"], f.events["s1"], []string{"Write"}, "abc", "def")
	require.True(t, ok)
	assert.Equal(t, "s1#1", r.Key())
	assert.Equal(t, "model-concrete-1", r.Model, "a class sentinel on the record is never recorded")
	assert.Equal(t, 2, r.Rounds)
	assert.InDelta(t, 0.75, r.CostUSD, 1e-9)
	assert.Equal(t, int64(8000), r.DurationMs)
	assert.Equal(t, 1, r.Interventions.UserGuidance)
	assert.True(t, r.Inferred)
	assert.Empty(t, r.FailureReason)
	assert.Equal(t, "abc", r.StartRevision)
	assert.Equal(t, "def", r.EndRevision)

	f.session("s2", "codex", 0, messages.OutcomeFailed, "")
	r, ok = Build(f.recs["s2"], f.events["s2"], nil, "", "")
	require.True(t, ok)
	assert.True(t, r.Inferred)
	assert.Equal(t, "the brief asked for changes and no file changed", r.FailureReason)

	f.session("s3", "codex", 0, messages.OutcomePartial, "half of it")
	r, _ = Build(f.recs["s3"], f.events["s3"], nil, "", "")
	assert.False(t, r.Inferred)
	assert.Equal(t, "half of it", r.DriverNote)

	// shutdown is not an outcome; neither is a run still live
	f.events["s3"][len(f.events["s3"])-1].Event.ReleaseReason = messages.ReleaseShutdown
	_, ok = Build(f.recs["s3"], f.events["s3"], nil, "", "")
	assert.False(t, ok)
	_, ok = Build(f.recs["s3"], f.events["s3"][:3], nil, "", "")
	assert.False(t, ok)
}

func TestRecorderIsIdempotentAndReconciles(t *testing.T) {
	home := t.TempDir()
	f := newFake()
	f.session("s1", "codex", 1, messages.OutcomeSuccess, "")
	f.session("s2", "codex", 1, messages.OutcomeSuccess, "")
	revs := 0
	rec, err := NewRecorder(home, f, Options{Revision: func(context.Context, string) string { revs++; return "rev1" }})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, rec.Started(ctx, "s1"))
	require.NoError(t, rec.Started(ctx, "s1"))
	assert.Equal(t, 1, revs, "the start revision is journalled once per run")

	r, wrote, err := rec.Released(ctx, "s1")
	require.NoError(t, err)
	require.True(t, wrote)
	assert.Equal(t, "rev1", r.StartRevision)
	_, wrote, err = rec.Released(ctx, "s1")
	require.NoError(t, err)
	assert.False(t, wrote, "a second release of the same run records nothing")

	// a crash between the released event and the append: s2 is missing and
	// a new recorder (the next boot) records it, once
	rec2, err := NewRecorder(home, f, Options{Revision: func(context.Context, string) string { return "" }})
	require.NoError(t, err)
	n, err := rec2.Reconcile(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	n, err = rec2.Reconcile(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	all, _ := rec2.Log().All()
	require.Len(t, all, 2)
	assert.Equal(t, "rev1", all[0].StartRevision, "the start revision survives a restart")
}

func TestLogCutsATornTailAndSharesAcrossHandles(t *testing.T) {
	home := t.TempDir()
	a, err := OpenLog(home)
	require.NoError(t, err)
	wrote, err := a.Append(Record{SessionID: "s1", Run: 1, Outcome: messages.OutcomeSuccess})
	require.NoError(t, err)
	require.True(t, wrote)
	// a crash mid-append leaves half a line
	path := filepath.Join(Dir(home), "outcomes.jsonl")
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fh.WriteString(`{"sessionId":"s2","ru`)
	require.NoError(t, err)
	require.NoError(t, fh.Close())

	b, err := OpenLog(home) // another process
	require.NoError(t, err)
	all, _ := b.All()
	require.Len(t, all, 1, "the torn line is never parsed")
	wrote, err = b.Append(Record{SessionID: "s2", Run: 1})
	require.NoError(t, err)
	assert.True(t, wrote, "the torn record is recorded again")
	wrote, err = a.Append(Record{SessionID: "s2", Run: 1})
	require.NoError(t, err)
	assert.False(t, wrote, "a's append catches up on b's line first")
	_, gen1 := a.All()
	require.NoError(t, a.Refresh())
	_, gen2 := a.All()
	assert.Equal(t, gen1, gen2, "nothing new: the generation holds")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, 2, countLines(data))
}

func countLines(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' {
			n++
		}
	}
	return n
}

func TestRevision(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		// under CI=true git is there (.ci/run): a skip would hide this test
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but git is not installed")
		}
		t.Skip("no git")
	}
	dir := t.TempDir()
	assert.Empty(t, Revision(context.Background(), dir), "not a work tree")
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	assert.Len(t, Revision(context.Background(), dir), 40)
}

func TestFilter(t *testing.T) {
	rs := []Record{
		{SessionID: "a", BackendID: "codex", Model: "gpt-5", TaskTags: []string{"bugfix"}, EndedAt: t0},
		{SessionID: "b", BackendID: "claude-code", Model: "haiku", EndedAt: t0.Add(time.Hour)},
	}
	assert.Len(t, Select(rs, Filter{}), 2)
	assert.Equal(t, "a", Select(rs, Filter{Backend: "codex"})[0].SessionID)
	assert.Equal(t, "b", Select(rs, Filter{Model: "HAIKU"})[0].SessionID)
	assert.Equal(t, "a", Select(rs, Filter{Tag: "bugfix"})[0].SessionID)
	assert.Equal(t, "b", Select(rs, Filter{Since: t0.Add(time.Minute)})[0].SessionID)
}
