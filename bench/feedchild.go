package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codesession/codesession/actors/controlplane"
)

// The feed's subscribers run, by default, in a child process: the same
// executable re-run with FeedChildEnv set, which FeedChildMain (called
// first thing by cmd/codesession's main and by this package's TestMain)
// turns into the subscribers. In the bench's own process they would be
// goroutines woken by netpoll, run only after the ~1,000 stream goroutines
// the fan-out woke directly: their reads would queue behind the server's
// writes in one scheduler, which real subscribers (other processes) do not.
//
// The protocol is gob both ways over the child's stdin and stdout:
//
//	parent -> child: childConfig, then the commands "published" and "stop"
//	child -> parent: "ready" once every subscriber is live (or "error"),
//	                 "fast" when the fast subscribers are done (or stalled),
//	                 "slow" when the slow ones are, then "report" with each
//	                 subscriber's account, and "alive" every half second
//	                 throughout, so that a silent child is found hung
//
// The child exits when its stdin ends (the parent is gone), and the parent
// kills it on every path out of the run.

// FeedChildEnv, set to "1", makes FeedChildMain serve the feed bench's
// subscribers on stdin and stdout and exit.
const FeedChildEnv = "CODESESSION_BENCH_FEED_CHILD"

// feedChildExitAfterEnv (tests only) makes the child exit abruptly with
// status 3 once its subscribers have read that many events in all: a
// child that dies mid-run.
const feedChildExitAfterEnv = "CODESESSION_BENCH_FEED_CHILD_EXIT_AFTER"

// childSilence is how long the parent waits for any word from the child
// before it calls it hung: the child says "alive" every half second, so
// this only stops a hang.
const childSilence = 60 * time.Second

// feedConnectBound is how long the subscribers may take to be live, and
// childPhaseBound how long the parent waits for any one phase of the
// child's (the child's own waits end long before): both only stop a hang.
const (
	feedConnectBound = 3 * time.Minute
	childPhaseBound  = 15 * time.Minute
)

// feedChildHangEnv (tests only) makes the child fall silent once its
// subscribers are live: no heartbeat, no answer.
const feedChildHangEnv = "CODESESSION_BENCH_FEED_CHILD_HANG"

// FeedChildMain returns at once unless FeedChildEnv is "1"; then this
// process is the feed bench's subscribers: it serves them and exits. Any
// program that runs the feed suite must call it first thing (main, or a
// test binary's TestMain): the suite re-runs the program's own executable.
func FeedChildMain() {
	if os.Getenv(FeedChildEnv) != "1" {
		return
	}
	os.Exit(serveFeedChild(os.Stdin, os.Stdout, os.Stderr))
}

// childConfig is what the parent tells the child.
type childConfig struct {
	FastURL, SlowURL, Token string
	Fast, Slow              int
	Sids                    []string
	Events                  int
	Rate                    float64
}

// parentMsg is a command to the child.
type parentMsg struct{ Cmd string }

// childMsg is what the child says.
type childMsg struct {
	Kind   string // ready, error, fast, slow, report, alive
	N      int64  // fast: the deliveries to fast subscribers
	Err    string
	Report []subReport
}

// subReport is one subscriber's account, what the parent's checks need.
type subReport struct {
	Slow, Dropped, Ended bool
	Received, Finals     int64
	Reason, Err          string
	Disorder             []string
	ReadAt               []int64 // by the event's place in the publishing order, unix ns; nil for a slow one
}

// subscriberSet is the feed's subscribers, wherever they run.
type subscriberSet interface {
	// start connects every subscriber and returns once all are live.
	start(ctx context.Context, fastURL, slowURL string) error
	// awaitFast returns once the fast subscribers have every event, or
	// their streams ended, or nothing moved for 10 s: the deliveries to
	// them so far.
	awaitFast(ctx context.Context) (int64, error)
	// awaitSlow lets the slow subscribers read, through a window as wide
	// as anyone's, and returns once they are done (or stalled 5 s).
	awaitSlow(ctx context.Context) error
	// finish ends every stream and returns the subscribers' accounts.
	finish(ctx context.Context) ([]*subscriber, error)
	// close ends whatever is left (idempotent; on every path).
	close()
	where() string
}

// localSubs is the subscribers as goroutines of this process: the
// in-process mode, and the child's own.
type localSubs struct {
	f       *feedRun
	token   string
	latency bool // account latency as events are read (pubAt is here)

	subs     []*subscriber
	progress atomic.Int64
	wg       sync.WaitGroup
	cancel   context.CancelFunc
	slowGo   chan struct{}

	slowMu    sync.Mutex
	slowConns []*net.TCPConn

	fastClient, slowClient *http.Client
	closeOnce              sync.Once
}

func newLocalSubs(f *feedRun, token string, latency bool) *localSubs {
	l := &localSubs{f: f, token: token, latency: latency, slowGo: make(chan struct{}), cancel: func() {}}
	l.fastClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}}
	l.slowClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(slowClientRecvBuf)
				l.slowMu.Lock()
				l.slowConns = append(l.slowConns, tc)
				l.slowMu.Unlock()
			}
			return c, err
		}}}
	return l
}

func (l *localSubs) where() string { return "in this process" }

func (l *localSubs) start(ctx context.Context, fastURL, slowURL string) error {
	f := l.f
	sctx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	n := f.o.Subscribers + f.o.SlowSubscribers
	l.subs = make([]*subscriber, n)
	var ready sync.WaitGroup
	ready.Add(n)
	connErrs := &failures{}
	for i := range n {
		s := &subscriber{slow: i >= f.o.Subscribers, next: make([]uint64, len(f.sids)), progress: &l.progress}
		if !s.slow {
			if l.latency {
				s.lat = make([]time.Duration, 0, f.published)
			}
			s.readAt = make([]int64, f.perSess*len(f.sids))
		}
		l.subs[i] = s
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			var once sync.Once
			markReady := func() { once.Do(ready.Done) }
			defer markReady()
			client, base := l.fastClient, fastURL
			if s.slow {
				client, base = l.slowClient, slowURL
			}
			req, _ := http.NewRequestWithContext(sctx, http.MethodGet, base+"/api/events?topics="+controlplane.TopicEvent, nil)
			req.Header.Set("Authorization", "Bearer "+l.token)
			resp, err := client.Do(req)
			if err != nil {
				connErrs.add("subscriber %d: %v", i, err)
				s.ended.Store(true)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				connErrs.add("subscriber %d: HTTP %d", i, resp.StatusCode)
				s.ended.Store(true)
				return
			}
			if !s.slow {
				f.consume(resp.Body, s, markReady)
				return
			}
			// slow: wait for the stream to be live, then stop reading
			// until the publishing is over
			r := bufio.NewReaderSize(resp.Body, 512)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					s.ended.Store(true)
					return
				}
				if strings.HasPrefix(line, "retry:") {
					break
				}
			}
			markReady()
			select {
			case <-l.slowGo:
			case <-sctx.Done():
				return
			}
			f.consume(r, s, func() {})
		}()
	}
	live := make(chan struct{})
	go func() {
		ready.Wait()
		close(live)
	}()
	select {
	case <-live:
	case <-time.After(feedConnectBound): // only stops a hang
		l.close()
		return fmt.Errorf("subscribers: not all %d live after %s", n, feedConnectBound)
	}
	if connErrs.n > 0 {
		l.close()
		return fmt.Errorf("subscribers could not connect: %s", strings.Join(connErrs.first, "; "))
	}
	return nil
}

func (l *localSubs) awaitFast(ctx context.Context) (int64, error) {
	f := l.f
	want := int64(f.o.Subscribers * f.published)
	last, lastAt := l.progress.Load(), time.Now()
	for {
		cur := l.progress.Load()
		if cur >= want || f.settled(l.subs[:f.o.Subscribers]) {
			return cur, nil
		}
		if cur != last {
			last, lastAt = cur, time.Now()
		} else if time.Since(lastAt) > 10*time.Second {
			return cur, nil // nothing moves: whatever is missing is lost
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return cur, ctx.Err()
		}
	}
}

func (l *localSubs) awaitSlow(ctx context.Context) error {
	f := l.f
	l.slowMu.Lock()
	for _, c := range l.slowConns {
		_ = c.SetReadBuffer(4 << 20)
	}
	l.slowMu.Unlock()
	close(l.slowGo)
	slowWant := l.progress.Load() + int64(f.o.SlowSubscribers*f.published)
	last, lastAt := l.progress.Load(), time.Now()
	for !f.settled(l.subs[f.o.Subscribers:]) && l.progress.Load() < slowWant {
		if cur := l.progress.Load(); cur != last {
			last, lastAt = cur, time.Now()
		} else if time.Since(lastAt) > 5*time.Second {
			break
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (l *localSubs) finish(context.Context) ([]*subscriber, error) {
	l.close()
	return l.subs, nil
}

func (l *localSubs) close() {
	l.closeOnce.Do(func() {
		l.cancel()
		l.wg.Wait()
		l.fastClient.CloseIdleConnections()
		l.slowClient.CloseIdleConnections()
	})
}

// report is the subscribers' accounts for the parent.
func (l *localSubs) report() []subReport {
	out := make([]subReport, len(l.subs))
	for i, s := range l.subs {
		r := subReport{Slow: s.slow, Dropped: s.dropped.Load(), Ended: s.ended.Load(), Received: s.received.Load(),
			Finals: s.finals.Load(), Reason: s.reason, Disorder: s.disorder, ReadAt: s.readAt}
		if s.err != nil {
			r.Err = s.err.Error()
		}
		out[i] = r
	}
	return out
}

// serveFeedChild is the child's side: it returns the process's exit code.
func serveFeedChild(in io.Reader, out, errw io.Writer) int {
	dec := gob.NewDecoder(in)
	var cfg childConfig
	if err := dec.Decode(&cfg); err != nil {
		fmt.Fprintf(errw, "feed child: reading the configuration: %v\n", err)
		return 2
	}
	var encMu sync.Mutex
	enc := gob.NewEncoder(out)
	send := func(m childMsg) error {
		encMu.Lock()
		defer encMu.Unlock()
		return enc.Encode(m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// the parent's commands; their end (the parent is gone) ends the child
	cmds := make(chan string)
	go func() {
		defer cancel()
		for {
			var m parentMsg
			if err := dec.Decode(&m); err != nil {
				return
			}
			select {
			case cmds <- m.Cmd:
			case <-ctx.Done():
				return
			}
		}
	}()
	beatCtx, silence := context.WithCancel(ctx)
	defer silence()
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if send(childMsg{Kind: "alive"}) != nil {
					cancel()
					return
				}
			case <-beatCtx.Done():
				return
			}
		}
	}()
	await := func(cmd string) error {
		select {
		case c := <-cmds:
			if c != cmd {
				return fmt.Errorf("feed child: want the command %q, got %q", cmd, c)
			}
			return nil
		case <-ctx.Done():
			return errors.New("feed child: the parent is gone")
		}
	}
	fail := func(err error) int {
		fmt.Fprintln(errw, err)
		_ = send(childMsg{Kind: "error", Err: err.Error()})
		return 1
	}

	if len(cfg.Sids) == 0 || cfg.Events <= 0 || cfg.Fast < 0 || cfg.Slow < 0 || cfg.Rate <= 0 {
		return fail(fmt.Errorf("feed child: a configuration with no sessions, events or rate: %+v", cfg))
	}
	f := newFeedRun(Options{Subscribers: cfg.Fast, SlowSubscribers: cfg.Slow, FeedEvents: cfg.Events, Rate: cfg.Rate}, cfg.Sids)
	l := newLocalSubs(f, cfg.Token, false)
	defer l.close()
	if v := os.Getenv(feedChildExitAfterEnv); v != "" {
		after, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fail(fmt.Errorf("feed child: %s=%q: %w", feedChildExitAfterEnv, v, err))
		}
		go func() {
			for l.progress.Load() < after {
				time.Sleep(time.Millisecond)
			}
			fmt.Fprintf(errw, "feed child: exiting after %d events (%s, a test)\n", after, feedChildExitAfterEnv)
			os.Exit(3)
		}()
	}
	if err := l.start(ctx, cfg.FastURL, cfg.SlowURL); err != nil {
		return fail(err)
	}
	if err := send(childMsg{Kind: "ready"}); err != nil {
		return 2
	}
	if os.Getenv(feedChildHangEnv) != "" {
		silence()
		fmt.Fprintf(errw, "feed child: silent from here on (%s, a test)\n", feedChildHangEnv)
		<-ctx.Done()
		return 2
	}
	if err := await("published"); err != nil {
		return fail(err)
	}
	n, err := l.awaitFast(ctx)
	if err != nil {
		return fail(err)
	}
	if send(childMsg{Kind: "fast", N: n}) != nil {
		return 2
	}
	if err := l.awaitSlow(ctx); err != nil {
		return fail(err)
	}
	if send(childMsg{Kind: "slow"}) != nil {
		return 2
	}
	if err := await("stop"); err != nil {
		return fail(err)
	}
	l.close()
	if err := send(childMsg{Kind: "report", Report: l.report()}); err != nil {
		fmt.Fprintf(errw, "feed child: sending the report: %v\n", err)
		return 2
	}
	return 0
}

// childSubs is the parent's side of the subscribers in a child process.
type childSubs struct {
	f *feedRun

	cmd     *exec.Cmd
	stdin   *os.File
	enc     *gob.Encoder
	msgs    chan childMsg
	heard   atomic.Int64  // when the child last said anything, unix ns
	gone    chan struct{} // closed when the child's stdout ended
	goneErr error         // why (set before gone is closed)
	exited  chan struct{} // closed when the child was waited for
	// silence is how long the child may say nothing (childSilence)
	silence time.Duration
	stderr  tailBuffer
	closed  sync.Once
}

func newChildSubs(f *feedRun) *childSubs {
	return &childSubs{f: f, msgs: make(chan childMsg, 8), gone: make(chan struct{}), exited: make(chan struct{}), silence: cmp.Or(f.childSilence, childSilence)}
}

func (c *childSubs) where() string {
	if c.cmd != nil && c.cmd.Process != nil {
		return fmt.Sprintf("in a child process, pid %d", c.cmd.Process.Pid)
	}
	return "in a child process"
}

func (c *childSubs) start(ctx context.Context, fastURL, slowURL string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("feed: the subscribers' child process: %w", err)
	}
	// pipes of our own (not StdoutPipe): Wait may run while the report
	// is still being read
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), FeedChildEnv+"=1"), c.f.childEnv...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, &c.stderr
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return fmt.Errorf("feed: starting the subscribers' child process: %w", err)
	}
	c.cmd, c.stdin, c.enc = cmd, inW, gob.NewEncoder(inW)
	c.f.childPID = cmd.Process.Pid
	go func() {
		_ = cmd.Wait()
		close(c.exited)
	}()
	c.heard.Store(time.Now().UnixNano())
	go func() {
		defer outR.Close()
		dec := gob.NewDecoder(outR)
		for {
			var m childMsg
			if err := dec.Decode(&m); err != nil {
				c.goneErr = err
				close(c.gone)
				return
			}
			c.heard.Store(time.Now().UnixNano())
			if m.Kind != "alive" {
				c.msgs <- m
			}
		}
	}()
	o := c.f.o
	if err := c.enc.Encode(childConfig{FastURL: fastURL, SlowURL: slowURL, Token: feedToken, Fast: o.Subscribers, Slow: o.SlowSubscribers,
		Sids: c.f.sids, Events: c.f.published, Rate: o.Rate}); err != nil {
		return c.died(fmt.Errorf("sending the configuration: %w", err))
	}
	_, err = c.await(ctx, "ready")
	return err
}

// await waits for the child's message of kind: the child's "error", its
// end, its silence for childSilence, or ctx end it, with an error that
// says so.
func (c *childSubs) await(ctx context.Context, kind string) (childMsg, error) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	bound := time.NewTimer(childPhaseBound)
	defer bound.Stop()
	for {
		select {
		case m := <-c.msgs:
			switch m.Kind {
			case kind:
				return m, nil
			case "error":
				return m, fmt.Errorf("feed: the subscribers' child process: %s", m.Err)
			default:
				return m, c.died(fmt.Errorf("said %q while %q was due", m.Kind, kind))
			}
		case <-c.gone:
			// a last message may have come before the end
			select {
			case m := <-c.msgs:
				if m.Kind == kind {
					return m, nil
				}
				if m.Kind == "error" {
					return m, fmt.Errorf("feed: the subscribers' child process: %s", m.Err)
				}
			default:
			}
			return childMsg{}, c.died(fmt.Errorf("it ended before saying %q (%v)", kind, c.goneErr))
		case <-tick.C:
			if silent := time.Since(time.Unix(0, c.heard.Load())); silent > c.silence {
				return childMsg{}, c.died(fmt.Errorf("it said nothing for %s while %q was due", silent.Round(time.Second), kind))
			}
		case <-bound.C:
			return childMsg{}, c.died(fmt.Errorf("%q did not come within %s", kind, childPhaseBound))
		case <-ctx.Done():
			return childMsg{}, ctx.Err()
		}
	}
}

// died kills the child and makes the error of its end: what happened,
// its exit status, and the tail of its stderr.
func (c *childSubs) died(cause error) error {
	c.close()
	status := "killed"
	if st := c.cmd.ProcessState; st != nil {
		status = st.String()
	}
	msg := fmt.Sprintf("feed: the subscribers' child process (pid %d) failed mid-run: %v; %s", c.cmd.Process.Pid, cause, status)
	if tail := strings.TrimSpace(c.stderr.String()); tail != "" {
		msg += "; its stderr: " + tail
	}
	return errors.New(msg)
}

func (c *childSubs) send(cmd string) error {
	if err := c.enc.Encode(parentMsg{Cmd: cmd}); err != nil {
		return c.died(fmt.Errorf("sending %q: %w", cmd, err))
	}
	return nil
}

func (c *childSubs) awaitFast(ctx context.Context) (int64, error) {
	if err := c.send("published"); err != nil {
		return 0, err
	}
	m, err := c.await(ctx, "fast")
	return m.N, err
}

func (c *childSubs) awaitSlow(ctx context.Context) error {
	_, err := c.await(ctx, "slow")
	return err
}

func (c *childSubs) finish(ctx context.Context) ([]*subscriber, error) {
	if err := c.send("stop"); err != nil {
		return nil, err
	}
	m, err := c.await(ctx, "report")
	if err != nil {
		return nil, err
	}
	// a child that fails after its report (a data race found under
	// -race exits 66) fails the run too
	if !c.end(30*time.Second) || !c.cmd.ProcessState.Success() {
		return nil, c.died(errors.New("it did not exit cleanly after its report"))
	}
	if len(m.Report) != c.f.o.Subscribers+c.f.o.SlowSubscribers {
		return nil, fmt.Errorf("feed: the subscribers' child process reported %d subscribers, want %d", len(m.Report), c.f.o.Subscribers+c.f.o.SlowSubscribers)
	}
	return c.f.fromReport(m.Report), nil
}

// close ends the child: its stdin closes (it exits when it sees that),
// and it is killed unless it exits within a second; then it is waited
// for, so that no child outlives the run.
func (c *childSubs) close() { c.end(time.Second) }

// end is close with a grace period: it reports whether the child exited
// on its own.
func (c *childSubs) end(grace time.Duration) (exited bool) {
	c.closed.Do(func() {
		if c.cmd == nil {
			return
		}
		c.stdin.Close()
		select {
		case <-c.exited:
			exited = true
		case <-time.After(grace):
			_ = c.cmd.Process.Kill()
			<-c.exited // bounded: killed, and WaitDelay bounds the stderr copy
		}
	})
	return exited
}

// fromReport turns the child's accounts into subscribers, with the latency
// of each event a fast one read: its read less its publish, both on the
// wall clock (unix ns) of the one machine.
func (f *feedRun) fromReport(rep []subReport) []*subscriber {
	subs := make([]*subscriber, len(rep))
	n := len(f.sids)
	for i, r := range rep {
		s := &subscriber{slow: r.Slow, disorder: r.Disorder, reason: r.Reason, readAt: r.ReadAt}
		s.dropped.Store(r.Dropped)
		s.ended.Store(r.Ended)
		s.received.Store(r.Received)
		s.finals.Store(r.Finals)
		if r.Err != "" {
			s.err = errors.New(r.Err)
		}
		if !r.Slow {
			for ev, at := range r.ReadAt {
				if at == 0 || ev >= f.published {
					continue
				}
				if pub := f.pubAt[ev%n][ev/n+1].Load(); pub != 0 {
					s.lat = append(s.lat, time.Duration(at-pub))
				}
			}
		}
		subs[i] = s
	}
	return subs
}

// tailBuffer keeps the last 4 KiB written to it (a child's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - 4<<10; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
