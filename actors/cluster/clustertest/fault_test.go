package clustertest

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// freeAddr is a 127.0.0.1 port free for TCP and UDP both.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		l.Close()
		if u, err := net.ListenPacket("udp", addr); err == nil {
			u.Close()
			return addr
		}
	}
	t.Fatal("no free port on 127.0.0.1")
	return ""
}

// Shutdown returns while packets and streams keep arriving that nobody
// reads (memberlist stops reading once it shuts its transport down): the
// listeners that hand them over must not be left blocked. On the forwarders
// stopped before NetTransport's Shutdown, it waits for ever here.
func TestShutdownReturnsWhileTrafficArrives(t *testing.T) {
	defer goleak.VerifyNone(t)
	ft, err := NewFaultTransport(freeAddr(t))
	require.NoError(t, err)
	addr := ft.NetTransport.GetAutoBindPort()
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(addr))

	stop := make(chan struct{})
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		u, err := net.Dial("udp", target)
		if err != nil {
			return
		}
		defer u.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = u.Write([]byte("gossip"))
			if i%50 == 0 {
				if c, err := net.DialTimeout("tcp", target, time.Second); err == nil {
					c.Close()
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	// a packet or a stream is in hand in a listener, waiting for a reader
	time.Sleep(200 * time.Millisecond)

	shut := make(chan error, 1)
	go func() { shut <- ft.Shutdown() }()
	select {
	case err := <-shut:
		assert.NoError(t, err)
	case <-time.After(time.Minute): // only stops a hang
		t.Fatal("Shutdown did not return: a listener is blocked handing over what arrived")
	}
	close(stop)
	<-flooded
}

// A cut node gets nothing and sends nothing; a healed one both.
func TestCutDropsPacketsBothWays(t *testing.T) {
	a, err := NewFaultTransport(freeAddr(t))
	require.NoError(t, err)
	defer a.Shutdown()
	b, err := NewFaultTransport(freeAddr(t))
	require.NoError(t, err)
	defer b.Shutdown()
	bAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.GetAutoBindPort()))

	got := func() bool {
		select {
		case p := <-b.PacketCh():
			return string(p.Buf) == "hello"
		case <-time.After(300 * time.Millisecond): // a dropped packet never comes: this only ends the look
			return false
		}
	}
	a.Cut.Store(true)
	_, err = a.WriteTo([]byte("hello"), bAddr)
	require.NoError(t, err)
	assert.False(t, got(), "a cut node's packet arrived")

	a.Cut.Store(false)
	b.Cut.Store(true)
	_, err = a.WriteTo([]byte("hello"), bAddr)
	require.NoError(t, err)
	assert.False(t, got(), "a packet reached a cut node")

	b.Cut.Store(false)
	require.Eventually(t, func() bool {
		_, _ = a.WriteTo([]byte("hello"), bAddr)
		return got()
	}, time.Minute, time.Millisecond, "healed: the packet arrives")
}
