package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/anthdm/hollywood/remote"
	"github.com/hashicorp/memberlist"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/supervise"
	"github.com/codesession/codesession/messages"
)

// Defaults of a node.
const (
	// BufferSize is hollywood's drpc frame limit on every node: the 4 MiB
	// default drops a connection when a batch of envelopes outgrows it.
	BufferSize = 64 << 20
	// DefaultSyncInterval is how often a node refreshes its load and the
	// other nodes' session records.
	DefaultSyncInterval = 2 * time.Second
	// actorKind and actorID make the cluster actor's PID on every node.
	actorKind = "cluster"
	actorID   = "node"
	// maxIdempotent bounds the callee's cache of answered call ids.
	maxIdempotent = 4096
)

// Profile picks memberlist's timings: the lease after which a silent node
// is declared dead.
type Profile string

const (
	// ProfileLAN is memberlist's LAN defaults (a lost node is declared dead
	// within about 5-30 s).
	ProfileLAN Profile = "lan"
	// ProfileLocal is memberlist's loopback defaults, for one machine and
	// tests (faster probes, a shorter lease).
	ProfileLocal Profile = "local"
)

// Config configures a node. NodeID, ListenAddr and Runtime are required.
type Config struct {
	// NodeID names the node in the cluster; unique.
	NodeID string
	// ListenAddr is the gossip address (memberlist, TCP and UDP), HOST:PORT.
	// It must be routable: an unspecified host (0.0.0.0, ::) is refused.
	ListenAddr string
	// RemoteAddr is the hollywood (drpc) address; default: ListenAddr's
	// host with the port after ListenAddr's.
	RemoteAddr string
	// Join lists gossip addresses of nodes to join; empty starts a new
	// cluster. They are retried with backoff until each is a live member
	// (retry join, join.go), and so are the peers the node learns of.
	Join []string
	// RetryJoinMin and RetryJoinMax bound the wait between join attempts
	// (defaults DefaultRetryJoinMin, DefaultRetryJoinMax).
	RetryJoinMin, RetryJoinMax time.Duration
	// Roots are the workspace roots this node holds: a start whose cwd is
	// under one of them may be placed here. Empty accepts any cwd.
	Roots []string
	// Backends, when set, are the backends this node advertises; default:
	// those whose probe says available at start.
	Backends []string
	// TLS, when set, is the hollywood side's mutual TLS: it must hold the
	// node's certificate, the cluster CA as RootCAs and ClientCAs, and
	// ClientAuth tls.RequireAndVerifyClientCert (see MutualTLS).
	TLS *tls.Config
	// GossipKey, when set (16, 24 or 32 bytes), encrypts gossip with
	// memberlist's keyring: a node without it cannot join.
	GossipKey []byte
	// Profile picks memberlist's timings (default ProfileLAN).
	Profile Profile
	// Transport, when set, is memberlist's transport, bound to ListenAddr
	// (default: memberlist's own NetTransport there). Benchmarks wrap it
	// to cut a node's gossip off (a partition) or delay and drop it.
	Transport memberlist.Transport
	// SyncInterval: see DefaultSyncInterval.
	SyncInterval time.Duration
	// Runtime is the node's own runtime; Scope the owner scope of its
	// sessions (the daemon's); DefaultBackend the backend a start that
	// names none is placed for (the config's defaultBackend).
	Runtime        *actors.Runtime
	Scope          string
	DefaultBackend string
	Logger         *slog.Logger
	// Visible, when set, says whether a token of scope may see rec (the
	// daemon's scope rules, controlplane.Daemon.Visible); it is checked on
	// the node that owns the session. Default: a scope sees its own
	// sessions and Scope sees all.
	Visible func(scope string, rec messages.SessionRecord) bool
	// CheckBackend, when set, refuses a backend scope may not use for op
	// (the daemon's scope allowlists, controlplane.Daemon.CheckBackend); a
	// resume is checked with it on the node that owns the session, against
	// that node's allowlist. Default: every backend.
	CheckBackend func(scope, op, backend string) error
}

// Meta is what a node advertises in memberlist's node meta (at most 512
// bytes of msgpack).
type Meta struct {
	ID       string   `msgpack:"id" json:"id"`
	Addr     string   `msgpack:"addr" json:"addr"` // hollywood address
	Roots    []string `msgpack:"roots,omitempty" json:"roots,omitempty"`
	Backends []string `msgpack:"backends,omitempty" json:"backends,omitempty"`
	Load     int      `msgpack:"load" json:"load"` // live sessions
	// Boot is when the node started (unix nanoseconds): a rejoin with a new
	// boot is a restarted node.
	Boot int64 `msgpack:"boot" json:"boot"`
	// Leaving is gossiped by a node about to leave gracefully (Close):
	// memberlist tells a leave from a death in its own state but hands
	// NotifyLeave a Node whose State still says alive, so the node says it
	// itself. The others stop retrying its address (join.go).
	Leaving bool `msgpack:"leaving,omitempty" json:"leaving,omitempty"`
}

// PeerState is what membership says of a peer.
type PeerState int

const (
	stateInvalid PeerState = iota
	PeerAlive
	PeerSuspect
	PeerDead
)

func (s PeerState) String() string {
	switch s {
	case PeerAlive:
		return "alive"
	case PeerSuspect:
		return "suspect"
	case PeerDead:
		return "dead"
	}
	return "invalid"
}

// peer is another node as this one knows it.
type peer struct {
	meta     Meta
	state    PeerState
	verified bool // a call over the wire was answered since it (re)joined
	pid      *actor.PID
	// recs are its session records as last listed; kept when it dies, so
	// its sessions can be shown orphaned.
	recs map[string]messages.SessionRecord
	// gossip is its memberlist address, retried when it is gone (join.go).
	gossip string
	// left: it said it was leaving (Meta.Leaving) before it went, not a
	// lost lease; the join loop stops trying its learned address.
	left bool
	// inc is its incarnation as the rumors told it (suspicion.go);
	// suspectedBy the node whose probe of it failed, while it is suspect.
	inc         uint64
	suspectedBy string
}

// done is one call id's run on the callee: the first arrival runs it,
// repeats wait for ready and get the same reply.
type done struct {
	ready chan struct{}
	reply Reply
}

// Node is one member of the cluster: a hollywood engine with the remote,
// the cluster actor, memberlist and the session directory.
type Node struct {
	cfg    Config
	log    *slog.Logger
	engine *actor.Engine
	remote *remote.Remote
	wire   wire
	self   *actor.PID
	watch  *actor.PID // the gate's watcher (TLS only)
	ml     *memberlist.Memberlist
	meta   Meta
	stop   chan struct{}
	rejoin chan struct{} // a peer died: retry joining now (join.go)
	wg     sync.WaitGroup

	mu       sync.Mutex
	peers    map[string]*peer
	owner    map[string]string // session id -> node id, for remote sessions
	pending  map[string]chan *Reply
	answered map[string]*done
	order    []string        // answered ids, oldest first
	fetching map[string]bool // record fetches scheduled (directory.go)
	refetch  map[string]bool // a record changed again while being fetched
	// held are feed events of sessions whose record is being learned
	// (learnRecord), in order; a session is in it until they are handed on
	held map[string][]messages.PersistedEvent
	// calls counts the calls this node made to others, by op (tests show
	// that a listing makes none).
	calls  map[string]int
	onFeed func(node, sid string, ev messages.PersistedEvent)
	// failedJoins counts the join loop's failed attempts (tests wait on it
	// rather than on a clock).
	failedJoins atomic.Int64
	subs        map[*feedSub]bool // remote session feeds served here (feed.go)
	// dropFeed, in tests, loses a feed message as the wire may
	dropFeed func(*Feed) bool
	// onPeerState, in tests, sees each change of a peer's state, on the
	// goroutine that made it, after the node's mutex is released
	onPeerState func(id string, s PeerState)
	closed      bool
	// rumors are the suspicions and refutations to gossip; inc is this
	// node's own incarnation in them (suspicion.go)
	rumors *memberlist.TransmitLimitedQueue
	inc    uint64
}

// Start validates cfg, starts the wire and joins the cluster.
func Start(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = DefaultSyncInterval
	}
	if cfg.RetryJoinMin <= 0 {
		cfg.RetryJoinMin = DefaultRetryJoinMin
	}
	if cfg.RetryJoinMax < cfg.RetryJoinMin {
		cfg.RetryJoinMax = max(cfg.RetryJoinMin, DefaultRetryJoinMax)
	}
	if cfg.Profile == "" {
		cfg.Profile = ProfileLAN
	}
	if cfg.Runtime == nil {
		return nil, errors.New("cluster: Config.Runtime is required")
	}
	if cfg.NodeID == "" {
		return nil, errors.New("cluster: a node id is required (--node-id)")
	}
	host, port, err := RoutableAddr("cluster-listen", cfg.ListenAddr)
	if err != nil {
		return nil, err
	}
	if cfg.RemoteAddr == "" {
		cfg.RemoteAddr = net.JoinHostPort(host, strconv.Itoa(port+1))
	}
	if _, _, err := RoutableAddr("cluster remote address", cfg.RemoteAddr); err != nil {
		return nil, err
	}
	for i, r := range cfg.Roots {
		if !filepath.IsAbs(r) {
			return nil, fmt.Errorf("cluster: workspace root %q is not an absolute path", r)
		}
		cfg.Roots[i] = filepath.Clean(r)
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID), stop: make(chan struct{}), rejoin: make(chan struct{}, 1),
		peers: map[string]*peer{}, owner: map[string]string{}, pending: map[string]chan *Reply{}, answered: map[string]*done{},
		fetching: map[string]bool{}, refetch: map[string]bool{}, held: map[string][]messages.PersistedEvent{}, calls: map[string]int{}}
	n.meta = Meta{ID: cfg.NodeID, Addr: cfg.RemoteAddr, Roots: cfg.Roots, Boot: time.Now().UnixNano()}
	n.meta.Backends = slices.Sorted(slices.Values(cfg.Backends))
	if len(cfg.Backends) == 0 {
		n.meta.Backends = availableBackends(cfg.Runtime)
	}
	if b, err := messages.MarshalMsgpack(n.meta); err != nil || len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("cluster: the node's metadata (roots and backends) is over memberlist's %d bytes: list fewer or shorter roots", memberlist.MetaMaxSize)
	}

	rc := remote.NewConfig().WithBufferSize(BufferSize)
	if cfg.TLS != nil {
		rc = rc.WithTLS(cfg.TLS)
	}
	n.remote = remote.New(cfg.RemoteAddr, rc)
	n.engine, err = actor.NewEngine(actor.NewEngineConfig().WithRemote(n.remote))
	if err != nil {
		return nil, fmt.Errorf("cluster: start the wire on %s: %w", cfg.RemoteAddr, err)
	}
	n.wire = wire{engine: n.engine, gate: &dialGate{tls: cfg.TLS, ok: map[string]bool{}}}
	if cfg.TLS != nil {
		n.watch = supervise.Spawn(n.engine, func() actor.Receiver { return &gateWatcher{g: n.wire.gate} }, "gate",
			supervise.RecoverOptions{Name: "gate"}, actor.WithID("watch"))
	}
	n.self = supervise.Spawn(n.engine, func() actor.Receiver { return &nodeActor{n: n} }, actorKind,
		supervise.RecoverOptions{Name: "cluster", OnFailure: func(f supervise.ChildFailed) {
			n.log.Error("cluster actor panicked", "reason", f.Reason)
		}}, actor.WithID(actorID), actor.WithInboxSize(1024))

	mc := memberlist.DefaultLANConfig()
	if cfg.Profile == ProfileLocal {
		mc = memberlist.DefaultLocalConfig()
	}
	mc.Name = cfg.NodeID
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = host, port
	if cfg.Transport != nil {
		mc.Transport = cfg.Transport
	}
	n.rumors = newRumorQueue(n, mc.RetransmitMult)
	mc.Delegate = (*gossip)(n)
	mc.Events = (*gossip)(n)
	mc.Ping = (*gossip)(n)
	mc.Logger = log.New(probeLog{n: n, next: slog.NewLogLogger(n.log.Handler(), slog.LevelDebug).Writer()}, "", 0)
	if len(cfg.GossipKey) > 0 {
		kr, err := memberlist.NewKeyring(nil, cfg.GossipKey)
		if err != nil {
			n.shutdownWire()
			return nil, fmt.Errorf("cluster: gossip key: %w", err)
		}
		mc.Keyring = kr
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	n.ml, err = memberlist.Create(mc)
	if err != nil {
		n.shutdownWire()
		return nil, fmt.Errorf("cluster: start gossip on %s: %w", cfg.ListenAddr, err)
	}
	// the first join attempt runs in joinLoop too: a node whose seeds are
	// not up yet starts anyway and keeps trying (Consul's retry_join)
	n.wg.Add(1)
	go n.syncLoop()
	go n.joinLoop()
	return n, nil
}

// RoutableAddr checks that addr is HOST:PORT with a host other nodes can
// reach: hollywood compares address strings, so 0.0.0.0 would make PIDs
// no one can send to.
func RoutableAddr(what, addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("cluster: %s %q: want HOST:PORT: %v", what, addr, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port <= 0 || port > 65534 {
		return "", 0, fmt.Errorf("cluster: %s %q: want a port between 1 and 65534", what, addr)
	}
	if host == "" {
		return "", 0, fmt.Errorf("cluster: %s %q: name the host other nodes reach this one at (an empty host is every interface, which no node can send to)", what, addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "", 0, fmt.Errorf("cluster: %s %q: %s is the unspecified address; listen on an address other nodes reach this one at (hollywood compares addresses as strings, so %s makes unroutable PIDs)", what, addr, host, host)
	}
	return host, port, nil
}

// availableBackends lists the backends whose probe says available.
func availableBackends(rt *actors.Runtime) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := rt.ListBackends(ctx, "cluster")
	if err != nil {
		return nil
	}
	var ids []string
	for _, b := range res.Backends {
		if b.Availability.Available {
			ids = append(ids, b.Descriptor.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// ID is the node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// Meta is what the node advertises.
func (n *Node) Meta() Meta {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.meta
}

// OnFeed sets where the other nodes' live events go (the local feed).
func (n *Node) OnFeed(f func(node, sid string, ev messages.PersistedEvent)) {
	n.mu.Lock()
	n.onFeed = f
	n.mu.Unlock()
}

// Close leaves the cluster (the others see the node leave at once rather
// than at its lease's end) and stops the wire. The runtime is the caller's.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	close(n.stop)
	n.mu.Unlock()
	// leave and free the ports first, then wait for the sync loop (it may
	// be in a call that now fails): a node restarted right after its
	// process exits finds its addresses free
	n.mu.Lock()
	n.meta.Leaving = true
	n.mu.Unlock()
	if err := n.ml.UpdateNode(leavingTimeout); err != nil {
		n.log.Debug("cluster: could not gossip the leave notice", "err", err)
	}
	err := n.ml.Leave(leaveTimeout)
	if serr := n.ml.Shutdown(); err == nil {
		err = serr
	}
	n.shutdownWire()
	n.wg.Wait()
	return err
}

// leaveTimeout bounds how long Close waits for its leave to be gossiped.
const leaveTimeout = 2 * time.Second

// leavingTimeout bounds how long Close waits for its Leaving notice; a
// peer that misses it only goes on retrying the node, as for a death.
const leavingTimeout = 500 * time.Millisecond

// Kill stops the node the way a dead process does, for tests and
// benchmarks: no leave message; its gossip and wire just go silent, and
// the others find out when its lease expires.
func (n *Node) Kill() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	close(n.stop)
	n.mu.Unlock()
	_ = n.ml.Shutdown()
	n.shutdownWire()
	n.wg.Wait()
}

func (n *Node) shutdownWire() {
	if n.watch != nil {
		<-n.engine.Poison(n.watch).Done()
	}
	<-n.engine.Poison(n.self).Done()
	n.remote.Stop().Wait()
}

func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
