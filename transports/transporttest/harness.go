package transporttest

import (
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// DefaultTimeout bounds each wait of the suite (an event to arrive, a turn
// to close, a method to return) when Harness.Timeout is zero. It is
// generous on purpose: the suite never asserts that a backend is fast, only
// that it answers at all.
const DefaultTimeout = 60 * time.Second

// Harness is how a backend's tests plug into Run.
type Harness struct {
	// New returns the transport under test, configured as a session of the
	// runtime would use it. It is called once per case that does not get
	// its transport from Setup.Transport. Required.
	New func(t *testing.T) transports.Transport

	// Prepare arranges for the agent of a session opened with the returned
	// Setup to act out c: the turns of c.Turns, in order, each in answer to
	// its Input; and, for a bad case, the fault c.Fault. A scripted backend
	// writes a scenario; a CLI backend scripts its model server (modelmock)
	// and points the spec at it. c.Workspace is already set: a fresh empty
	// directory that must be the session's working directory; c.Posture is
	// the posture the session opens with. Prepare runs on the case's test
	// goroutine and may register t.Cleanup (it runs after the case's
	// sessions are closed). A case the backend cannot act out is skipped
	// with t.Skip and a reason. Required.
	Prepare func(t *testing.T, c *Case) Setup

	// Timeout replaces DefaultTimeout. It must stay well below LongSlow so
	// that an interrupted turn can be told from one that ended by itself.
	Timeout time.Duration

	// SkipLeakCheck turns off the per-case goroutine leak check (goleak,
	// ignoring goroutines that existed when the case began). Leave it off
	// unless the package runs other tests in parallel with Run.
	SkipLeakCheck bool
}

func (h Harness) timeout() time.Duration {
	if h.Timeout > 0 {
		return h.Timeout
	}
	return DefaultTimeout
}

// Setup is what Prepare hands back for one case.
type Setup struct {
	// Transport, when set, replaces Harness.New for this case: a bad case
	// needs a transport pointed at a missing binary or at a fake one.
	Transport transports.Transport

	// Spec opens every session of the case. Its Cwd must be c.Workspace or
	// empty, and its Posture c.Posture or empty (the suite fills both), and
	// it carries whatever makes the agent act out the case: Env
	// (CODESESSION_SCRIPT=<scenario>, ANTHROPIC_BASE_URL=<modelmock>), Home,
	// Model. The suite sets SessionID when it is empty, and
	// ResumeExternalID for the resumed session of the resume case.
	Spec transports.SessionSpec

	// AgentSaw reports whether the agent (for a CLI backend: its model) has
	// been shown text containing substr in this case so far, e.g. by
	// searching the requests the model server received. It is called from
	// the test goroutine after the turn that should have shown it closed.
	// When nil, the suite searches the session's own events instead (see
	// SawInEvents): right only for a backend whose agent runs in-process
	// and narrates what it is given, like the script backend.
	AgentSaw func(substr string) bool

	// OutputCap, when > 0, is the cap on tool outputs this session applies;
	// the recorder then checks every EvToolResult against it (see
	// Recorder.OutputCap).
	OutputCap int
}

// Case is one conformance scenario, described without reference to any
// backend: what the host sends, what the agent does in answer, and, for a
// bad case, how the backend misbehaves. Run builds the cases (see Cases);
// Prepare reads them.
type Case struct {
	// Name is the subtest name, one of the Case* constants.
	Name string
	// Doc says what the case checks.
	Doc string
	// Workspace is set by the suite before Prepare: a fresh empty
	// directory, the session's working directory. Action paths are
	// relative to it.
	Workspace string
	// Posture is the posture the session opens with.
	Posture messages.Posture
	// Turns are what the host sends and what the agent does in answer, in
	// order. Of the resume case, the first runs in the first session and
	// the second in the resumed one.
	Turns []Turn
	// Fault is how the backend misbehaves; FaultNone for every case but
	// the bad ones.
	Fault Fault
	// Resume is set on the resume case: the suite opens a second session
	// with ResumeExternalID set to the first session's id.
	Resume bool
}

// Turn is one turn of a case.
type Turn struct {
	// Number is the turn number the suite passes to StartTurn.
	Number int
	// Input is what the suite sends. It is unique across the suite, so a
	// harness may key the agent's behaviour on it.
	Input string
	// Actions are what the agent does in answer, in order.
	Actions []Action
}

// Action is one thing the agent does in a turn. Kind says which; only the
// fields named for that kind are set.
type Action struct {
	Kind ActionKind
	// Text: the reply of ActReply; the text ActSlow emits at once.
	Text string
	// Path and Content: ActWrite's file, relative to Case.Workspace.
	Path    string
	Content string
	// Gated (ActWrite): the call needs permission in the default posture,
	// so the backend raises an EvClarification for it unless the session's
	// posture lets it run (acceptEdits, full). A CLI agent's file-writing
	// tool is gated by nature; the script backend marks the step "ask".
	// Not gated: the call runs without asking in the case's posture.
	Gated bool
	// Duration (ActSlow): how long the turn keeps running after Text
	// before the next action (the model streams slowly, or waits).
	Duration time.Duration
	// Bytes (ActBigOutput): the size of the tool output the agent causes.
	Bytes int
}

// ActionKind says what an Action does. The zero value is invalid.
type ActionKind int

const (
	actInvalid ActionKind = iota
	// ActReply: the agent replies with Text.
	ActReply
	// ActWrite: the agent calls its file-writing tool (one named in the
	// descriptor's EditToolNames) to write Content to Path.
	ActWrite
	// ActSlow: the agent emits Text at once, then keeps the turn running
	// for Duration; an interrupt or Close cuts it short.
	ActSlow
	// ActBigOutput: the agent calls a tool it runs without asking in the
	// case's posture (a read of a big file the harness creates, a command)
	// whose output is Bytes long, more than the backend's output cap. The
	// harness sets the backend's cap below what reaches the transport when
	// the CLI cuts the output itself.
	ActBigOutput
)

func (k ActionKind) String() string {
	switch k {
	case ActReply:
		return "reply"
	case ActWrite:
		return "write"
	case ActSlow:
		return "slow"
	case ActBigOutput:
		return "big-output"
	}
	return "invalid"
}

// Valid reports whether k is one of the action kinds.
func (k ActionKind) Valid() bool { return k >= ActReply && k <= ActBigOutput }

// Fault is how a bad case's backend misbehaves. The zero value is invalid;
// healthy cases say FaultNone.
type Fault int

const (
	faultInvalid Fault = iota
	// FaultNone: the backend behaves.
	FaultNone
	// FaultBinaryMissing: the backend's executable does not exist (point
	// Setup.Transport at a path that is not there). Probe must say
	// unavailable, and Open or the first turn must fail with a
	// *messages.Error or a fatal EvError, without a panic.
	FaultBinaryMissing
	// FaultImmediateExit: the backend exits as soon as it starts (a fake
	// binary that exits, a scripted crash). The session must report a fatal
	// EvError (or Open fail with a *messages.Error), and refuse further
	// turns with a *messages.Error.
	FaultImmediateExit
	// FaultGarbageStdout: the backend's output holds a line that is not its
	// protocol (e.g. a wrapper that prints one before exec'ing the CLI).
	// The session must report an EvError and close the turn, without a
	// panic.
	FaultGarbageStdout
	// FaultLongLine: the backend's output holds a line longer than the
	// transport's line cap. As for garbage: an EvError, the turn closed,
	// no panic.
	FaultLongLine
)

func (f Fault) String() string {
	switch f {
	case FaultNone:
		return "none"
	case FaultBinaryMissing:
		return "binary-missing"
	case FaultImmediateExit:
		return "immediate-exit"
	case FaultGarbageStdout:
		return "garbage-stdout"
	case FaultLongLine:
		return "long-line"
	}
	return "invalid"
}

// Valid reports whether f is one of the faults (FaultNone included).
func (f Fault) Valid() bool { return f >= FaultNone && f <= FaultLongLine }
