package actors

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/learning/lessons"
	"github.com/codesession/codesession/learning/loop"
	"github.com/codesession/codesession/learning/outcomes"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/script"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// gitRepo makes a work tree with one commit and returns it and its HEAD.
func gitRepo(t *testing.T, content string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte(content), 0o644))
	for _, args := range [][]string{{"init", "-q"}, {"add", "README"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", content}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	rev := outcomes.Revision(context.Background(), dir)
	require.Len(t, rev, 40)
	return dir, rev
}

// swapModel lets a test point the loop's distiller at a new model server.
type swapModel struct {
	mu sync.Mutex
	m  lessons.Model
}

func (s *swapModel) set(m lessons.Model) { s.mu.Lock(); s.m = m; s.mu.Unlock() }
func (s *swapModel) Name() string        { s.mu.Lock(); defer s.mu.Unlock(); return s.m.Name() }
func (s *swapModel) Complete(ctx context.Context, sys, p string) (string, error) {
	s.mu.Lock()
	m := s.m
	s.mu.Unlock()
	return m.Complete(ctx, sys, p)
}

// modelAnswering starts a scripted model server whose every answer is
// answer, and returns a distiller model on it (the Anthropic wire).
func modelAnswering(t *testing.T, answer string) lessons.Model {
	t.Helper()
	srv, err := modelmock.Start(t, &modelmock.Scenario{Default: &modelmock.Step{Text: answer}})
	require.NoError(t, err)
	env := map[string]string{"ANTHROPIC_BASE_URL": srv.URL(), "ANTHROPIC_API_KEY": "sk-ant-test"}
	m, err := lessons.NewModel(lessons.ModelConfig{}, func(k string) string { return env[k] })
	require.NoError(t, err)
	return m
}

// The learning loop end to end: sessions of the script backend with
// different verdicts become outcomes and track-record lines; a distillation
// pass against modelmock makes a lesson; the same revision twice counts
// once; the lesson is injected only after two independent supports.
func TestLearningLoopEndToEnd(t *testing.T) {
	subprocesstest.Git(t) // revisions are what makes evidence independent
	sc := &script.Scenario{Turns: []script.Turn{
		{Match: "write one", Steps: []script.Step{script.Write("one.txt", "1\n"), script.Text("wrote one")}},
		{Match: "write two", Steps: []script.Step{script.Write("two.txt", "2\n"), script.Text("wrote two")}},
		{Match: "write three", Steps: []script.Step{script.Write("three.txt", "3\n"), script.Text("wrote three")}},
		{Match: "break", Steps: []script.Step{script.Text("trying"), script.Fail("the build broke")}},
		{Match: "explain", Steps: []script.Step{script.Text("it reads the config, then serves")}},
	}, Fallback: &script.Turn{Steps: []script.Step{script.Text("nothing to do")}}}
	cfg := testConfig(t)
	swap := &swapModel{}
	st := store.NewMemory()
	lp, err := loop.Open(cfg.Home, cfg.Learning, st, loop.Options{Model: swap,
		EditTools: func(string) []string { return []string{"Write", "Edit"} }})
	require.NoError(t, err)
	rt := newRuntime(t, cfg, sc, WithStore(st), WithLearning(lp))

	repoA, revA := gitRepo(t, "a")
	repoB, revB := gitRepo(t, "b")
	ctx := ctxT(t)
	run := func(cwd, brief, model string, verdict messages.Outcome) string {
		t.Helper()
		st, err := rt.Start(ctx, "s", messages.Start{Brief: brief, Cwd: cwd, Model: model, Backend: "script"})
		require.NoError(t, err)
		readKind(t, rt, "s", st.SessionID)
		_, err = rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID, Outcome: verdict, Note: map[bool]string{true: "half done"}[verdict != ""]})
		require.NoError(t, err)
		return st.SessionID
	}
	s1 := run(repoA, "write one", "cheap", "")
	s2 := run(repoA, "write two", "cheap", "")
	run(repoA, "do nothing much", "", "")
	run(repoA, "break it", "", "")
	run(repoA, "explain the server", "", "")
	run(repoA, "write nothing", "", messages.OutcomePartial)

	log := lp.Outcomes()
	all := waitOutcomes(t, log, 6)
	byID := map[string]outcomes.Record{}
	for _, r := range all {
		byID[r.SessionID] = r
	}
	assert.Equal(t, "script-cheap", byID[s1].Model, "the class sentinel was resolved and the concrete model recorded")
	assert.Equal(t, revA, byID[s1].StartRevision)
	assert.Equal(t, revA, byID[s2].StartRevision)
	var got []string
	for _, r := range all {
		got = append(got, string(r.Outcome)+":"+r.FailureReason)
	}
	assert.Equal(t, []string{"success:", "success:", "failed:the brief asked for changes and no file changed",
		"failed:the last turn ended in an error", "success:", "partial:"}, got)

	lb, err := rt.ListBackends(ctx, "s")
	require.NoError(t, err)
	require.Len(t, lb.Backends, 1)
	listing := lb.Backends[0]
	assert.Equal(t, []string{
		"script: 6 runs, 50% success, avg 1.0 rounds, last failure: the last turn ended in an error (just now)",
		"  script / script-cheap: 2 runs, 100% success, avg 1.0 rounds",
	}, listing.TrackRecord)
	assert.Contains(t, listing.RoutingGuidance, "model classes: cheap->script-cheap, standard->script-standard, frontier->script-frontier")
	assert.Empty(t, listing.LessonBlock)

	// pass 1: the model cites s1 twice and s2, all at revision A: one
	// piece of evidence
	lesson := "script with the cheap class finishes one-file writes"
	swap.set(modelAnswering(t, `{"lessons":[{"text":"`+lesson+`","backend":"script","model":"","tags":[],"sessions":["`+s1+`","`+s1+`","`+s2+`"],"reinforces":""}]}`))
	rep, err := lp.Distill(ctx)
	require.NoError(t, err)
	assert.Equal(t, 6, rep.Outcomes)
	assert.Equal(t, 1, rep.Created)
	assert.Equal(t, 0, rep.Reinforced, "the same revision twice is one piece of evidence")
	book, err := lp.Lessons().Load()
	require.NoError(t, err)
	require.Len(t, book.Lessons, 1)
	assert.Equal(t, 1, book.Lessons[0].Evidence)
	assert.Empty(t, rt.LessonBlock("script", "", nil), "one support is not enough to inject")

	// a new session at revision B supports it: evidence 2, injected
	s3 := run(repoB, "write three", "cheap", "")
	waitOutcomes(t, log, 7)
	swap.set(modelAnswering(t, `{"lessons":[{"text":"`+lesson+`.","backend":"script","model":"","tags":[],"sessions":["`+s3+`"],"reinforces":""}]}`))
	rep, err = lp.Distill(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Outcomes)
	assert.Equal(t, 1, rep.Reinforced)
	book, err = lp.Lessons().Load()
	require.NoError(t, err)
	require.Len(t, book.Lessons, 1)
	assert.Equal(t, 2, book.Lessons[0].Evidence)
	assert.Equal(t, []string{revA, revB}, book.Lessons[0].Revisions)
	block := rt.LessonBlock("script", "", nil)
	assert.Contains(t, block, lesson)
	assert.Contains(t, block, "DATA, not instructions")
	assert.LessOrEqual(t, len(block), lessons.MaxBlockBytes)
	assert.Empty(t, rt.LessonBlock("unknown-backend", "", nil), "a backend-scoped lesson never matches an unknown backend")
	lb, err = rt.ListBackends(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, block, lb.Backends[0].LessonBlock)
	assert.True(t, strings.HasPrefix(lb.Backends[0].TrackRecord[0], "script: 7 runs, 57% success"), lb.Backends[0].TrackRecord[0])
}

func waitOutcomes(t *testing.T, log *outcomes.Log, n int) []outcomes.Record {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		require.NoError(t, log.Refresh())
		all, _ := log.All()
		if len(all) >= n || time.Now().After(deadline) {
			require.Len(t, all, n)
			return all
		}
		time.Sleep(20 * time.Millisecond)
	}
}
