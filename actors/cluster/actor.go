package cluster

import (
	"context"

	"github.com/anthdm/hollywood/actor"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/codesession/codesession/messages"
)

// nodeActor is the node's one actor on the wire. It never blocks: a call
// runs in a goroutine that sends the reply itself.
type nodeActor struct{ n *Node }

func (a *nodeActor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Initialized, actor.Started, actor.Stopped:
	case *anypb.Any:
		v, err := decode(m)
		if err != nil {
			a.reject(c.Sender(), err)
			return
		}
		switch v := v.(type) {
		case *Call:
			a.n.serveCall(v, c.Sender())
		case *Reply:
			a.n.deliver(v)
		case *Feed:
			a.n.feed(v)
		}
	default:
		a.reject(c.Sender(), messages.Errorf(messages.CodeInvalid, "wire", "not a codesession envelope (%T)", m))
	}
}

// reject logs a message that could not be read and answers its sender, if
// it named one, with the error. A reply is never answered, so two nodes
// cannot bounce errors forever.
func (a *nodeActor) reject(sender *actor.PID, err error) {
	from := ""
	if sender != nil {
		from = sender.String()
	}
	a.n.log.Warn("cluster: rejected a wire message", "from", from, "err", err)
	if sender != nil {
		r := &Reply{Node: a.n.cfg.NodeID, Err: messages.AsError("wire", err)}
		go func() { // a probe may block; Receive must not
			ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
			defer cancel()
			_ = a.n.sendProbed(ctx, sender, r)
		}()
	}
}
