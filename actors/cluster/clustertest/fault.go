// Package clustertest is what the cluster's tests and its benchmark share
// to put faults on a node's gossip: memberlist's own transport with
// switches that cut, delay and thin it while the node runs.
package clustertest

import (
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// FaultTransport is memberlist's NetTransport with faults set while it
// runs: Cut drops every packet and stream to and from the node (a
// partition of its gossip); Delay holds each packet the node sends (and
// each stream it dials) that long; LossPermille of its packets are
// dropped, as netem on its egress would. Set it as the node's
// memberlist transport.
type FaultTransport struct {
	*memberlist.NetTransport
	Cut          atomic.Bool
	Delay        atomic.Int64 // nanoseconds
	LossPermille atomic.Int64

	packets chan *memberlist.Packet
	streams chan net.Conn
	// closing is closed when Shutdown starts: what still comes in is
	// dropped, so NetTransport's listeners, which hand each packet and
	// stream over on an unbuffered channel, never block and its Shutdown
	// (which waits for them) returns. done is closed once it has.
	closing chan struct{}
	done    chan struct{}
}

// NewFaultTransport binds memberlist's NetTransport to addr (host:port)
// with no fault set.
func NewFaultTransport(addr string) (*FaultTransport, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return nil, err
	}
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{host}, BindPort: port,
		Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		return nil, err
	}
	ft := &FaultTransport{NetTransport: nt, packets: make(chan *memberlist.Packet), streams: make(chan net.Conn),
		closing: make(chan struct{}), done: make(chan struct{})}
	go ft.forwardPackets()
	go ft.forwardStreams()
	return ft, nil
}

// forwardPackets hands the listener's packets on, dropping them while cut
// and once Shutdown has started; it drains the listener until Shutdown
// ends.
func (ft *FaultTransport) forwardPackets() {
	for {
		select {
		case p := <-ft.NetTransport.PacketCh():
			if ft.Cut.Load() {
				continue
			}
			select {
			case ft.packets <- p:
			case <-ft.closing:
			}
		case <-ft.done:
			return
		}
	}
}

// forwardStreams is forwardPackets for incoming streams (closed when
// dropped).
func (ft *FaultTransport) forwardStreams() {
	for {
		select {
		case c := <-ft.NetTransport.StreamCh():
			if ft.Cut.Load() {
				c.Close()
				continue
			}
			select {
			case ft.streams <- c:
			case <-ft.closing:
				c.Close()
			}
		case <-ft.done:
			return
		}
	}
}

// PacketCh is the packets that get through.
func (ft *FaultTransport) PacketCh() <-chan *memberlist.Packet { return ft.packets }

// StreamCh is the streams that get through.
func (ft *FaultTransport) StreamCh() <-chan net.Conn { return ft.streams }

// WriteTo sends b unless cut or lost, after the delay if one is set.
func (ft *FaultTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	now := time.Now()
	switch {
	case ft.Cut.Load():
		return now, nil
	case ft.LossPermille.Load() > 0 && rand.Int64N(1000) < ft.LossPermille.Load():
		return now, nil
	}
	if d := time.Duration(ft.Delay.Load()); d > 0 {
		cp := append([]byte(nil), b...)
		time.AfterFunc(d, func() { _, _ = ft.NetTransport.WriteTo(cp, addr) })
		return now, nil
	}
	return ft.NetTransport.WriteTo(b, addr)
}

// WriteToAddress is WriteTo.
func (ft *FaultTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return ft.WriteTo(b, a.Addr)
}

// DialTimeout fails while cut, and waits out the delay first.
func (ft *FaultTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if ft.Cut.Load() {
		return nil, fmt.Errorf("clustertest: %s is cut off", addr)
	}
	if d := time.Duration(ft.Delay.Load()); d > 0 {
		time.Sleep(d)
	}
	return ft.NetTransport.DialTimeout(addr, timeout)
}

// DialAddressTimeout is DialTimeout.
func (ft *FaultTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return ft.DialTimeout(a.Addr, timeout)
}

// Shutdown stops the listeners and the forwarding. The forwarders keep
// draining the listeners until NetTransport's Shutdown has returned:
// stopped first, they left a listener blocked handing over a packet that
// arrived meanwhile, and that Shutdown waiting on it for ever.
func (ft *FaultTransport) Shutdown() error {
	close(ft.closing)
	err := ft.NetTransport.Shutdown()
	close(ft.done)
	return err
}
