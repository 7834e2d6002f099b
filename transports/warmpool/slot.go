package warmpool

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"

	"github.com/codesession/codesession/transports/proc"
)

// Slot is a transport's warm pool as the runtime drives it
// (transports.WarmPooler): SetWarmPool replaces the pool with one of the
// new size, DrainWarm ends what one runtime's process kit booted. A
// transport embeds a *Slot (so it is a WarmPooler) and reads the current
// pool with Current.
type Slot[K comparable, V any] struct {
	alive   func(V) bool
	discard func(V)
	kitOf   func(K) *proc.Kit
	settled func(V) bool // nil: every item is settled

	mu   sync.Mutex
	pool *Pool[K, V] // nil until SetWarmPool
}

// NewSlot returns a slot without a pool whose pools use alive and discard
// (see Options); kitOf names the process kit of a key, so DrainWarm(kit)
// ends the keys whose kit it is.
func NewSlot[K comparable, V any](alive func(V) bool, discard func(V), kitOf func(K) *proc.Kit) *Slot[K, V] {
	return &Slot[K, V]{alive: alive, discard: discard, kitOf: kitOf}
}

// WithSettled makes the slot's pools tell settled items with settled
// (Options.Settled), and returns the slot. Call it before SetWarmPool.
func (s *Slot[K, V]) WithSettled(settled func(V) bool) *Slot[K, V] {
	s.settled = settled
	return s
}

// SetWarmPool sets the pool's size per key (0 disables it), closing the
// previous pool and what it held. It is safe beside starts: a start that
// took the old pool finds it closed and refusing refills.
func (s *Slot[K, V]) SetWarmPool(n int) {
	p := New[K, V](Options[V]{Size: max(n, 0), Alive: s.alive, Discard: s.discard, Settled: s.settled})
	s.mu.Lock()
	old := s.pool
	s.pool = p
	s.mu.Unlock()
	if old != nil {
		old.Close()
	}
}

// Current is the pool (nil when SetWarmPool was never called).
func (s *Slot[K, V]) Current() *Pool[K, V] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pool
}

// WarmPool is the configured size per key.
func (s *Slot[K, V]) WarmPool() int {
	if p := s.Current(); p != nil {
		return p.Size()
	}
	return 0
}

// WarmReady is how many pooled items are ready, for any key: idle and
// settled.
func (s *Slot[K, V]) WarmReady() int {
	if p := s.Current(); p != nil {
		return p.ReadyTotal()
	}
	return 0
}

// WarmBooted is how many pooled items are idle, for any key, settled or
// not.
func (s *Slot[K, V]) WarmBooted() int {
	if p := s.Current(); p != nil {
		return p.IdleTotal()
	}
	return 0
}

// DrainWarm discards the pooled items that belong to kit (a runtime
// closing) and refuses to boot more for it; a nil kit drains everything.
func (s *Slot[K, V]) DrainWarm(kit *proc.Kit) {
	p := s.Current()
	switch {
	case p == nil:
	case kit == nil:
		p.Close()
	default:
		p.Drain(func(k K) bool { return s.kitOf(k) == kit })
	}
}

// EnvKey is a key's fingerprint of a process environment: two processes
// whose environments differ in any variable, in any order, are not
// interchangeable.
func EnvKey(env []string) string {
	sorted := slices.Clone(env)
	slices.Sort(sorted)
	sum := sha256.Sum256([]byte(strings.Join(sorted, "\x00")))
	return hex.EncodeToString(sum[:])
}
