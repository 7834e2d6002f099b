package cluster

import (
	"strings"

	"github.com/anthdm/hollywood/actor"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/codesession/codesession/messages"
)

// typePrefix starts the TypeUrl of every envelope: the body is msgpack.
const typePrefix = "msgpack/"

// The type tags of the wire. A tag names a Go type of this package; a new
// version of a message gets a new tag, so an old node answers it with an
// error instead of misreading it.
const (
	tagCall  = typePrefix + "Call"
	tagReply = typePrefix + "Reply"
	tagFeed  = typePrefix + "Feed"
)

// Call asks another node to run an op against its runtime. ID correlates
// the reply and makes a resend idempotent: the callee runs each id once.
type Call struct {
	ID    string `msgpack:"id"`
	From  string `msgpack:"from"` // the calling node's id, for logs
	Op    string `msgpack:"op"`
	Scope string `msgpack:"scope"`
	// WaitMs bounds a blocking op (read-turn) on the callee.
	WaitMs int64  `msgpack:"waitMs,omitempty"`
	Body   []byte `msgpack:"body"` // the op's msgpack
}

// Reply answers a Call (or a message that could not be read, with an empty
// ID and Err set).
type Reply struct {
	ID   string          `msgpack:"id"`
	Node string          `msgpack:"node"`
	Body []byte          `msgpack:"body,omitempty"`
	Err  *messages.Error `msgpack:"err,omitempty"`
}

// Feed carries one live event of a session to the other nodes' feeds.
type Feed struct {
	Node      string                  `msgpack:"node"`
	SessionID string                  `msgpack:"sessionId"`
	Event     messages.PersistedEvent `msgpack:"event"`
}

// tagOf names v's wire type; ok is false for anything that may not cross.
func tagOf(v any) (string, bool) {
	switch v.(type) {
	case *Call:
		return tagCall, true
	case *Reply:
		return tagReply, true
	case *Feed:
		return tagFeed, true
	}
	return "", false
}

// encode is the one way a value becomes a wire message.
func encode(v any) (*anypb.Any, error) {
	tag, ok := tagOf(v)
	if !ok {
		return nil, messages.Errorf(messages.CodeInternal, "wire", "%T may not cross the wire", v)
	}
	body, err := messages.MarshalMsgpack(v)
	if err != nil {
		return nil, err
	}
	return &anypb.Any{TypeUrl: tag, Value: body}, nil
}

// decode reads an envelope; an unknown tag or a malformed body is an
// invalid error naming what was wrong.
func decode(a *anypb.Any) (any, error) {
	var v any
	switch a.GetTypeUrl() {
	case tagCall:
		v = new(Call)
	case tagReply:
		v = new(Reply)
	case tagFeed:
		v = new(Feed)
	default:
		tag := a.GetTypeUrl()
		if len(tag) > 64 {
			tag = tag[:64] + "..."
		}
		if !strings.HasPrefix(tag, typePrefix) {
			return nil, messages.Errorf(messages.CodeInvalid, "wire", "not a codesession envelope (type %q)", tag)
		}
		return nil, messages.Errorf(messages.CodeInvalid, "wire", "unknown type tag %q", tag)
	}
	if err := messages.UnmarshalMsgpack(a.GetValue(), v); err != nil {
		return nil, messages.Errorf(messages.CodeInvalid, "wire", "malformed %s body", a.GetTypeUrl())
	}
	return v, nil
}

// wire sends through hollywood. send is the only call to the engine's Send
// in this package: whatever reaches hollywood's serializer is an envelope
// encode made.
type wire struct {
	engine *actor.Engine
	gate   *dialGate
}

func (w wire) send(to *actor.PID, v any, from *actor.PID) error {
	if to == nil {
		return messages.Errorf(messages.CodeInternal, "wire", "no destination")
	}
	if to.Address != w.engine.Address() && !w.gate.allowed(to.Address) {
		return &messages.Error{Code: messages.CodeUnavailable, Op: "wire", Retryable: true,
			Message: to.Address + " is not known to answer over TLS yet"}
	}
	a, err := encode(v)
	if err != nil {
		return err
	}
	w.engine.SendWithSender(to, a, from)
	return nil
}
