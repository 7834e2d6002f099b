package transporttest

import (
	"fmt"
	"time"

	"github.com/codesession/codesession/messages"
)

// The cases' names, which are also their subtest names.
const (
	CaseText           = "text"
	CaseToolEdit       = "tool-edit"
	CaseClarifyAllow   = "clarify-allow"
	CaseClarifyDeny    = "clarify-deny"
	CaseGuidanceQueued = "guidance-queued"
	CaseSteer          = "steer"
	CaseSetPosture     = "set-posture"
	CaseInterrupt      = "interrupt"
	CaseCloseMidTurn   = "close-mid-turn"
	CaseResume         = "resume"
	CaseOutputCapped   = "output-capped"
	CaseBinaryMissing  = "binary-missing"
	CaseImmediateExit  = "immediate-exit"
	CaseGarbageStdout  = "garbage-stdout"
	CaseLongLine       = "long-line"
)

// LongSlow is the Duration of the slow action that the interrupt and
// close-mid-turn cases cut short: far longer than any Timeout, so a turn
// that closes before it did not end by itself.
const LongSlow = 10 * time.Minute

// ShortSlow is the Duration of the steer case's slow action: long enough
// for the suite to steer after the first text arrives, short enough to
// wait out.
const ShortSlow = 3 * time.Second

// BigOutputBytes is the size of the output-capped case's tool output.
const BigOutputBytes = 100_000

// The texts the suite looks for, exported so a backend's own tests can
// name them.
const (
	// DenyReason is the reason the clarify-deny case gives.
	DenyReason = "conformance: the suite denies writing denied.txt"
	// SteerText is the guidance the steer case sends.
	SteerText = "conformance steer: also mention the README"
)

// input is the suite's input for turn n of a case: unique across cases.
func input(name string, n int, what string) string {
	return fmt.Sprintf("[conformance %s turn %d] %s", name, n, what)
}

func reply(text string) Action { return Action{Kind: ActReply, Text: text} }

func write(path, content string, gated bool) Action {
	return Action{Kind: ActWrite, Path: path, Content: content, Gated: gated}
}

func slow(text string, d time.Duration) Action { return Action{Kind: ActSlow, Text: text, Duration: d} }

func turn(name string, n int, what string, actions ...Action) Turn {
	return Turn{Number: n, Input: input(name, n, what), Actions: actions}
}

// healthy builds a case without a fault.
func healthy(name, doc string, posture messages.Posture, turns ...Turn) Case {
	return Case{Name: name, Doc: doc, Posture: posture, Turns: turns, Fault: FaultNone}
}

// faulty builds a bad case: one turn that would reply if the backend worked.
func faulty(name, doc string, f Fault) Case {
	return Case{Name: name, Doc: doc, Posture: messages.PostureDefault, Fault: f,
		Turns: []Turn{turn(name, 1, "say hello", reply("Hello despite the fault."))}}
}

// Cases returns the suite's cases, in the order Run runs them, with
// Workspace empty. Each call returns fresh values.
func Cases() []Case {
	return []Case{
		healthy(CaseText, "EvStarted comes first with the backend's session id; a text turn delivers its text and closes completed; the descriptor's live controls match the session's abilities",
			messages.PostureDefault,
			turn(CaseText, 1, "say hello", reply("Hello from the conformance suite."))),
		healthy(CaseToolEdit, "a turn whose agent writes a file without asking: the file really appears, the call is an edit tool of the descriptor, its result follows it",
			messages.PostureAcceptEdits,
			turn(CaseToolEdit, 1, "write hello.txt",
				write("hello.txt", "hello, conformance\n", false), reply("I wrote hello.txt."))),
		healthy(CaseClarifyAllow, "a gated write raises a clarification before it runs; allow_once lets it run and the turn completes",
			messages.PostureDefault,
			turn(CaseClarifyAllow, 1, "write allowed.txt",
				write("allowed.txt", "allowed by the suite\n", true), reply("allowed.txt is written."))),
		healthy(CaseClarifyDeny, "a gated write that is denied does not run, the reason reaches the agent, and the turn goes on to complete",
			messages.PostureDefault,
			turn(CaseClarifyDeny, 1, "write denied.txt",
				write("denied.txt", "this must never be written\n", true), reply("I did not write denied.txt."))),
		healthy(CaseGuidanceQueued, "queued guidance is a second turn: numbered 2, started after turn 1 closed, seen by the agent, completed",
			messages.PostureDefault,
			turn(CaseGuidanceQueued, 1, "say hello", reply("Hello, first turn.")),
			turn(CaseGuidanceQueued, 2, "guidance: also say goodbye", reply("Goodbye, second turn."))),
		healthy(CaseSteer, "steering a running turn (Steerer) reaches the agent and the turn still completes",
			messages.PostureDefault,
			turn(CaseSteer, 1, "work slowly", slow("Working on it...", ShortSlow), reply("Done, and the steering is noted."))),
		healthy(CaseSetPosture, "SetPosture (PostureSetter) applies to the next turn: under acceptEdits a gated write runs without asking; back in default it asks again",
			messages.PostureDefault,
			turn(CaseSetPosture, 1, "write edits.txt", write("edits.txt", "written under acceptEdits\n", true), reply("edits.txt is written.")),
			turn(CaseSetPosture, 2, "write asked.txt", write("asked.txt", "written after asking\n", true), reply("asked.txt is written."))),
		healthy(CaseInterrupt, "Interrupt (Interrupter) ends a slow turn with EvTurnEnd{State: interrupted} well before it would end by itself; the next turn works",
			messages.PostureDefault,
			turn(CaseInterrupt, 1, "work for ten minutes", slow("Starting a long job...", LongSlow), reply("The long job is done.")),
			turn(CaseInterrupt, 2, "say hello after the interrupt", reply("Hello after the interrupt."))),
		healthy(CaseCloseMidTurn, "Close in the middle of a slow turn returns nil within the bound, a second Close returns nil, and no event arrives after it",
			messages.PostureDefault,
			turn(CaseCloseMidTurn, 1, "work for ten minutes", slow("Starting a long job...", LongSlow), reply("The long job is done."))),
		{Name: CaseResume, Doc: "Open with ResumeExternalID of a closed session resumes it: the same backend session id, and a turn completes",
			Posture: messages.PostureDefault, Fault: FaultNone, Resume: true,
			Turns: []Turn{
				turn(CaseResume, 1, "say hello before closing", reply("Hello before the resume.")),
				turn(CaseResume, 2, "say hello after resuming", reply("Hello after the resume.")),
			}},
		healthy(CaseOutputCapped, "a tool output over the backend's cap arrives Truncated, with OriginalBytes, and shorter than the original",
			messages.PostureAcceptEdits,
			turn(CaseOutputCapped, 1, "read the big output",
				Action{Kind: ActBigOutput, Bytes: BigOutputBytes}, reply("That output was long."))),
		faulty(CaseBinaryMissing, "a missing executable: Probe says unavailable; Open or the first turn fails with a typed error or a fatal EvError; no panic", FaultBinaryMissing),
		faulty(CaseImmediateExit, "a backend that exits at once: a fatal EvError (or a typed Open error), then further turns are refused with a typed error", FaultImmediateExit),
		faulty(CaseGarbageStdout, "a line that is not the protocol: an EvError, the turn still closed, no panic", FaultGarbageStdout),
		faulty(CaseLongLine, "a line over the transport's line cap: an EvError, the turn still closed, no panic", FaultLongLine),
	}
}
