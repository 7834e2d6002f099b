// Command tunrelay is the cluster tests' network with delay and loss: the
// kernel here has no netem (tc says "qdisc kind unknown"), so each node's
// cluster interface is a TUN device whose packets this process reads and
// writes into the destination node's TUN after a delay, dropping a
// fraction of them. It works on IPv4 packets, below TCP and UDP, as netem
// on every node's egress would: gossip (UDP and TCP) and the wire (TCP)
// meet the same delay, and the kernels' TCP retransmits what is lost.
//
// It is its own process, built and started by the test
// (cmd/codesession/cluster_relay_test.go), so that a loaded test process
// (its goroutines, its garbage collector) never delays the network: in the
// test's process the relay fell behind on a loaded machine and the nodes
// never verified each other. It raises its own scheduling priority (nice
// -10, when allowed) for the same reason: the network of a real machine
// is the kernel's, which does not queue behind user processes.
//
// Usage: the test passes the TUN devices of nodes 1..n (addresses
// 10.77.0.1..n) as file descriptors 3..3+n-1 and runs
//
//	tunrelay -nodes n -delay 300ms -loss 0.1
//
// It prints "ready" on stdout once it relays; when its stdin closes (the
// test is done, or died) it stops and prints its counts as one JSON object
// (Stats) on stdout.
//
// Concurrency: one reader goroutine per TUN, one writer goroutine per
// destination with a bounded FIFO queue (the delay is the same for every
// packet, so send order is arrival order); an overflow is a drop, counted
// apart from the random loss.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Stats is what the relay did, printed when it stops.
type Stats struct {
	Relayed  int64 `json:"relayed"`
	Dropped  int64 `json:"dropped"`  // at random (the loss)
	Overflow int64 `json:"overflow"` // by a full queue: the relay fell behind
	// MaxLateMs is the most a packet was handed over after its time (the
	// delay): how far the relay itself fell behind.
	MaxLateMs float64 `json:"maxLateMs"`
	// Late is how many packets were handed over more than 50 ms late.
	Late int64 `json:"late"`
}

// queueLen bounds the packets in flight to one node.
const queueLen = 8192

// lateAfter is how late a packet counts as late.
const lateAfter = 50 * time.Millisecond

type delayed struct {
	at  time.Time
	pkt []byte
}

type relay struct {
	delay time.Duration
	loss  float64
	tuns  []*os.File
	links []chan delayed
	pool  sync.Pool

	readers, writers                 sync.WaitGroup
	relayed, dropped, overflow, late atomic.Int64
	maxLate                          atomic.Int64 // nanoseconds
}

func main() {
	nodes := flag.Int("nodes", 0, "number of TUN devices, passed as fds 3..3+n-1")
	delay := flag.Duration("delay", 0, "one-way delay of every packet")
	loss := flag.Float64("loss", 0, "fraction of packets dropped at random")
	flag.Parse()
	if *nodes < 1 || *nodes > 250 || *loss < 0 || *loss >= 1 || *delay < 0 {
		fmt.Fprintln(os.Stderr, "tunrelay: want -nodes 1..250, -delay >= 0, -loss in [0, 1)")
		os.Exit(2)
	}
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, 0, -10); err != nil {
		fmt.Fprintln(os.Stderr, "tunrelay: cannot raise priority (runs at the default):", err)
	}
	r := &relay{delay: *delay, loss: *loss}
	r.pool.New = func() any { b := make([]byte, 65536); return &b }
	for i := range *nodes {
		fd := 3 + i
		// non-blocking, so reads go through Go's poller and a close ends them
		if err := syscall.SetNonblock(fd, true); err != nil {
			fmt.Fprintf(os.Stderr, "tunrelay: fd %d (node %d's TUN): %v\n", fd, i+1, err)
			os.Exit(2)
		}
		r.tuns = append(r.tuns, os.NewFile(uintptr(fd), fmt.Sprintf("tun%d", i+1)))
	}
	r.start()
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	r.stop()
	s := Stats{Relayed: r.relayed.Load(), Dropped: r.dropped.Load(), Overflow: r.overflow.Load(),
		MaxLateMs: float64(r.maxLate.Load()) / 1e6, Late: r.late.Load()}
	_ = json.NewEncoder(os.Stdout).Encode(s)
}

func (r *relay) start() {
	for range r.tuns {
		r.links = append(r.links, make(chan delayed, queueLen))
	}
	for i, f := range r.tuns {
		r.readers.Go(func() { r.read(f) })
		r.writers.Go(func() { r.write(f, r.links[i]) })
	}
}

func (r *relay) read(f *os.File) {
	for {
		bp := r.pool.Get().(*[]byte)
		buf := *bp
		n, err := f.Read(buf)
		if err != nil {
			r.pool.Put(bp)
			if errors.Is(err, os.ErrClosed) {
				return
			}
			continue
		}
		pkt := buf[:n]
		// IPv4 to 10.77.0.j only (the kernel's own IPv6 chatter is dropped)
		j := -1
		if n >= 20 && pkt[0]>>4 == 4 && pkt[16] == 10 && pkt[17] == 77 && pkt[18] == 0 {
			j = int(pkt[19]) - 1
		}
		if j < 0 || j >= len(r.links) {
			r.pool.Put(bp)
			continue
		}
		if rand.Float64() < r.loss {
			r.dropped.Add(1)
			r.pool.Put(bp)
			continue
		}
		select {
		case r.links[j] <- delayed{at: time.Now().Add(r.delay), pkt: pkt}:
			r.relayed.Add(1)
		default:
			r.overflow.Add(1)
			r.pool.Put(bp)
		}
	}
}

// write hands the link's packets over in order, each at its time.
func (r *relay) write(f *os.File, link <-chan delayed) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for d := range link {
		if wait := time.Until(d.at); wait > 0 {
			t.Reset(wait)
			<-t.C
		}
		if late := time.Since(d.at); late > 0 {
			if late > lateAfter {
				r.late.Add(1)
			}
			for {
				m := r.maxLate.Load()
				if int64(late) <= m || r.maxLate.CompareAndSwap(m, int64(late)) {
					break
				}
			}
		}
		_, err := f.Write(d.pkt)
		b := d.pkt[:cap(d.pkt)]
		r.pool.Put(&b)
		if errors.Is(err, os.ErrClosed) {
			// drain, so no reader blocks
			for range link {
			}
			return
		}
	}
}

// stop closes the TUNs and waits for the goroutines.
func (r *relay) stop() {
	for _, f := range r.tuns {
		_ = f.Close()
	}
	r.readers.Wait()
	for _, l := range r.links {
		close(l)
	}
	r.writers.Wait()
}
