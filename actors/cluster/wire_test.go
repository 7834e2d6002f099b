package cluster

import (
	"net"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/anthdm/hollywood/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/codesession/codesession/messages"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	for _, v := range []any{
		&Call{ID: "1", From: "a", Op: messages.OpStop, Scope: "s", WaitMs: 5, Body: []byte{1, 2}},
		&Reply{ID: "1", Node: "b", Err: messages.Errorf(messages.CodeNotFound, "stop", "gone")},
		&Feed{Node: "c", SessionID: messages.NewSessionID(), Event: messages.PersistedEvent{Seq: 3, Event: messages.Event{Type: messages.EvText, Text: "hi"}}},
	} {
		a, err := encode(v)
		require.NoError(t, err)
		assert.Regexp(t, `^msgpack/`, a.TypeUrl)
		back, err := decode(a)
		require.NoError(t, err)
		assert.Equal(t, v, back)
	}
	// nothing else may cross: not a string, not a proto, not a value copy
	for _, v := range []any{"text", wrapperspb.String("x"), Call{}} {
		_, err := encode(v)
		assert.Equal(t, messages.CodeInternal, messages.ErrorCode(err), "%T", v)
	}
}

func TestDecodeRejectsUnknownAndMalformed(t *testing.T) {
	_, err := decode(&anypb.Any{TypeUrl: "msgpack/Nope", Value: []byte{0x80}})
	require.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
	assert.Contains(t, err.Error(), `unknown type tag "msgpack/Nope"`)
	_, err = decode(&anypb.Any{TypeUrl: "type.googleapis.com/google.protobuf.StringValue"})
	assert.Contains(t, err.Error(), "not a codesession envelope")
	_, err = decode(&anypb.Any{TypeUrl: tagCall, Value: []byte{0xc1, 0xff, 0x00}})
	require.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
	assert.Contains(t, err.Error(), "malformed msgpack/Call body")
}

// FuzzDecode: any type tag and body decode to a value or a typed error,
// never a panic.
func FuzzDecode(f *testing.F) {
	good, _ := encode(&Call{ID: "x", Op: "stop", Body: []byte{0x80}})
	f.Add(good.TypeUrl, good.Value)
	f.Add(tagReply, []byte{0x81, 0xa2, 'i', 'd', 0xa1, '1'})
	f.Add(tagFeed, []byte{})
	f.Add("msgpack/Other", []byte{0xff})
	f.Fuzz(func(t *testing.T, tag string, body []byte) {
		v, err := decode(&anypb.Any{TypeUrl: tag, Value: body})
		if err != nil {
			if messages.ErrorCode(err) != messages.CodeInvalid {
				t.Fatalf("error of code %s", messages.ErrorCode(err))
			}
			return
		}
		if _, ok := tagOf(v); !ok {
			t.Fatalf("decoded a %T", v)
		}
	})
}

// collector gathers what arrives at a rogue engine's actor.
type collector struct{ got chan any }

func (c *collector) Receive(ctx *actor.Context) {
	switch m := ctx.Message().(type) {
	case actor.Initialized, actor.Started, actor.Stopped:
	default:
		c.got <- m
	}
}

// TestGarbageIsRejectedWithoutACrash: a rogue engine sends a node a
// non-envelope proto, an unknown tag and a malformed body; a raw TCP
// client writes junk at its wire port. Each message is answered with an
// invalid error, nobody crashes, and the cluster still routes ops.
func TestGarbageIsRejectedWithoutACrash(t *testing.T) {
	nodes, roots := threeNodes(t)
	a := nodes[0]
	ctx := ctxT(t)

	p := freePorts(t)
	r := remote.New(addr(p+1), remote.NewConfig().WithBufferSize(BufferSize))
	rogue, err := actor.NewEngine(actor.NewEngineConfig().WithRemote(r))
	require.NoError(t, err)
	t.Cleanup(func() { r.Stop().Wait() })
	col := &collector{got: make(chan any, 16)}
	me := rogue.Spawn(func() actor.Receiver { return col }, "rogue")
	target := actor.NewPID(a.Meta().Addr, actorKind+"/"+actorID)

	junk := []proto.Message{
		wrapperspb.String("not an envelope"),
		&anypb.Any{TypeUrl: "msgpack/Exploit", Value: []byte("x")},
		&anypb.Any{TypeUrl: tagCall, Value: []byte{0xc1, 0xc1, 0xc1}},
	}
	for _, m := range junk {
		rogue.SendWithSender(target, m, me)
		select {
		case got := <-col.got:
			env, ok := got.(*anypb.Any)
			require.True(t, ok, "the answer is an envelope, got %T", got)
			v, err := decode(env)
			require.NoError(t, err)
			rep, ok := v.(*Reply)
			require.True(t, ok)
			require.NotNil(t, rep.Err)
			assert.Equal(t, messages.CodeInvalid, rep.Err.Code, "%s", rep.Err)
			assert.Equal(t, "a", rep.Node)
		case <-ctx.Done():
			t.Fatalf("no answer to %T", m)
		}
	}

	// raw junk at the wire port: the connection is dropped, nothing else
	conn, err := net.DialTimeout("tcp", a.Meta().Addr, 10*time.Second)
	require.NoError(t, err)
	_, _ = conn.Write([]byte("GET / HTTP/1.1\r\n\r\n\x00\xff\xfe garbage garbage"))
	conn.Close()

	// the cluster still works, through the node that got the junk
	placed, err := a.Start(ctx, messages.Start{Brief: "still alive", Cwd: roots[2]}, "")
	require.NoError(t, err)
	assert.Equal(t, "c", placed.Node)
	var st messages.StopResult
	_, err = a.Do(ctx, placed.SessionID, messages.OpStop, messages.Stop{SessionID: placed.SessionID}, &st)
	require.NoError(t, err)
}
