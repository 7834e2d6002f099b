package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// tunRelay is the lab's cluster network when it needs delay and loss: the
// kernel here has no qdiscs (tc netem says "qdisc kind unknown"), so each
// node's cluster interface is a TUN device whose packets this process
// reads and writes into the destination node's TUN after delay, dropping
// a loss fraction of them. It works on IP packets, below TCP and UDP, as
// netem on every node's egress would: gossip (UDP and TCP) and the wire
// (TCP) meet the same delay, and the kernels' TCP retransmits what is lost.
type tunRelay struct {
	delay time.Duration
	loss  float64
	tuns  []*os.File // node i+1's TUN (10.77.0.i+1)
	links []chan delayed
	// readers and writers: the readers end first (their TUNs closed), so
	// no packet is sent on a closed link
	readers, writers sync.WaitGroup

	relayed, dropped, overflow atomic.Int64
}

type delayed struct {
	at  time.Time
	pkt []byte
}

// relayQueue bounds the packets in flight to one node; an overflow is a
// drop, counted apart from the random loss.
const relayQueue = 8192

// openTUN creates a TUN device named name in this process's namespace and
// returns its file (non-blocking, so reads go through Go's poller and a
// close ends them).
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// start relays between the TUNs until stop.
func (r *tunRelay) start() {
	for range r.tuns {
		r.links = append(r.links, make(chan delayed, relayQueue))
	}
	for i, f := range r.tuns {
		r.readers.Go(func() { r.read(f) })
		r.writers.Go(func() { r.write(f, r.links[i]) })
	}
}

func (r *tunRelay) read(f *os.File) {
	buf := make([]byte, 65536)
	for {
		n, err := f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			continue
		}
		pkt := buf[:n]
		// IPv4 to 10.77.0.j only (the kernel's own IPv6 chatter is dropped)
		if n < 20 || pkt[0]>>4 != 4 || pkt[16] != 10 || pkt[17] != 77 || pkt[18] != 0 {
			continue
		}
		j := int(pkt[19]) - 1
		if j < 0 || j >= len(r.links) {
			continue
		}
		if rand.Float64() < r.loss {
			r.dropped.Add(1)
			continue
		}
		select {
		case r.links[j] <- delayed{at: time.Now().Add(r.delay), pkt: append([]byte(nil), pkt...)}:
			r.relayed.Add(1)
		default:
			r.overflow.Add(1)
		}
	}
}

// write hands the link's packets over in order, each at its time (the
// delay is the same for all, so arrival order is send order).
func (r *tunRelay) write(f *os.File, link <-chan delayed) {
	for d := range link {
		time.Sleep(time.Until(d.at))
		if _, err := f.Write(d.pkt); errors.Is(err, os.ErrClosed) {
			return
		}
	}
}

// stop closes the TUNs and waits for the relay's goroutines.
func (r *tunRelay) stop() {
	for _, f := range r.tuns {
		_ = f.Close()
	}
	r.readers.Wait()
	for _, l := range r.links {
		close(l)
	}
	r.writers.Wait()
}

// newRelayLab is newNetnsLab whose cluster network is a tunRelay with the
// given delay and loss instead of a bridge.
func newRelayLab(t *testing.T, n int, delay time.Duration, loss float64) (*netnsLab, *tunRelay) {
	l := newLab(t)
	r := &tunRelay{delay: delay, loss: loss}
	t.Cleanup(r.stop) // runs before the namespaces go (cleanups run last first)
	for i := 1; i <= n; i++ {
		ns := l.addNode(i)
		name := fmt.Sprintf("t%d%s", i, l.tag)
		f, err := openTUN(name)
		require.NoError(t, err)
		r.tuns = append(r.tuns, f)
		// the device moves into the node's namespace; the file still
		// reads and writes it
		l.ip("link", "set", name, "netns", ns)
		l.ip("-n", ns, "addr", "add", fmt.Sprintf("10.77.0.%d/24", i), "dev", name)
		l.ip("-n", ns, "link", "set", name, "up")
	}
	r.start()
	return l, r
}
