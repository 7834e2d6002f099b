package cluster

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/codesession/codesession/messages"
)

// dialGate keeps hollywood from ever dialling a peer over TLS that is not
// known to answer. In hollywood v1.0.5 a failed TLS dial crashes the
// process: stream_writer.init stores tls.Dial's typed-nil *tls.Conn in a
// net.Conn, so its `rawconn == nil` check passes and SetDeadline
// dereferences nil (the router restarts, and the writer it registered then
// panics on its nil stream with no recover). Any failed dial does it: a
// refused connection (a dead peer), a timeout, or a certificate the peer
// rejects. Plain TCP is not affected (net.Dial returns an untyped nil).
//
// So, under TLS, the wire sends to an address only after the gate's own
// TLS handshake with it succeeded, and forgets that as soon as hollywood
// reports the address unreachable (its writer lost the connection): the
// next send probes again first. A peer that dies between a probe and
// hollywood's dial is the window that remains; it is small (hollywood
// keeps one connection per peer and dials only when it has none).
type dialGate struct {
	tls *tls.Config // nil: no gate

	mu sync.Mutex
	ok map[string]bool
}

// probeTimeout bounds one probe handshake.
const probeTimeout = 5 * time.Second

// allowed reports whether hollywood may send to addr now.
func (g *dialGate) allowed(addr string) bool {
	if g.tls == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ok[addr]
}

// probe makes the handshake hollywood would and records the outcome.
func (g *dialGate) probe(ctx context.Context, addr string) error {
	if g.tls == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	d := tls.Dialer{Config: g.tls}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		err = rejectedAfterHandshake(c)
		c.Close()
	}
	g.mu.Lock()
	g.ok[addr] = err == nil
	g.mu.Unlock()
	if err != nil {
		return &messages.Error{Code: messages.CodeUnavailable, Op: "wire", Retryable: true, Err: err,
			Message: "cannot reach " + addr + " over TLS (it is down, or its certificate is not the cluster's)"}
	}
	return nil
}

// rejectedAfterHandshake catches a server that refuses our certificate:
// under TLS 1.3 the client's handshake completes before the server checks
// the client certificate, and the refusal arrives as an alert on the first
// read. A server that accepted us sends nothing (drpc waits for the
// client), so the short read times out.
func rejectedAfterHandshake(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var b [1]byte
	_, err := c.Read(b[:])
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return nil
	}
	if err == nil {
		return nil
	}
	return err
}

func (g *dialGate) forget(addr string) {
	if g.tls == nil {
		return
	}
	g.mu.Lock()
	delete(g.ok, addr)
	g.mu.Unlock()
}

// gateWatcher forwards hollywood's RemoteUnreachableEvent to the gate. It
// is the node's only event-stream subscriber and unsubscribes when it
// stops (a stopped subscriber makes hollywood loop dead letters forever).
type gateWatcher struct{ g *dialGate }

func (w *gateWatcher) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		c.Engine().Subscribe(c.PID())
	case actor.Stopped:
		c.Engine().Unsubscribe(c.PID())
	case actor.RemoteUnreachableEvent:
		w.g.forget(m.ListenAddr)
	}
}

// sendProbed sends v to pid, probing the address first when the gate does
// not know it (it may block for a handshake: never call it in Receive).
func (n *Node) sendProbed(ctx context.Context, to *actor.PID, v any) error {
	if to != nil && to.Address != n.engine.Address() && !n.wire.gate.allowed(to.Address) {
		if err := n.wire.gate.probe(ctx, to.Address); err != nil {
			return err
		}
	}
	return n.wire.send(to, v, n.self)
}
