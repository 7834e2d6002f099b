// Package transporttest is the conformance suite every backend
// (transports.Transport) passes, in the manner of testing/slogtest: the
// contract of transports and messages, held by one set of tests that each
// backend runs from its own package.
//
// It owns the neutral description of what a backend must be able to do
// (Case, Turn, Action, Fault; Cases lists them), the checks (Run), and the
// event-stream invariants every session keeps (Recorder).
//
// # How a backend plugs in
//
// A backend cannot be told what to do the same way everywhere: the script
// backend replays a scenario, a CLI backend does what its model says, and
// its model is a scripted server (transports/modelmock). So the suite
// describes each case without naming a backend: "turn 1, input X: the
// agent writes hello.txt without asking, then replies Y". The backend's
// Harness.Prepare turns that description into a Setup: the SessionSpec
// (working directory, Env such as CODESESSION_SCRIPT=<scenario file> or
// ANTHROPIC_BASE_URL=<modelmock URL>, Home, posture) under which the agent
// will act it out, and optionally its own transport (for the bad cases:
// a missing or a fake binary) and an AgentSaw hook that says what the agent
// was shown (the requests the model server received):
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, transporttest.Harness{
//			New: func(t *testing.T) transports.Transport { return mybackend.New() },
//			Prepare: func(t *testing.T, c *transporttest.Case) transporttest.Setup {
//				if c.Fault != transporttest.FaultNone {
//					t.Skip("not applicable: ...")
//				}
//				mock, err := modelmock.Start(t, scenarioFor(c)) // one rule per Turn.Input
//				if err != nil {
//					t.Fatal(err)
//				}
//				return transporttest.Setup{
//					Spec:     transports.SessionSpec{Env: []string{"ANTHROPIC_BASE_URL=" + mock.URL()}, Home: t.TempDir()},
//					AgentSaw: mock.Saw,
//				}
//			},
//		})
//	}
//
// A harness translates the actions generically (ActReply, ActWrite with
// Gated, ActSlow, ActBigOutput) and switches on Fault for the bad cases;
// it need not know the cases by name. What it cannot act out it skips with
// t.Skip and a reason; the suite itself skips what the descriptor does not
// claim (steer, set-posture, interrupt, resume).
//
// # The cases
//
// "descriptor" (valid enums, EditToolNames, a static descriptor, Probe
// available with a Version), then text, tool-edit, clarify-allow,
// clarify-deny, guidance-queued, steer, set-posture, interrupt,
// close-mid-turn, resume, output-capped, and the bad cases binary-missing,
// immediate-exit, garbage-stdout and long-line; each Case's Doc says what
// it checks. Every session's events go through a Recorder, whose
// invariants (EvStarted first with the backend's id; every event carries
// its turn; each turn closed by exactly one EvTurnEnd, EvEnded or fatal
// EvError; tool results after their tool uses; cut outputs Truncated with
// OriginalBytes; nothing after Close returned) are checked in every case.
// Every session is closed twice at the end of its case; both Closes must
// return nil.
//
// # Time
//
// Each wait (an event, a turn's close, a method's return) is bounded by
// Harness.Timeout, DefaultTimeout by default: generous, for a CLI under
// -race on a loaded machine, and still finite. No check asserts speed: a
// method whose context expired gets as long again before the case fails,
// and "promptly" only means well before the slow action (LongSlow, ten
// minutes) would have ended by itself. The steer case waits out ShortSlow.
//
// # Concurrency
//
// Run runs its cases one at a time, each on its own subtest goroutine. The
// suite calls a session's methods one at a time from that goroutine (each
// on a helper goroutine it waits for, so a method that hangs or panics
// fails the case instead of the test binary), never from the Sink. The
// Recorder is safe for concurrent use and its Sink never blocks for long.
// Prepare, New and the Setup hooks are called from the case's goroutine.
// Each case checks for leaked goroutines with goleak once its sessions are
// closed and the harness's cleanups ran (Harness.SkipLeakCheck turns that
// off for a package that runs other tests in parallel). The suite is
// meant for go test -race.
//
// # Testing facilities
//
// Recorder (with Records, Turn, Wait, Check and Transcript), Brief,
// Closes and SawInEvents are usable from a backend's own tests. The
// package's tests check each invariant of the Recorder on made-up streams,
// and run the suite against deliberately broken wrappers of the script
// backend in a child process, to show that each check can fail.
package transporttest
