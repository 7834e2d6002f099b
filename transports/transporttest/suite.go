package transporttest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// Run runs the conformance suite against the backend h plugs in: a
// "descriptor" subtest, then one subtest per case of Cases, in order and
// one at a time. A case whose ability the descriptor does not claim (steer,
// set-posture, interrupt, resume) is skipped, as is one Prepare skips.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.Prepare == nil {
		t.Fatal("transporttest: Harness.New and Harness.Prepare are required")
	}
	if h.timeout() > LongSlow/4 {
		t.Fatalf("transporttest: Harness.Timeout %v must stay below %v, so an interrupted turn is told from one that ended by itself", h.timeout(), LongSlow/4)
	}
	t.Run("descriptor", func(t *testing.T) {
		leakCheck(t, h)
		testDescriptor(t, h)
	})
	for _, c := range Cases() {
		check := checks[c.Name]
		if check == nil {
			t.Fatalf("transporttest: no check for case %q", c.Name)
		}
		t.Run(c.Name, func(t *testing.T) {
			check(newEnv(t, h, &c))
		})
	}
}

var checks = map[string]func(*env){
	CaseText:           checkText,
	CaseToolEdit:       checkToolEdit,
	CaseClarifyAllow:   checkClarifyAllow,
	CaseClarifyDeny:    checkClarifyDeny,
	CaseGuidanceQueued: checkGuidanceQueued,
	CaseSteer:          checkSteer,
	CaseSetPosture:     checkSetPosture,
	CaseInterrupt:      checkInterrupt,
	CaseCloseMidTurn:   checkCloseMidTurn,
	CaseResume:         checkResume,
	CaseOutputCapped:   checkOutputCapped,
	CaseBinaryMissing:  checkBinaryMissing,
	CaseImmediateExit:  checkImmediateExit,
	CaseGarbageStdout:  checkNoise,
	CaseLongLine:       checkNoise,
}

// leakCheck registers the per-case goroutine leak check. Registered first,
// it runs after every other cleanup of the case.
func leakCheck(t *testing.T, h Harness) {
	if h.SkipLeakCheck {
		return
	}
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

func testDescriptor(t *testing.T, h Harness) {
	e := &env{t: t, timeout: h.timeout()}
	tr := h.New(t)
	if tr == nil {
		t.Fatal("Harness.New returned nil")
	}
	d := tr.Descriptor()
	if d.ID == "" || d.DisplayName == "" {
		t.Errorf("descriptor needs an ID and a DisplayName: %q, %q", d.ID, d.DisplayName)
	}
	if d.Granularity != messages.GranularityStream && d.Granularity != messages.GranularityPerTurn {
		t.Errorf("descriptor Granularity %q: want %q or %q", d.Granularity, messages.GranularityStream, messages.GranularityPerTurn)
	}
	if !slices.Contains([]messages.ResumeKind{messages.ResumeNative, messages.ResumeThreadID, messages.ResumeNone}, d.Resume) {
		t.Errorf("descriptor Resume %q is not a resume kind", d.Resume)
	}
	if !slices.Contains([]messages.ModelSelection{messages.ModelPerTurn, messages.ModelPerSession, messages.ModelFixed}, d.ModelSelection) {
		t.Errorf("descriptor ModelSelection %q is not a model selection", d.ModelSelection)
	}
	if !slices.Contains([]messages.EffortSupport{messages.EffortNone, messages.EffortAtStart, messages.EffortPerTurn}, d.EffortSupport) {
		t.Errorf("descriptor EffortSupport %q is not an effort support", d.EffortSupport)
	}
	if !slices.Contains([]messages.CostProfile{messages.CostSubscription, messages.CostMetered, messages.CostInternal, messages.CostFree}, d.Cost) {
		t.Errorf("descriptor Cost %q is not a cost profile", d.Cost)
	}
	for p := range d.PostureMap {
		if !p.Valid() {
			t.Errorf("descriptor PostureMap has an invalid posture %q", p)
		}
	}
	for _, m := range d.Live.GuideModes {
		if !m.Valid() {
			t.Errorf("descriptor Live.GuideModes has an invalid mode %q", m)
		}
	}
	if len(d.EditToolNames) == 0 {
		t.Error("descriptor EditToolNames is empty: diff capture needs the names of the tools that edit files")
	}
	if !reflect.DeepEqual(d, tr.Descriptor()) {
		t.Error("Descriptor changed between two calls: it is static")
	}

	var a messages.Availability
	e.call(nil, "Probe", func(ctx context.Context) error { a = tr.Probe(ctx); return nil })
	if !a.Available {
		t.Fatalf("Probe says the backend is unavailable here (%s): a harness skips before Run when its backend cannot run", a.Reason)
	}
	if a.Version == "" {
		t.Error("Probe reports an available backend without its Version")
	}
	if a.CheckedAt.IsZero() {
		t.Error("Probe leaves CheckedAt zero")
	}
}

// env is one case's state, owned by its test goroutine.
type env struct {
	t        *testing.T
	c        *Case
	timeout  time.Duration
	setup    Setup
	tr       transports.Transport
	desc     transports.Descriptor
	spec     transports.SessionSpec
	sessions []*sess
}

// sess is one session of a case with its recorder.
type sess struct {
	e      *env
	s      transports.Session
	rec    *Recorder
	closed bool
	hung   string // the method that did not return; nothing more is called
}

func newEnv(t *testing.T, h Harness, c *Case) *env {
	e := &env{t: t, c: c, timeout: h.timeout()}
	// Cleanups run last in, first out: the sessions close, then the
	// harness's cleanups run, then the leak check, then the report.
	t.Cleanup(e.report)
	leakCheck(t, h)
	c.Workspace = t.TempDir()
	e.setup = h.Prepare(t, c)
	e.tr = e.setup.Transport
	if e.tr == nil {
		e.tr = h.New(t)
	}
	if e.tr == nil {
		t.Fatal("Harness.New returned nil")
	}
	e.desc = e.tr.Descriptor()
	spec := e.setup.Spec
	switch spec.Cwd {
	case "":
		spec.Cwd = c.Workspace
	case c.Workspace:
	default:
		t.Fatalf("Setup.Spec.Cwd is %q: want the case's Workspace %q (or empty)", spec.Cwd, c.Workspace)
	}
	switch spec.Posture {
	case "":
		spec.Posture = c.Posture
	case c.Posture:
	default:
		t.Fatalf("Setup.Spec.Posture is %q: want the case's %q (or empty)", spec.Posture, c.Posture)
	}
	if spec.ResumeExternalID != "" {
		t.Fatal("Setup.Spec.ResumeExternalID is set: the suite sets it for the resumed session")
	}
	if spec.SessionID == "" {
		spec.SessionID = messages.NewSessionID()
	}
	e.spec = spec
	return e
}

// report fails the case with every session's invariant violations.
func (e *env) report() {
	for i, s := range e.sessions {
		if v := s.rec.Check(); len(v) > 0 {
			e.t.Errorf("session %d broke the event-stream invariants:\n  %s\nevents:\n%s",
				i+1, strings.Join(v, "\n  "), s.rec.Transcript())
		}
	}
}

// call runs f with a context bounded by the case's timeout, and fails the
// case if f panics or does not return within another timeout after its
// context expired. A session whose method did not return is marked hung:
// nothing more is called on it (a panicked one is still closed).
func (e *env) call(s *sess, name string, f func(ctx context.Context) error) error {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e.timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("%w: %v\n%s", errPanic, p, debug.Stack())
			}
		}()
		done <- f(ctx)
	}()
	grace := time.NewTimer(2 * e.timeout)
	defer grace.Stop()
	select {
	case err := <-done:
		if errors.Is(err, errPanic) {
			e.t.Fatalf("%s panicked: %v", name, err)
		}
		return err
	case <-grace.C:
		if s != nil {
			s.hung = name
		}
		e.t.Fatalf("%s did not return within %v (its context expired after %v)", name, 2*e.timeout, e.timeout)
		return nil
	}
}

var errPanic = errors.New("panic")

// tryOpen opens a session; its Close runs when the case ends.
func (e *env) tryOpen(spec transports.SessionSpec) (*sess, error) {
	e.t.Helper()
	rec := NewRecorder()
	rec.OutputCap = e.setup.OutputCap
	rec.Faulty = e.c.Fault != FaultNone
	s := &sess{e: e, rec: rec}
	err := e.call(s, "Open", func(ctx context.Context) error {
		var err error
		s.s, err = e.tr.Open(ctx, spec, rec.Sink)
		return err
	})
	if err != nil {
		if s.s != nil {
			e.t.Errorf("Open returned both a session and an error: %v", err)
		}
		if len(rec.Records()) > 0 {
			e.t.Errorf("Open failed, yet events arrived:\n%s", rec.Transcript())
		}
		return nil, err
	}
	if s.s == nil {
		e.t.Fatal("Open returned neither a session nor an error")
	}
	e.sessions = append(e.sessions, s)
	e.t.Cleanup(s.cleanup)
	return s, nil
}

func (e *env) open(spec transports.SessionSpec) *sess {
	e.t.Helper()
	s, err := e.tryOpen(spec)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	return s
}

func (s *sess) cleanup() {
	if s.hung != "" {
		s.e.t.Errorf("not closing the session: its %s did not return", s.hung)
		return
	}
	if !s.closed {
		s.close()
	}
}

// close calls Close twice: both must return nil within the bound, and no
// event may arrive after the first returned.
func (s *sess) close() {
	t := s.e.t
	t.Helper()
	s.closed = true
	s.rec.Closing()
	if err := s.e.call(s, "Close", s.s.Close); err != nil {
		t.Errorf("Close: %v", err)
		return
	}
	s.rec.MarkClosed()
	if err := s.e.call(s, "Close (again)", s.s.Close); err != nil {
		t.Errorf("a second Close: %v; Close is idempotent", err)
	}
}

// start starts turn n; an error is returned after the recorder knows the
// turn was refused.
func (s *sess) start(n int, input string) error {
	s.e.t.Helper()
	s.rec.TurnStarting(n)
	err := s.e.call(s, "StartTurn", func(ctx context.Context) error { return s.s.StartTurn(ctx, n, input) })
	if err != nil {
		s.rec.TurnRefused(n)
	}
	return err
}

func (s *sess) mustStart(tn Turn) {
	s.e.t.Helper()
	if err := s.start(tn.Number, tn.Input); err != nil {
		s.e.t.Fatalf("StartTurn(%d): %v\nevents:\n%s", tn.Number, err, s.rec.Transcript())
	}
}

// answerer answers a clarification raised in a turn.
type answerer func(ev messages.Event) (messages.Decision, string)

func allowAny(messages.Event) (messages.Decision, string) { return messages.DecisionAllowOnce, "" }

// run starts tn and waits for it to close (see finish).
func (s *sess) run(tn Turn, answer answerer) []messages.Event {
	s.e.t.Helper()
	s.mustStart(tn)
	return s.finish(tn.Number, answer)
}

// finish waits until turn n is closed or the session ends, answering each
// clarification the turn raises with answer (nil: a clarification fails
// the case). It returns the turn's events.
func (s *sess) finish(n int, answer answerer) []messages.Event {
	s.e.t.Helper()
	return s.finishWithin(n, answer, s.e.timeout)
}

// finishWithin is finish with each wait bounded by timeout.
func (s *sess) finishWithin(n int, answer answerer, timeout time.Duration) []messages.Event {
	t := s.e.t
	t.Helper()
	handled := 0
	for {
		var evs []messages.Event
		var dead bool
		_, ok := s.rec.Wait(timeout, func(recs []Record) bool {
			evs = turnEvents(recs, n)
			dead = deadIn(recs)
			return closingIn(evs) != nil || len(raised(evs)) > handled || dead
		})
		if !ok {
			t.Fatalf("turn %d was not closed within %v\nevents:\n%s", n, timeout, s.rec.Transcript())
		}
		if qs := raised(evs); len(qs) > handled {
			q := qs[handled]
			handled++
			if answer == nil {
				t.Fatalf("turn %d raised a clarification this case does not expect: %s\nevents:\n%s", n, Brief(q), s.rec.Transcript())
			}
			d, reason := answer(q)
			if err := s.e.call(s, "Answer", func(ctx context.Context) error {
				return s.s.Answer(ctx, q.ClarificationID, d, reason)
			}); err != nil {
				t.Fatalf("Answer(%s, %s): %v", q.ClarificationID, d, err)
			}
			continue
		}
		if closingIn(evs) == nil && dead {
			t.Fatalf("the session ended without closing turn %d\nevents:\n%s", n, s.rec.Transcript())
		}
		return evs
	}
}

// waitFor waits for an event of turn n that pred accepts; the turn closing
// first fails the case.
func (s *sess) waitFor(n int, what string, pred func(messages.Event) bool) messages.Event {
	t := s.e.t
	t.Helper()
	var found *messages.Event
	var closed bool
	_, ok := s.rec.Wait(s.e.timeout, func(recs []Record) bool {
		for _, ev := range turnEvents(recs, n) {
			if pred(ev) {
				found = &ev
				return true
			}
		}
		closed = closingIn(turnEvents(recs, n)) != nil || deadIn(recs)
		return closed
	})
	switch {
	case !ok:
		t.Fatalf("no %s in turn %d within %v\nevents:\n%s", what, n, s.e.timeout, s.rec.Transcript())
	case found == nil:
		t.Fatalf("turn %d closed before %s\nevents:\n%s", n, what, s.rec.Transcript())
	}
	return *found
}

func (s *sess) started() messages.Event {
	s.e.t.Helper()
	ev, ok := s.rec.Started()
	if !ok {
		s.e.t.Fatalf("no EvStarted arrived\nevents:\n%s", s.rec.Transcript())
	}
	return ev
}

func isText(ev messages.Event) bool {
	return ev.Type == messages.EvText || ev.Type == messages.EvThinking
}

// raised lists the clarifications a turn raised.
func raised(evs []messages.Event) []messages.Event {
	var out []messages.Event
	for _, ev := range evs {
		if ev.Type == messages.EvClarification && ev.Decision == "" {
			out = append(out, ev)
		}
	}
	return out
}

func closingIn(evs []messages.Event) *messages.Event {
	for i := range evs {
		if Closes(evs[i]) {
			return &evs[i]
		}
	}
	return nil
}

func deadIn(recs []Record) bool {
	for _, r := range recs {
		if r.Event.Type != messages.EvTurnEnd && Closes(r.Event) {
			return true
		}
	}
	return false
}

// textOf is everything a turn said: its deltas joined, its complete texts
// and its closing text.
func textOf(evs []messages.Event) string {
	var deltas, whole strings.Builder
	for _, ev := range evs {
		switch {
		case ev.Type == messages.EvText && ev.Delta:
			deltas.WriteString(ev.Text)
		case ev.Type == messages.EvText, ev.Type == messages.EvTurnEnd:
			whole.WriteString("\n" + ev.Text)
		}
	}
	return deltas.String() + whole.String()
}

// requireClosed fails unless the turn was closed by an EvTurnEnd in state.
func (e *env) requireClosed(n int, evs []messages.Event, state messages.TurnState) messages.Event {
	e.t.Helper()
	c := closingIn(evs)
	switch {
	case c == nil:
		e.t.Fatalf("turn %d was not closed", n)
	case c.Type != messages.EvTurnEnd || c.State != state:
		e.t.Fatalf("turn %d closed with %s: want turn_end %s", n, Brief(*c), state)
	}
	return *c
}

func (e *env) requireText(n int, evs []messages.Event, want string) {
	e.t.Helper()
	if !strings.Contains(textOf(evs), want) {
		e.t.Errorf("turn %d never said %q; it said %q", n, want, textOf(evs))
	}
}

// requireTyped fails unless err is a *messages.Error with a known code.
func (e *env) requireTyped(op string, err error) {
	e.t.Helper()
	var me *messages.Error
	if !errors.As(err, &me) {
		e.t.Errorf("%s failed with %T (%v): want a *messages.Error", op, err, err)
		return
	}
	if !me.Code.Valid() {
		e.t.Errorf("%s failed with an unknown code %q: %v", op, me.Code, err)
	}
}

func (e *env) path(rel string) string { return filepath.Join(e.c.Workspace, filepath.FromSlash(rel)) }

func (e *env) requireFile(rel, content string) {
	e.t.Helper()
	got, err := os.ReadFile(e.path(rel))
	switch {
	case err != nil:
		e.t.Errorf("%s was not written in the workspace: %v", rel, err)
	case string(got) != content:
		e.t.Errorf("%s holds %q: want %q", rel, got, content)
	}
}

func (e *env) requireNoFile(rel, when string) {
	e.t.Helper()
	if _, err := os.Lstat(e.path(rel)); !errors.Is(err, fs.ErrNotExist) {
		e.t.Errorf("%s exists %s (stat: %v)", rel, when, err)
	}
}

// saw asks the harness whether the agent was shown substr.
func (e *env) saw(s *sess, substr string) bool {
	if e.setup.AgentSaw != nil {
		return e.setup.AgentSaw(substr)
	}
	return SawInEvents(s.rec.Records(), substr)
}

func (e *env) stream() bool { return e.desc.Granularity == messages.GranularityStream }

// editUse finds the call of an edit tool of the descriptor whose input
// names file, and its result.
func (e *env) editUse(n int, evs []messages.Event, file string) (use, result *messages.Event) {
	e.t.Helper()
	for i := range evs {
		ev := &evs[i]
		if ev.Type == messages.EvToolUse && slices.Contains(e.desc.EditToolNames, ev.ToolName) &&
			strings.Contains(string(ev.Input), file) {
			use = ev
		}
	}
	if use == nil {
		e.t.Errorf("turn %d has no EvToolUse of an edit tool %v naming %s", n, e.desc.EditToolNames, file)
		return nil, nil
	}
	for i := range evs {
		if evs[i].Type == messages.EvToolResult && evs[i].ToolUseID == use.ToolUseID {
			result = &evs[i]
		}
	}
	if result == nil {
		e.t.Errorf("turn %d has no EvToolResult for %s", n, Brief(*use))
	}
	return use, result
}

// askChecks returns an answerer that checks the clarification is about
// writing file, and that the file does not exist yet, then decides.
func (e *env) askChecks(file string, d messages.Decision, reason string, asked *int) answerer {
	return func(q messages.Event) (messages.Decision, string) {
		e.t.Helper()
		*asked++
		if !slices.Contains(e.desc.EditToolNames, q.ToolName) {
			e.t.Errorf("the clarification names tool %q: want an edit tool of the descriptor %v", q.ToolName, e.desc.EditToolNames)
		}
		if !strings.Contains(string(q.Input), file) {
			e.t.Errorf("the clarification's Input %s does not name %s", q.Input, file)
		}
		e.requireNoFile(file, "before its clarification was answered")
		return d, reason
	}
}

// The cases.

func checkText(e *env) {
	s := e.open(e.spec)
	e.checkAbilities(s)
	tn := e.c.Turns[0]
	evs := s.run(tn, nil)
	e.requireClosed(1, evs, messages.TurnCompleted)
	e.requireText(1, evs, tn.Actions[0].Text)
	s.started()
	s.close()
}

// checkAbilities holds the descriptor's live controls to the optional
// interfaces the session implements, both ways: the runtime offers what
// the descriptor claims, and finds the ability by type assertion.
func (e *env) checkAbilities(s *sess) {
	e.t.Helper()
	d := e.desc
	_, interrupts := s.s.(transports.Interrupter)
	_, steers := s.s.(transports.Steerer)
	_, setsPosture := s.s.(transports.PostureSetter)
	if d.Live.Interrupt != interrupts {
		e.t.Errorf("descriptor Live.Interrupt is %v, but the session implements Interrupter: %v", d.Live.Interrupt, interrupts)
	}
	if d.SupportsGuideMode(messages.GuideInterrupt) && !interrupts {
		e.t.Error("descriptor offers guide mode interrupt, but the session does not implement Interrupter")
	}
	if d.SupportsGuideMode(messages.GuideSteer) != steers {
		e.t.Errorf("descriptor steer guide mode is %v, but the session implements Steerer: %v", d.SupportsGuideMode(messages.GuideSteer), steers)
	}
	if d.Live.SetPosture != setsPosture {
		e.t.Errorf("descriptor Live.SetPosture is %v, but the session implements PostureSetter: %v", d.Live.SetPosture, setsPosture)
	}
}

func checkToolEdit(e *env) {
	s := e.open(e.spec)
	tn := e.c.Turns[0]
	w := tn.Actions[0]
	evs := s.run(tn, nil)
	e.requireClosed(1, evs, messages.TurnCompleted)
	e.requireFile(w.Path, w.Content)
	if e.stream() {
		if _, res := e.editUse(1, evs, w.Path); res != nil && res.IsError {
			e.t.Errorf("the write's result is an error: %s", Brief(*res))
		}
	}
}

func checkClarifyAllow(e *env) {
	s := e.open(e.spec)
	tn := e.c.Turns[0]
	w := tn.Actions[0]
	asked := 0
	evs := s.run(tn, e.askChecks(w.Path, messages.DecisionAllowOnce, "", &asked))
	if asked != 1 {
		e.t.Errorf("turn 1 raised %d clarifications: want 1, for the gated write", asked)
	}
	e.requireClosed(1, evs, messages.TurnCompleted)
	e.requireFile(w.Path, w.Content)
	if e.stream() {
		if _, res := e.editUse(1, evs, w.Path); res != nil && res.IsError {
			e.t.Errorf("the allowed write's result is an error: %s", Brief(*res))
		}
	}
	e.requireText(1, evs, tn.Actions[1].Text)
}

func checkClarifyDeny(e *env) {
	s := e.open(e.spec)
	tn := e.c.Turns[0]
	w := tn.Actions[0]
	asked := 0
	evs := s.run(tn, e.askChecks(w.Path, messages.DecisionDeny, DenyReason, &asked))
	if asked != 1 {
		e.t.Errorf("turn 1 raised %d clarifications: want 1, for the gated write", asked)
	}
	e.requireClosed(1, evs, messages.TurnCompleted)
	e.requireNoFile(w.Path, "after its write was denied")
	if e.stream() {
		if _, res := e.editUse(1, evs, w.Path); res != nil && !res.IsError {
			e.t.Errorf("the denied write's result is not an error: %s", Brief(*res))
		}
	}
	if !e.saw(s, DenyReason) {
		e.t.Errorf("the deny reason %q never reached the agent\nevents:\n%s", DenyReason, s.rec.Transcript())
	}
	e.requireText(1, evs, tn.Actions[1].Text)
}

func checkGuidanceQueued(e *env) {
	s := e.open(e.spec)
	for _, tn := range e.c.Turns {
		evs := s.run(tn, nil)
		e.requireClosed(tn.Number, evs, messages.TurnCompleted)
		e.requireText(tn.Number, evs, tn.Actions[0].Text)
	}
	if g := e.c.Turns[1].Input; !e.saw(s, g) {
		e.t.Errorf("the queued guidance %q never reached the agent", g)
	}
}

func checkSteer(e *env) {
	if !e.desc.SupportsGuideMode(messages.GuideSteer) {
		e.t.Skip("the descriptor offers no steer guide mode")
	}
	s := e.open(e.spec)
	st, ok := s.s.(transports.Steerer)
	if !ok {
		e.t.Fatal("the descriptor offers steering, but the session does not implement transports.Steerer")
	}
	tn := e.c.Turns[0]
	s.mustStart(tn)
	s.waitFor(1, "text from the slow action", isText)
	if err := e.call(s, "Steer", func(ctx context.Context) error { return st.Steer(ctx, SteerText) }); err != nil {
		e.t.Fatalf("Steer while turn 1 runs: %v", err)
	}
	evs := s.finishWithin(1, nil, e.timeout+ShortSlow) // the slow action is waited out
	e.requireClosed(1, evs, messages.TurnCompleted)
	if !e.saw(s, SteerText) {
		e.t.Errorf("the steering %q never reached the agent\nevents:\n%s", SteerText, s.rec.Transcript())
	}
}

func checkSetPosture(e *env) {
	if !e.desc.Live.SetPosture {
		e.t.Skip("the descriptor says posture cannot be set live")
	}
	s := e.open(e.spec)
	ps, ok := s.s.(transports.PostureSetter)
	if !ok {
		e.t.Fatal("the descriptor says posture can be set live, but the session does not implement transports.PostureSetter")
	}
	set := func(p messages.Posture) {
		if err := e.call(s, "SetPosture", func(ctx context.Context) error { return ps.SetPosture(ctx, p) }); err != nil {
			e.t.Fatalf("SetPosture(%s): %v", p, err)
		}
	}

	set(messages.PostureAcceptEdits)
	t1 := e.c.Turns[0]
	evs := s.run(t1, nil) // under acceptEdits the gated write must not ask
	e.requireClosed(1, evs, messages.TurnCompleted)
	e.requireFile(t1.Actions[0].Path, t1.Actions[0].Content)

	set(messages.PostureDefault)
	t2 := e.c.Turns[1]
	asked := 0
	evs = s.run(t2, e.askChecks(t2.Actions[0].Path, messages.DecisionAllowOnce, "", &asked))
	if asked != 1 {
		e.t.Errorf("back in default posture, the gated write raised %d clarifications: want 1", asked)
	}
	e.requireClosed(2, evs, messages.TurnCompleted)
	e.requireFile(t2.Actions[0].Path, t2.Actions[0].Content)
}

func checkInterrupt(e *env) {
	if !e.desc.Live.Interrupt {
		e.t.Skip("the descriptor says turns cannot be interrupted")
	}
	s := e.open(e.spec)
	in, ok := s.s.(transports.Interrupter)
	if !ok {
		e.t.Fatal("the descriptor says turns can be interrupted, but the session does not implement transports.Interrupter")
	}
	t1 := e.c.Turns[0]
	s.mustStart(t1)
	s.waitFor(1, "text from the slow action", isText)
	if err := e.call(s, "Interrupt", in.Interrupt); err != nil {
		e.t.Fatalf("Interrupt: %v", err)
	}
	evs := s.finish(1, nil)
	e.requireClosed(1, evs, messages.TurnInterrupted)

	t2 := e.c.Turns[1]
	evs = s.run(t2, nil)
	e.requireClosed(2, evs, messages.TurnCompleted)
	e.requireText(2, evs, t2.Actions[0].Text)
}

func checkCloseMidTurn(e *env) {
	s := e.open(e.spec)
	s.mustStart(e.c.Turns[0])
	s.waitFor(1, "text from the slow action", isText)
	s.close()
}

func checkResume(e *env) {
	if e.desc.Resume == messages.ResumeNone {
		e.t.Skip("the descriptor says sessions cannot be resumed")
	}
	first := e.open(e.spec)
	t1 := e.c.Turns[0]
	evs := first.run(t1, nil)
	e.requireClosed(1, evs, messages.TurnCompleted)
	ext := first.started().ExternalSessionID
	first.close()

	spec := e.spec
	spec.ResumeExternalID = ext
	second := e.open(spec)
	t2 := e.c.Turns[1]
	evs = second.run(t2, nil)
	e.requireClosed(2, evs, messages.TurnCompleted)
	e.requireText(2, evs, t2.Actions[0].Text)
	if got := second.started().ExternalSessionID; got != ext {
		e.t.Errorf("the resumed session reports ExternalSessionID %q: want the resumed %q", got, ext)
	}
}

func checkOutputCapped(e *env) {
	if !e.stream() {
		e.t.Skip("a per-turn backend reports no tool results")
	}
	s := e.open(e.spec)
	evs := s.run(e.c.Turns[0], allowAny)
	e.requireClosed(1, evs, messages.TurnCompleted)
	var cut *messages.Event
	for i := range evs {
		if evs[i].Type == messages.EvToolResult && evs[i].Truncated {
			cut = &evs[i]
		}
	}
	switch {
	case cut == nil:
		e.t.Errorf("no EvToolResult was Truncated, yet the agent caused a %d-byte output\nevents:\n%s", BigOutputBytes, s.rec.Transcript())
	case cut.OriginalBytes <= len(cut.Output):
		e.t.Errorf("a Truncated result of %d bytes says the original had %d: it was not cut", len(cut.Output), cut.OriginalBytes)
	}
}

func checkBinaryMissing(e *env) {
	var a messages.Availability
	e.call(nil, "Probe", func(ctx context.Context) error { a = e.tr.Probe(ctx); return nil })
	if a.Available {
		e.t.Errorf("Probe says a backend without its executable is available: %+v", a)
	} else if a.Reason == "" {
		e.t.Error("Probe says unavailable without a Reason")
	}
	s, err := e.tryOpen(e.spec)
	if err != nil {
		e.requireTyped("Open", err)
		return
	}
	e.expectDeath(s)
}

func checkImmediateExit(e *env) {
	s, err := e.tryOpen(e.spec)
	if err != nil {
		e.requireTyped("Open", err)
		return
	}
	e.expectDeath(s)
}

// expectDeath: the first turn is refused with a typed error, or the
// session reports a fatal EvError (closing the turn when one runs); either
// way, a later turn is refused with a typed error.
func (e *env) expectDeath(s *sess) {
	e.t.Helper()
	t1 := e.c.Turns[0]
	if err := s.start(t1.Number, t1.Input); err != nil {
		e.requireTyped("StartTurn", err)
		return
	}
	s.finish(t1.Number, allowAny)
	fatal := false
	for _, r := range s.rec.Records() {
		fatal = fatal || (r.Event.Type == messages.EvError && r.Event.Fatal)
	}
	if !fatal {
		e.t.Fatalf("the backend failed, yet no fatal EvError was reported\nevents:\n%s", s.rec.Transcript())
	}
	err := s.start(t1.Number+1, "a turn after the backend died")
	if err == nil {
		e.t.Fatalf("StartTurn after a fatal EvError succeeded: a dead session refuses turns")
	}
	e.requireTyped("StartTurn after a fatal EvError", err)
}

// checkNoise: a bad line on the backend's output is an EvError, and the
// turn is still closed (by the backend carrying on, or by a fatal error).
func checkNoise(e *env) {
	s := e.open(e.spec)
	t1 := e.c.Turns[0]
	s.mustStart(t1)
	evs := s.finish(t1.Number, allowAny)
	errs := 0
	for _, r := range s.rec.Records() {
		if r.Event.Type == messages.EvError {
			errs++
		}
	}
	if errs == 0 {
		e.t.Errorf("the %s was not reported as an EvError\nevents:\n%s", e.c.Fault, s.rec.Transcript())
	}
	if c := closingIn(evs); c != nil {
		e.t.Logf("turn 1 closed with %s", Brief(*c))
	}
}
