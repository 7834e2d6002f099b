package codex

import (
	"encoding/json"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/cli"
)

// TurnEvent is one event a server message yields and the turn it belongs
// to (0: the session's, before or between turns).
type TurnEvent struct {
	Turn  int
	Event messages.Event
}

// Decoder turns the lines the app-server writes into the session's events
// with the session's own core and nothing else: no I/O, no clock, no
// process. It keeps what a stream of lines builds up (turn ids, items,
// command output, token totals, pending approvals), so a captured stream
// decodes as the session would have seen it. Not safe for concurrent use.
type Decoder struct{ c *core }

// NewDecoder is a decoder of a session in the default posture, with tool
// outputs cut at outputCap bytes (DefaultOutputCap when <= 0), and its
// turn 1 running.
func NewDecoder(outputCap int) *Decoder {
	if outputCap <= 0 {
		outputCap = DefaultOutputCap
	}
	d := &Decoder{c: newCore(coreConfig{outputCap: outputCap, posture: messages.PostureDefault})}
	d.c.beginTurn(1)
	return d
}

// BeginTurn opens turn n, as the session does before it sends turn/start.
func (d *Decoder) BeginTurn(n int) { d.c.beginTurn(n) }

// Decode decodes one line: an error for a line that is not a JSON-RPC
// message (the session reports it as an EvError and reads on); nothing for
// a response (its call consumes it); else the events of the notification
// or request. A request's answer (an auto-approval) is the session's to
// write and is not returned.
func (d *Decoder) Decode(line []byte) ([]TurnEvent, error) {
	m, err := parseMessage(line)
	if err != nil || m.Kind == kindResponse {
		return nil, err
	}
	fx := d.c.step(m)
	out := make([]TurnEvent, 0, len(fx.Events))
	for _, e := range fx.Events {
		out = append(out, TurnEvent{Turn: e.Turn, Event: e.Ev})
	}
	return out, nil
}

// Decode decodes one line on its own, in a fresh decoder's running turn 1.
func Decode(line []byte) ([]TurnEvent, error) { return NewDecoder(0).Decode(line) }

// step is the core's step for a server message that is not a response:
// turn/started and turn/completed name their turn first (a turn/completed
// racing turn/start's response must still find its turn), then the
// message is handled.
func (c *core) step(m message) cli.Effects {
	if m.Method == "turn/started" || m.Method == "turn/completed" {
		var x common
		_ = json.Unmarshal(m.Params, &x)
		if x.Turn != nil {
			c.turnStarted(x.Turn.ID)
		}
	}
	return c.handle(m)
}
