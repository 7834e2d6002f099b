package transporttest_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
	"github.com/codesession/codesession/transports/transporttest"
)

// A test that cannot fail is a defect: TestSuiteCatchesMutants runs the
// suite (in a child process, since the runs must fail) against wrappers of
// the script backend that each break one rule, and checks that the suite
// fails each one, in the case it targets, with the expected complaint. The
// unbroken wrapper must pass every case.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const mutantsEnv = "TRANSPORTTEST_MUTANTS"

// mutant is a script backend broken in one way.
type mutant struct {
	name string
	// target is the case the mutant is run against ("" for every case).
	target string
	// want is what the suite must say about it.
	want string

	desc      func(*transports.Descriptor)
	sink      func(turn int, ev messages.Event, emit transports.Sink)
	answer    func(d messages.Decision, reason string) (messages.Decision, string)
	startTurn func(err error) error
	panics    bool // StartTurn panics
	noInt     bool // Interrupt does nothing
	noSteer   bool // Steer does nothing
	noPosture bool // SetPosture does nothing
	late      bool // the second Close emits an event
	leak      bool // Open leaves a goroutine behind
	newID     bool // Open ignores ResumeExternalID
}

var mutants = []mutant{
	{name: "unbroken"},
	{name: "double-turn-end", target: transporttest.CaseText, want: "turn 1 was already closed by",
		sink: func(turn int, ev messages.Event, emit transports.Sink) {
			emit(turn, ev)
			if ev.Type == messages.EvTurnEnd {
				emit(turn, ev)
			}
		}},
	{name: "no-started", target: transporttest.CaseText, want: "arrived before EvStarted",
		sink: func(turn int, ev messages.Event, emit transports.Sink) {
			if ev.Type != messages.EvStarted {
				emit(turn, ev)
			}
		}},
	{name: "no-external-id", target: transporttest.CaseText, want: "without the backend's ExternalSessionID",
		sink: func(turn int, ev messages.Event, emit transports.Sink) {
			ev.ExternalSessionID = ""
			emit(turn, ev)
		}},
	{name: "wrong-turn", target: transporttest.CaseText, want: "turn 2 was never started",
		sink: func(turn int, ev messages.Event, emit transports.Sink) {
			if ev.Type == messages.EvText {
				turn++
			}
			emit(turn, ev)
		}},
	{name: "no-turn-end", target: transporttest.CaseText, want: "turn 1 was not closed within",
		sink: func(turn int, ev messages.Event, emit transports.Sink) {
			if ev.Type != messages.EvTurnEnd {
				emit(turn, ev)
			}
		}},
	{name: "late-event", target: transporttest.CaseText, want: "arrived after Close returned", late: true},
	{name: "leak", target: transporttest.CaseText, want: "found unexpected goroutines", leak: true},
	{name: "panic", target: transporttest.CaseText, want: "StartTurn panicked", panics: true},
	{name: "abilities", target: transporttest.CaseText, want: "descriptor Live.Interrupt is false",
		desc: func(d *transports.Descriptor) { d.Live.Interrupt = false }},
	{name: "orphan-result", target: transporttest.CaseToolEdit, want: "which no earlier EvToolUse announced",
		sink: func(turn int, ev messages.Event, emit transports.Sink) {
			if ev.Type != messages.EvToolUse {
				emit(turn, ev)
			}
		}},
	{name: "allow-as-deny", target: transporttest.CaseClarifyAllow, want: "allowed.txt was not written in the workspace",
		answer: func(messages.Decision, string) (messages.Decision, string) { return messages.DecisionDeny, "no" }},
	{name: "deny-reason-dropped", target: transporttest.CaseClarifyDeny, want: "never reached the agent",
		answer: func(d messages.Decision, _ string) (messages.Decision, string) { return d, "" }},
	{name: "steer-dropped", target: transporttest.CaseSteer, want: "the steering", noSteer: true},
	{name: "posture-ignored", target: transporttest.CaseSetPosture, want: "a clarification this case does not expect", noPosture: true},
	{name: "interrupt-ignored", target: transporttest.CaseInterrupt, want: "turn 1 was not closed within", noInt: true},
	{name: "resume-new-id", target: transporttest.CaseResume, want: "want the resumed", newID: true},
	{name: "uncut-output", target: transporttest.CaseOutputCapped, want: "over the 16384-byte cap is not Truncated",
		sink: func(turn int, ev messages.Event, emit transports.Sink) {
			if ev.Type == messages.EvToolResult {
				ev.Output = strings.Repeat("x", ev.OriginalBytes+1)
				ev.Truncated, ev.OriginalBytes = false, 0
			}
			emit(turn, ev)
		}},
	{name: "fatal-at-turn-0", target: transporttest.CaseImmediateExit, want: "must carry that turn's number",
		sink: func(turn int, ev messages.Event, emit transports.Sink) {
			if ev.Type == messages.EvError {
				turn = 0
			}
			emit(turn, ev)
		}},
	{name: "untyped-error", target: transporttest.CaseImmediateExit, want: "want a *messages.Error",
		startTurn: func(err error) error {
			if err != nil {
				return errors.New(err.Error())
			}
			return nil
		}},
}

// TestMutants is the child: it runs the suite against every mutant. It
// only runs when TestSuiteCatchesMutants starts it.
func TestMutants(t *testing.T) {
	if os.Getenv(mutantsEnv) == "" {
		t.Skip("run by TestSuiteCatchesMutants in a child process")
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			transporttest.Run(t, transporttest.Harness{
				New: func(t *testing.T) transports.Transport {
					return &broken{inner: script.New(script.WithOutputCap(16 << 10)), m: &m}
				},
				Prepare: func(t *testing.T, c *transporttest.Case) transporttest.Setup {
					if m.target != "" && c.Name != m.target {
						t.Skip("not this mutant's target")
					}
					return prepareScript(t, c)
				},
				Timeout: 3 * time.Second,
			})
		})
	}
}

func TestSuiteCatchesMutants(t *testing.T) {
	if os.Getenv(mutantsEnv) != "" {
		t.Skip("in the child")
	}
	if testing.Short() {
		t.Skip("runs the suite in a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMutants$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), mutantsEnv+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the child should fail (some mutants are caught): err=%v\n%s", err, out)
	}
	output := string(out)
	for _, m := range mutants {
		block, failed := failureBlock(output, m.name)
		if m.want == "" {
			if failed {
				t.Errorf("the unbroken script backend failed the suite:\n%s", block)
			}
			continue
		}
		if !failed {
			t.Errorf("mutant %s passed the suite: %s is not checked", m.name, m.want)
			continue
		}
		if !strings.Contains(block, "--- FAIL: TestMutants/"+m.name+"/"+m.target+" ") {
			t.Errorf("mutant %s: want case %s to fail:\n%s", m.name, m.target, block)
		}
		if !strings.Contains(block, m.want) {
			t.Errorf("mutant %s: the failure does not say %q:\n%s", m.name, m.want, block)
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", output)
	}
}

// failureBlock returns the output of a failed TestMutants/<name>, up to
// the next mutant's, and whether it failed.
func failureBlock(output, name string) (string, bool) {
	head := "--- FAIL: TestMutants/" + name + " "
	i := strings.Index(output, head)
	if i < 0 {
		return "", false
	}
	rest := output[i+len(head):]
	if j := strings.Index(rest, "--- FAIL: TestMutants/"); j >= 0 {
		// skip the mutant's own cases, which are nested under it
		for j >= 0 && strings.HasPrefix(rest[j+len("--- FAIL: TestMutants/"):], name+"/") {
			k := strings.Index(rest[j+1:], "--- FAIL: TestMutants/")
			if k < 0 {
				j = -1
				break
			}
			j += 1 + k
		}
		if j >= 0 {
			rest = rest[:j]
		}
	}
	return head + rest, true
}

// broken wraps the script transport and breaks what its mutant says.
type broken struct {
	inner transports.Transport
	m     *mutant
}

var neverClosed = make(chan struct{})

func (b *broken) Descriptor() transports.Descriptor {
	d := b.inner.Descriptor()
	if b.m.desc != nil {
		b.m.desc(&d)
	}
	return d
}

func (b *broken) Probe(ctx context.Context) messages.Availability { return b.inner.Probe(ctx) }

func (b *broken) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	if b.m.newID {
		spec.ResumeExternalID = ""
	}
	if b.m.leak {
		go func() { <-neverClosed }()
	}
	wrapped := sink
	if f := b.m.sink; f != nil {
		wrapped = func(turn int, ev messages.Event) { f(turn, ev, sink) }
	}
	s, err := b.inner.Open(ctx, spec, wrapped)
	if err != nil {
		return nil, err
	}
	return &brokenSession{inner: s, m: b.m, sink: sink}, nil
}

type brokenSession struct {
	inner  transports.Session
	m      *mutant
	sink   transports.Sink
	closes int
}

func (s *brokenSession) StartTurn(ctx context.Context, turn int, input string) error {
	if s.m.panics {
		panic("mutant: StartTurn panics")
	}
	err := s.inner.StartTurn(ctx, turn, input)
	if s.m.startTurn != nil {
		return s.m.startTurn(err)
	}
	return err
}

func (s *brokenSession) Answer(ctx context.Context, id string, d messages.Decision, reason string) error {
	if s.m.answer != nil {
		d, reason = s.m.answer(d, reason)
	}
	return s.inner.Answer(ctx, id, d, reason)
}

func (s *brokenSession) Close(ctx context.Context) error {
	s.closes++
	err := s.inner.Close(ctx)
	if s.m.late && s.closes == 2 {
		s.sink(0, messages.Event{Type: messages.EvWarning, Text: "mutant: a late event"})
	}
	return err
}

func (s *brokenSession) Interrupt(ctx context.Context) error {
	if s.m.noInt {
		return nil
	}
	return s.inner.(transports.Interrupter).Interrupt(ctx)
}

func (s *brokenSession) Steer(ctx context.Context, text string) error {
	if s.m.noSteer {
		return nil
	}
	return s.inner.(transports.Steerer).Steer(ctx, text)
}

func (s *brokenSession) SetPosture(ctx context.Context, p messages.Posture) error {
	if s.m.noPosture {
		return nil
	}
	return s.inner.(transports.PostureSetter).SetPosture(ctx, p)
}

// prepareScript is the script backend's harness (as in
// transports/script/conformance_test.go): each case turn becomes a
// scenario turn matched by its input.
func prepareScript(t *testing.T, c *transporttest.Case) transporttest.Setup {
	var sc script.Scenario
	switch c.Fault {
	case transporttest.FaultNone:
		for _, tn := range c.Turns {
			steps := []script.Step{script.Thinking("Received: {{input}}")}
			for _, a := range tn.Actions {
				switch a.Kind {
				case transporttest.ActReply:
					steps = append(steps, script.Text(a.Text))
				case transporttest.ActWrite:
					s := script.Write(a.Path, a.Content)
					if a.Gated {
						s = s.Asking()
					}
					steps = append(steps, s)
				case transporttest.ActSlow:
					steps = append(steps, script.Text(a.Text), script.Delay(a.Duration))
				case transporttest.ActBigOutput:
					steps = append(steps, script.Tool("Read", nil, strings.Repeat("x", a.Bytes)))
				}
			}
			sc.Turns = append(sc.Turns, script.Turn{Match: tn.Input, Steps: steps})
		}
	case transporttest.FaultImmediateExit:
		sc.Turns = []script.Turn{{Steps: []script.Step{script.Crash("exited at once")}}}
	default:
		t.Skip("not applicable to the script backend")
	}
	data, err := json.Marshal(&sc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "scenario.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return transporttest.Setup{
		Spec:      transports.SessionSpec{Env: []string{script.EnvScenario + "=" + path}},
		OutputCap: 16 << 10,
	}
}
