package actors

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/driver"
	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/learning/lessons"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/native"
	"github.com/codesession/codesession/transports/script"
)

// opCall is a scripted model's call of the op tool.
func opCall(in map[string]any) *modelmock.ToolCall {
	b, _ := json.Marshal(in)
	return &modelmock.ToolCall{Name: messages.ToolName, Input: b}
}

const sidRE = `(cs_[0-9a-f]{64})`

// driverScenario scripts a driver through the seed's flow: on a prompt
// with "DRIVE" it lists the backends, then starts a session (start's
// fields: start), reads its turn, stops it with a verdict, and ends its
// turn with a report. A refused op (a tool error) ends the turn at once.
func driverScenario(start map[string]any) *modelmock.Scenario {
	st := map[string]any{"op": "start", "brief": "AGENT-BRIEF do the task", "taskTags": []string{"demo"}}
	for k, v := range start {
		st[k] = v
	}
	return &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "DRIVE"}, Steps: []modelmock.Step{{Tool: opCall(map[string]any{"op": "list-backends"})}}},
		{Match: modelmock.Match{ToolResultRegex: `^\{"ok":true,"alreadyStopped"`}, Steps: []modelmock.Step{{Text: "REPORT: done, verdict success"}}},
		{Match: modelmock.Match{ToolResultRegex: `^\{"kind":"turn_complete","sessionId":"` + sidRE}, Steps: []modelmock.Step{
			{Tool: opCall(map[string]any{"op": "stop", "sessionId": "{{1}}", "outcome": "success", "note": "verified by the driver"})}}},
		{Match: modelmock.Match{ToolResultRegex: `^\{"sessionId":"` + sidRE}, Steps: []modelmock.Step{
			{Tool: opCall(map[string]any{"op": "read-turn", "sessionId": "{{1}}", "timeoutMs": 120000})}}},
		{Match: modelmock.Match{ToolResultRegex: `^\{"backends"`}, Steps: []modelmock.Step{{Tool: opCall(st)}}},
	}, ToolResultDefault: &modelmock.Step{Text: "REFUSED: {{result}}"}}
}

type driverFixture struct {
	rt   *Runtime
	mock *modelmock.Server
	reg  *prometheus.Registry
	cwd  string
}

func newDriverFixture(t *testing.T, sc *modelmock.Scenario, turns *script.Scenario, mutate func(*config.Config), extra ...Option) *driverFixture {
	t.Helper()
	mock, err := modelmock.Start(t, sc)
	require.NoError(t, err)
	cfg := testConfig(t)
	cfg.Env = map[string]string{"ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-ant-test"}
	if mutate != nil {
		mutate(&cfg)
	}
	if turns == nil {
		turns = &script.Scenario{Turns: []script.Turn{{Steps: []script.Step{script.Text("did the task")}}, {Steps: []script.Step{script.Text("did more")}}}}
	}
	reg := prometheus.NewRegistry()
	loop := native.New(native.WithProcessEnv(nil))
	opts := []Option{WithBackends(transports.NewRegistry(script.New(script.WithScenario(turns)), loop)), WithMetrics(reg), WithDriverLoop(loop)}
	rt, err := New(cfg, append(opts, extra...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // only stops a hang
		defer cancel()
		_ = rt.Close(ctx)
	})
	return &driverFixture{rt: rt, mock: mock, reg: reg, cwd: t.TempDir()}
}

func (f *driverFixture) delegate(t *testing.T, req driver.Request) driver.Record {
	t.Helper()
	if req.Cwd == "" {
		req.Cwd = f.cwd
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := f.rt.Delegate(ctx, req)
	require.NoError(t, err)
	return rec
}

func (f *driverFixture) wait(t *testing.T, id string) driver.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rec, err := f.rt.WaitDelegation(ctx, id)
	require.NoError(t, err)
	return rec
}

// driverRequests are the model calls the driver made (its system prompt is
// the persona's).
func (f *driverFixture) driverRequests() []modelmock.Request {
	var out []modelmock.Request
	for _, r := range f.mock.MainRequests() {
		if c := r.Conversation(); c != nil && strings.Contains(c.System, "code specialist") {
			out = append(out, r)
		}
	}
	return out
}

// metaWatcher is a store whose GetMeta calls check first.
type metaWatcher struct {
	store.Store
	check func()
}

func (m metaWatcher) GetMeta(ctx context.Context, sid string) (messages.SessionRecord, error) {
	m.check()
	return m.Store.GetMeta(ctx, sid)
}

// TestASettledDelegationIsCountedBeforeItShows: whoever reads a delegation
// settled finds it counted in the metrics already (a console polls the
// record, then /metrics). The driver reads its sessions' records while it
// settles; at each read the store looks: no delegation may show done
// while the metrics count fewer done. With the record written before the
// metrics, the settling read saw exactly that (CI once caught the gap in
// TestDelegationsOverHTTP).
func TestASettledDelegationIsCountedBeforeItShows(t *testing.T) {
	var fx atomic.Pointer[driverFixture]
	var uncounted atomic.Int32
	check := func() {
		f := fx.Load()
		if f == nil || f.rt.delegator == nil {
			return
		}
		recs, err := f.rt.delegator.List()
		if err != nil {
			return
		}
		done := 0
		for _, r := range recs {
			if r.State == driver.StateDone {
				done++
			}
		}
		if float64(done) > testutil.ToFloat64(f.rt.driverMetrics.Settled("script", driver.StateDone)) {
			uncounted.Add(1)
		}
	}
	f := newDriverFixture(t, driverScenario(map[string]any{"backend": "script"}), nil, nil,
		WithStore(metaWatcher{Store: store.NewMemory(), check: check}))
	fx.Store(f)
	rec := f.delegate(t, driver.Request{Brief: "DRIVE the scripted agent", Overrides: driver.Overrides{Backend: "script"}})
	done := f.wait(t, rec.ID)
	require.Equal(t, driver.StateDone, done.State, "%+v", done)
	require.Len(t, done.Sessions, 1)
	_, err := f.rt.Store().GetMeta(context.Background(), done.Sessions[0]) // one more look, settled
	require.NoError(t, err)
	assert.Zero(t, uncounted.Load(), "a read saw the delegation settled before the metrics counted it")
	assert.Equal(t, 1.0, testutil.ToFloat64(f.rt.driverMetrics.Settled("script", driver.StateDone)))
}

func lastReleased(t *testing.T, rt *Runtime, sid string) messages.Event {
	t.Helper()
	evs, err := rt.Store().ReadEvents(context.Background(), sid, 0, 0)
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	last := evs[len(evs)-1].Event
	require.Equal(t, messages.EvReleased, last.Type, "the released event is the session's last")
	return last
}

func TestDelegateDrivesASessionToAVerdict(t *testing.T) {
	f := newDriverFixture(t, driverScenario(map[string]any{"backend": "script"}), nil, nil)
	rec := f.delegate(t, driver.Request{Brief: "DRIVE the scripted agent", Overrides: driver.Overrides{Backend: "script"}})
	assert.Equal(t, driver.StateRunning, rec.State)
	assert.Equal(t, driver.DefaultPersona, rec.Agent)
	assert.Equal(t, "packaged", rec.Source)
	assert.Equal(t, "script", rec.Constraints.Backend)
	assert.Equal(t, messages.PostureAcceptEdits, rec.Constraints.MaxPosture, "the persona's ceiling")

	done := f.wait(t, rec.ID)
	require.Equal(t, driver.StateDone, done.State, "%+v", done)
	assert.Contains(t, done.Report, "REPORT: done")
	require.Len(t, done.Sessions, 1)
	sid := done.Sessions[0]
	assert.Equal(t, messages.OutcomeSuccess, done.Verdicts[sid])

	// the driver's only tool is the op tool
	reqs := f.driverRequests()
	require.GreaterOrEqual(t, len(reqs), 5, "list-backends, start, read-turn, stop, report")
	for _, r := range reqs {
		assert.Equal(t, []string{messages.ToolName}, r.Conversation().Tools)
	}

	meta, err := f.rt.Store().GetMeta(context.Background(), sid)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusEnded, meta.Status)
	assert.Equal(t, messages.OutcomeSuccess, meta.Outcome)
	assert.Equal(t, driver.ScopeOf(rec.ID), meta.LatestRun().OwnerScopeID)
	assert.Equal(t, messages.PostureDefault, meta.Posture, "the persona's initialPosture fills a start that names none")
	assert.Equal(t, messages.ReleaseExplicit, lastReleased(t, f.rt, sid).ReleaseReason, "the driver stopped it itself")

	// one outcome per driven session, with the driver's verdict
	require.Eventually(t, func() bool {
		log := f.rt.Learning().Outcomes()
		if log.Refresh() != nil {
			return false
		}
		outs, _ := log.All()
		return len(outs) == 1 && outs[0].SessionID == sid && outs[0].Outcome == messages.OutcomeSuccess
	}, time.Minute, 20*time.Millisecond)

	assert.Equal(t, 1.0, testutil.ToFloat64(f.rt.driverMetrics.Dispatched("script")))
	assert.Equal(t, 1.0, testutil.ToFloat64(f.rt.driverMetrics.Settled("script", driver.StateDone)))
	text := gatherText(t, f.reg)
	assert.Contains(t, text, `code_specialist_settled_total{backend="script",state="done"} 1`)
	assert.Contains(t, text, `code_specialist_duration_ms_count{backend="script"} 1`)
	assert.Contains(t, text, `code_specialist_rounds_sum{backend="script"} 1`)
	assert.Equal(t, 1, strings.Count(text, "# TYPE code_specialist_settled_total "), "one family, one meaning")

	list, err := f.rt.Delegations()
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, []string{sid}, list[0].Sessions)
}

func gatherText(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var b strings.Builder
	for _, mf := range mfs {
		b.WriteString("# TYPE " + mf.GetName() + " " + strings.ToLower(mf.GetType().String()) + "\n")
		for _, m := range mf.GetMetric() {
			labels := []string{}
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			ls := ""
			if len(labels) > 0 {
				ls = "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				b.WriteString(mf.GetName() + ls + " " + trimFloat(m.Counter.GetValue()) + "\n")
			case m.Histogram != nil:
				b.WriteString(mf.GetName() + "_count" + ls + " " + trimFloat(float64(m.Histogram.GetSampleCount())) + "\n")
				b.WriteString(mf.GetName() + "_sum" + ls + " " + trimFloat(m.Histogram.GetSampleSum()) + "\n")
			}
		}
	}
	return b.String()
}

func trimFloat(v float64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A persona cannot widen its ceiling: an explicit maxPosture above the
// scope's is refused (the driver sees ceiling_exceeded, no session
// starts); an omitted one is clamped to it.
func TestDelegatedStartCannotWidenTheCeiling(t *testing.T) {
	t.Run("explicit above: rejected", func(t *testing.T) {
		f := newDriverFixture(t, driverScenario(map[string]any{"maxPosture": "full"}), nil, nil)
		rec := f.delegate(t, driver.Request{Brief: "DRIVE it", Overrides: driver.Overrides{MaxPosture: messages.PostureDefault}})
		done := f.wait(t, rec.ID)
		assert.Empty(t, done.Sessions, "no session started")
		assert.Contains(t, done.Report, "ceiling_exceeded")
		recs, err := f.rt.Store().List(context.Background())
		require.NoError(t, err)
		assert.Empty(t, recs)
	})
	t.Run("omitted: clamped", func(t *testing.T) {
		f := newDriverFixture(t, driverScenario(nil), nil, nil)
		rec := f.delegate(t, driver.Request{Brief: "DRIVE it", Overrides: driver.Overrides{MaxPosture: messages.PosturePlan}})
		done := f.wait(t, rec.ID)
		require.Len(t, done.Sessions, 1)
		meta, err := f.rt.Store().GetMeta(context.Background(), done.Sessions[0])
		require.NoError(t, err)
		assert.Equal(t, messages.PosturePlan, meta.MaxPosture)
		assert.Equal(t, messages.PosturePlan, meta.Posture, "the persona's initialPosture clamped too")
	})
	t.Run("persona file above the override: the override is refused", func(t *testing.T) {
		f := newDriverFixture(t, driverScenario(nil), nil, nil)
		agents := filepath.Join(f.rt.cfg.Home, "agents")
		require.NoError(t, os.MkdirAll(agents, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(agents, "careful.md"), []byte("---\ndriver: true\nmaxPosture: plan\n---\nYou are the code specialist.\n"), 0o600))
		_, err := f.rt.Delegate(context.Background(), driver.Request{Agent: "careful", Brief: "DRIVE", Overrides: driver.Overrides{MaxPosture: messages.PostureFull}})
		assert.True(t, messages.IsCode(err, messages.CodeCeilingExceeded), "%v", err)
		require.NoError(t, os.WriteFile(filepath.Join(agents, "plain.md"), []byte("---\ndriver: false\n---\nNot a driver.\n"), 0o600))
		_, err = f.rt.Delegate(context.Background(), driver.Request{Agent: "plain", Brief: "DRIVE"})
		assert.True(t, messages.IsCode(err, messages.CodeInvalid), "%v", err)
	})
}

// Killing the driver (cancelling it while its session runs, or its model
// failing) releases every session its scope owns with reason sweep.
func TestEndingTheDriverReleasesItsSessions(t *testing.T) {
	slow := &script.Scenario{Turns: []script.Turn{{Steps: []script.Step{script.Delay(10 * time.Minute), script.Text("never")}}}}
	t.Run("cancelled", func(t *testing.T) {
		f := newDriverFixture(t, driverScenario(nil), slow, nil)
		rec := f.delegate(t, driver.Request{Brief: "DRIVE it"})
		var sid string
		require.Eventually(t, func() bool {
			r, err := f.rt.Delegation(rec.ID)
			if err == nil && len(r.Sessions) == 1 {
				sid = r.Sessions[0]
				return true
			}
			return false
		}, time.Minute, 20*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done, err := f.rt.CancelDelegation(ctx, rec.ID)
		require.NoError(t, err)
		assert.Equal(t, driver.StateCancelled, done.State)
		assert.Equal(t, messages.ReleaseSweep, lastReleased(t, f.rt, sid).ReleaseReason)
		live, err := f.rt.LiveSessions(ctx)
		require.NoError(t, err)
		assert.Empty(t, live)
		assert.Equal(t, 1.0, testutil.ToFloat64(f.rt.driverMetrics.Settled("any", driver.StateCancelled)))
		requireSweptOutcome(t, f.rt.Learning(), sid) // one outcome: the sweep's, the driver gave no verdict
	})
	t.Run("its model fails", func(t *testing.T) {
		sc := driverScenario(nil)
		// after the start, the driver's next model call fails for good
		sc.Rules[3].Steps = []modelmock.Step{{Error: &modelmock.ErrorStep{Status: 400, Message: "bad request"}}}
		f := newDriverFixture(t, sc, slow, nil)
		rec := f.delegate(t, driver.Request{Brief: "DRIVE it"})
		done := f.wait(t, rec.ID)
		assert.Equal(t, driver.StateFailed, done.State)
		assert.NotEmpty(t, done.Error)
		require.Len(t, done.Sessions, 1)
		assert.Equal(t, messages.ReleaseSweep, lastReleased(t, f.rt, done.Sessions[0]).ReleaseReason)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		live, err := f.rt.LiveSessions(ctx)
		require.NoError(t, err)
		assert.Empty(t, live, "no driven agent outlives its driver")
		requireSweptOutcome(t, f.rt.Learning(), done.Sessions[0])
	})
}

// The lesson block is appended to the end of the driver's first message
// only; nothing when no lesson qualifies.
func TestLessonBlockReachesTheFirstMessageOnly(t *testing.T) {
	t.Run("a qualifying lesson", func(t *testing.T) {
		f := newDriverFixture(t, driverScenario(nil), nil, nil)
		now := time.Now()
		require.NoError(t, f.rt.Learning().Lessons().Save(lessons.Book{Version: lessons.BookVersion, NextID: 2, Lessons: []lessons.Lesson{{
			ID: "l1", Text: "LESSON-MARK: brief the scripted agent tersely", Base: 0.9, Confidence: 0.9, Evidence: 3,
			Sessions: []string{"a", "b", "c"}, Revisions: []string{"r1", "r2"}, CreatedAt: now, ReinforcedAt: now}}}))
		rec := f.delegate(t, driver.Request{Brief: "DRIVE it"})
		f.wait(t, rec.ID)
		reqs := f.driverRequests()
		require.GreaterOrEqual(t, len(reqs), 2)
		for i, r := range reqs {
			c := r.Conversation()
			first := c.Messages[0]
			require.Equal(t, "user", first.Role)
			last := first.Parts[len(first.Parts)-1].Text
			assert.True(t, strings.HasSuffix(last, "</untrusted-data>\n"), "request %d: the block ends the first message", i)
			assert.Contains(t, last, "LESSON-MARK")
			// (list-backends rows carry their own lesson lines, as tool
			// results; the block is appended to messages only once)
			n := 0
			for _, m := range c.Messages {
				for _, p := range m.Parts {
					if p.Kind == modelmock.PartText {
						n += strings.Count(p.Text, "LESSON-MARK")
					}
				}
			}
			assert.Equal(t, 1, n, "request %d: the block is in the first message and no later one", i)
		}
	})
	t.Run("none qualifies", func(t *testing.T) {
		f := newDriverFixture(t, driverScenario(nil), nil, nil)
		rec := f.delegate(t, driver.Request{Brief: "DRIVE it"})
		f.wait(t, rec.ID)
		for _, r := range f.driverRequests() {
			for _, m := range r.Conversation().Messages {
				for _, p := range m.Parts {
					assert.NotContains(t, p.Text, "untrusted-data")
				}
			}
		}
	})
}

// A resumed delegation adopts the record: same id, gapless seq, rounds
// continuing, one new run.
func TestResumedDelegationAdoptsTheRecord(t *testing.T) {
	f := newDriverFixture(t, driverScenario(nil), nil, nil)
	first := f.wait(t, f.delegate(t, driver.Request{Brief: "DRIVE it"}).ID)
	require.Len(t, first.Sessions, 1)
	sid := first.Sessions[0]
	before, err := f.rt.Store().GetMeta(context.Background(), sid)
	require.NoError(t, err)
	require.Len(t, before.Runs, 1)
	id, ok := DrivenBy(before)
	require.True(t, ok)
	assert.Equal(t, first.ID, id)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := f.rt.ResumeDelegated(ctx, sid, "DRIVE it again")
	require.NoError(t, err)
	assert.Equal(t, sid, res.ResumeOf)
	assert.Equal(t, "script", res.Constraints.Backend, "pinned to the record's backend")
	again := f.wait(t, res.ID)
	require.Equal(t, driver.StateDone, again.State, "%+v", again)
	assert.Equal(t, []string{sid}, again.Sessions, "the driver's start adopted the record: same id")

	after, err := f.rt.Store().GetMeta(context.Background(), sid)
	require.NoError(t, err)
	assert.Len(t, after.Runs, 2, "one new run")
	assert.Equal(t, driver.ScopeOf(res.ID), after.LatestRun().OwnerScopeID)
	assert.Greater(t, after.RoundsElapsed, before.RoundsElapsed, "the round budget continues")
	evs, err := f.rt.Store().ReadEvents(context.Background(), sid, 0, 0)
	require.NoError(t, err)
	for i, ev := range evs {
		require.Equal(t, uint64(i+1), ev.Seq, "one gapless log")
	}
}

// A clarification the driver's policy does not answer (clarify: human)
// reaches the human: the record shows the question, the driver waits, and
// the human's answer lets the session go on to the driver's verdict.
func TestQuestionsTheDriverDoesNotAnswerReachTheHuman(t *testing.T) {
	asking := &script.Scenario{Turns: []script.Turn{{Steps: []script.Step{
		script.Tool("Bash", map[string]any{"command": "make test"}, "ok").Asking(), script.Text("tests pass")}}}}
	f := newDriverFixture(t, driverScenario(nil), asking, nil)
	agents := filepath.Join(f.rt.cfg.Home, "agents")
	require.NoError(t, os.MkdirAll(agents, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(agents, "asker.md"), []byte("---\ndriver: true\nclarify: human\n---\nYou are the code specialist.\n"), 0o600))
	rec := f.delegate(t, driver.Request{Agent: "asker", Brief: "DRIVE it"})
	var q *driver.Question
	require.Eventually(t, func() bool {
		r, err := f.rt.Delegation(rec.ID)
		q = r.Question
		return err == nil && q != nil
	}, time.Minute, 20*time.Millisecond, "the question reaches the record")
	assert.Equal(t, "Bash", q.ToolName)
	r, err := f.rt.Delegation(rec.ID)
	require.NoError(t, err)
	assert.Equal(t, driver.StateRunning, r.State, "the driver waits")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, handled, err := f.rt.AnswerDelegated(ctx, messages.Answer{SessionID: q.SessionID, ClarificationID: "clar-nope", Decision: messages.DecisionAllowOnce})
	require.NoError(t, err)
	assert.False(t, handled, "an unknown clarification is not the delegation's")
	res, handled, err := f.rt.AnswerDelegated(ctx, messages.Answer{SessionID: q.SessionID, ClarificationID: q.ClarificationID, Decision: messages.DecisionAllowOnce})
	require.NoError(t, err)
	require.True(t, handled)
	assert.True(t, res.OK)

	done := f.wait(t, rec.ID)
	require.Equal(t, driver.StateDone, done.State, "%+v", done)
	assert.Nil(t, done.Question)
	assert.Equal(t, messages.OutcomeSuccess, done.Verdicts[q.SessionID])
	for _, tr := range f.mock.ToolResults() {
		assert.False(t, strings.HasPrefix(tr.Content, `{"kind":"clarification"`), "the driver never had the question: %s", tr.Content)
		if strings.HasPrefix(tr.Content, `{"kind":"turn_complete"`) {
			assert.Contains(t, tr.Content, "Bash: allow_once", "the human's answer is in the round history the driver reads")
		}
	}
}

// A driver whose process died while it ran is marked killed at the next
// boot (its sessions are released by the boot sweep: driver_kill_test.go).
func TestADeadProcessesDelegationIsMarkedKilledAtBoot(t *testing.T) {
	cfg := testConfig(t)
	recs, err := driver.OpenRecords(cfg.Home)
	require.NoError(t, err)
	const id = "dl_00000000000000000000beef"
	now := time.Now()
	require.NoError(t, recs.Put(driver.Record{ID: id, Agent: driver.DefaultPersona, Scope: driver.ScopeOf(id), Runtime: "rt-long-gone",
		State: driver.StateRunning, Sessions: []string{}, CreatedAt: now, UpdatedAt: now}))
	rt := newRuntime(t, cfg, &script.Scenario{})
	rec, err := rt.Delegation(id)
	require.NoError(t, err)
	assert.Equal(t, driver.StateKilled, rec.State)
	assert.NotEmpty(t, rec.Error)
}
