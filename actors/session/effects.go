package session

import "github.com/codesession/codesession/messages"

// TransportCmd is a command the core asks the transport host to carry out on
// the backend session: TStartTurn, TAnswer, TInterrupt, TSteer, TSetModel or
// TSetPosture. The interface is sealed (its method is unexported), so the
// host's dispatch (runCommand) is a type switch over a closed set;
// effects_test.go checks that it handles every kind.
type TransportCmd interface{ transportCmd() }

// Transport commands.
type (
	// TStartTurn starts turn Turn with Input.
	TStartTurn struct {
		Turn  int
		Input string
	}
	// TAnswer answers a clarification.
	TAnswer struct {
		ClarificationID string
		Decision        messages.Decision
		Reason          string
	}
	// TInterrupt aborts the running turn.
	TInterrupt struct{}
	// TSteer adds Text to the running turn.
	TSteer struct{ Text string }
	// TSetModel switches the model and effort (either may be empty: kept).
	TSetModel struct {
		Model  string
		Effort messages.Effort
	}
	// TSetPosture changes the backend's posture live.
	TSetPosture struct{ Posture messages.Posture }
)

func (TStartTurn) transportCmd()  {}
func (TAnswer) transportCmd()     {}
func (TInterrupt) transportCmd()  {}
func (TSteer) transportCmd()      {}
func (TSetModel) transportCmd()   {}
func (TSetPosture) transportCmd() {}

// DiffCmd is a request the core makes of diff capture: DBaseline, DPrepare
// or DFinish. Sealed like TransportCmd. The core owns no baseline: what
// diff capture snapshots stays in the shell and its differ, which answer
// with BaselineReady, DiffReady or DiffLost.
type DiffCmd interface{ diffCmd() }

// Diff-capture requests.
type (
	// DBaseline asks diff capture to snapshot before turn Turn.
	DBaseline struct{ Turn int }
	// DPrepare tells diff capture a tool of turn Turn ran: it may diff
	// ahead (diffcapture.Preparer) so the turn's end waits less.
	DPrepare struct{ Turn int }
	// DFinish asks diff capture for turn Turn's diff; EditPaths are the
	// files the turn's edit tools wrote (the fallback when git cannot say).
	DFinish struct {
		Turn      int
		EditPaths []string
	}
)

func (DBaseline) diffCmd() {}
func (DPrepare) diffCmd()  {}
func (DFinish) diffCmd()   {}

// Reply is a read-turn answer for the reader holding Token.
type Reply struct {
	Token  uint64
	Result messages.TurnResult
	Err    error
}

// Output is what one step of the core asks the shell to carry out, in order:
// persist Events (they stay held in the core, see Unpersisted, until the
// store acknowledges them) and Meta, then send Transport and Diff commands,
// then deliver Replies. Durable lists the events the store has just
// acknowledged: only those may reach the live feed. Events and Durable are
// views of the core's held events, as Unpersisted is: the shell reads them
// and may append to them, never writes to their elements.
type Output struct {
	Events    []messages.PersistedEvent
	Meta      *messages.SessionRecord
	Transport []TransportCmd
	Diff      []DiffCmd
	Replies   []Reply
	Durable   []messages.PersistedEvent
	// Life are the steps of the session's end to carry out, in order.
	Life []LifeEffect
}

// merge appends more, a later drain's output, to o (its Diff aside: the
// caller carries those out itself); more's Meta, being newer, wins.
func (o *Output) merge(more Output) {
	o.Events = append(o.Events, more.Events...)
	if more.Meta != nil {
		o.Meta = more.Meta
	}
	o.Transport = append(o.Transport, more.Transport...)
	o.Replies = append(o.Replies, more.Replies...)
	o.Durable = append(o.Durable, more.Durable...)
	o.Life = append(o.Life, more.Life...)
}

// Empty reports an output that asks nothing of the shell.
func (o *Output) Empty() bool {
	return len(o.Events) == 0 && o.Meta == nil && len(o.Transport) == 0 && len(o.Diff) == 0 && len(o.Replies) == 0 &&
		len(o.Durable) == 0 && len(o.Life) == 0
}
