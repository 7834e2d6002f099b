package warmpool

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// DefaultMaxKeys is how many keys hold idle items at once unless
// Options.MaxKeys says otherwise.
const DefaultMaxKeys = 4

// Options are a pool's functions and limits.
type Options[V any] struct {
	// Size is how many idle items a key keeps; 0 disables the pool (Take
	// always misses, Refill does nothing).
	Size int
	// MaxKeys bounds the keys that hold idle items (DefaultMaxKeys when 0).
	MaxKeys int
	// Alive reports whether an idle item can still be handed out (nil: all
	// are).
	Alive func(V) bool
	// Discard frees an item the pool will not hand out (required).
	Discard func(V)
	// Settled reports whether an idle item is done with the work it does
	// on its own after its boot (nil: every item is, from the start): Take
	// hands out settled items first, and ReadyTotal counts only them. An
	// item that has not settled is still handed out when no settled one
	// is there, since it is still far ahead of a boot. It runs under the
	// pool's lock: it must be quick and must not call the pool.
	Settled func(V) bool
}

// Pool is a keyed set of items booted ahead of need. The zero value is not
// usable; make one with New.
type Pool[K comparable, V any] struct {
	o Options[V]

	mu      sync.Mutex
	idle    map[K][]V
	used    map[K]uint64 // when each key was last taken or refilled (a counter)
	clock   uint64
	booting []*boot[K]
	drained []func(K) bool
	wg      sync.WaitGroup
}

type boot[K any] struct {
	key    K
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns an empty pool.
func New[K comparable, V any](o Options[V]) *Pool[K, V] {
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.Alive == nil {
		o.Alive = func(V) bool { return true }
	}
	if o.Settled == nil {
		o.Settled = func(V) bool { return true }
	}
	return &Pool[K, V]{o: o, idle: map[K][]V{}, used: map[K]uint64{}}
}

// Size is the configured idle items per key.
func (p *Pool[K, V]) Size() int { return p.o.Size }

// Take hands out an idle, alive item of key k: the oldest settled one,
// else the oldest. It never waits for a boot or a settle.
func (p *Pool[K, V]) Take(k K) (v V, ok bool) {
	var dead []V
	p.mu.Lock()
	p.touch(k)
	vs := slices.DeleteFunc(p.idle[k], func(x V) bool {
		if p.o.Alive(x) {
			return false
		}
		dead = append(dead, x)
		return true
	})
	i := slices.IndexFunc(vs, p.o.Settled)
	if i < 0 && len(vs) > 0 {
		i = 0
	}
	if i >= 0 {
		v, ok = vs[i], true
		vs = slices.Delete(vs, i, i+1)
	}
	if len(vs) == 0 {
		delete(p.idle, k)
	} else {
		p.idle[k] = vs
	}
	p.mu.Unlock()
	p.discard(dead...)
	return v, ok
}

// TakeMatching hands out an idle, alive item that match accepts, of any
// key (for a start whose own key has none idle: an item that can be
// switched to what the start asks, such as an agent that changes its
// model over its protocol), from the key used least recently. It never
// waits for a boot; items found dead on the way are discarded. match runs
// under the pool's lock: it must be quick and must not call the pool.
func (p *Pool[K, V]) TakeMatching(match func(K, V) bool) (k K, v V, ok bool) {
	var dead []V
	p.mu.Lock()
	keys := make([]K, 0, len(p.idle))
	for key := range p.idle {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b K) int { return cmp.Compare(p.used[a], p.used[b]) })
	for _, key := range keys {
		vs := p.idle[key]
		for i := 0; i < len(vs) && !ok; i++ {
			if !p.o.Alive(vs[i]) {
				dead = append(dead, vs[i])
				vs = slices.Delete(vs, i, i+1)
				i--
				continue
			}
			if match(key, vs[i]) {
				k, v, ok = key, vs[i], true
				vs = slices.Delete(vs, i, i+1)
			}
		}
		if len(vs) == 0 {
			delete(p.idle, key)
		} else {
			p.idle[key] = vs
		}
		if ok {
			break
		}
	}
	p.mu.Unlock()
	p.discard(dead...)
	return k, v, ok
}

// Idle is how many idle items key k holds (alive or not).
func (p *Pool[K, V]) Idle(k K) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle[k])
}

// IdleTotal is how many idle items every key holds together, settled or
// not (alive or not).
func (p *Pool[K, V]) IdleTotal() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, vs := range p.idle {
		n += len(vs)
	}
	return n
}

// ReadyTotal is how many idle items every key holds together that have
// settled (see Options.Settled; alive or not).
func (p *Pool[K, V]) ReadyTotal() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, vs := range p.idle {
		for _, v := range vs {
			if p.o.Settled(v) {
				n++
			}
		}
	}
	return n
}

// Refill boots items of key k in the background until it has Size idle or
// booting ones. boot gets a context that Drain cancels; an item that comes
// back after its key was drained is discarded, and a failed boot is
// dropped (the next Refill tries again).
func (p *Pool[K, V]) Refill(k K, bootFn func(ctx context.Context) (V, error)) {
	if p.o.Size <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isDrained(k) {
		return
	}
	p.touch(k)
	n := len(p.idle[k])
	for _, b := range p.booting {
		if b.key == k {
			n++
		}
	}
	for ; n < p.o.Size; n++ {
		ctx, cancel := context.WithCancel(context.Background())
		b := &boot[K]{key: k, cancel: cancel, done: make(chan struct{})}
		p.booting = append(p.booting, b)
		p.wg.Add(1)
		go p.run(ctx, b, bootFn)
	}
}

func (p *Pool[K, V]) run(ctx context.Context, b *boot[K], bootFn func(ctx context.Context) (V, error)) {
	defer p.wg.Done()
	defer close(b.done)
	defer b.cancel()
	v, err := bootFn(ctx)
	var drop []V
	p.mu.Lock()
	for i, x := range p.booting {
		if x == b {
			p.booting = append(p.booting[:i], p.booting[i+1:]...)
			break
		}
	}
	switch {
	case err != nil:
	case p.isDrained(b.key) || ctx.Err() != nil:
		drop = append(drop, v)
	default:
		p.idle[b.key] = append(p.idle[b.key], v)
		drop = p.evict(b.key)
	}
	p.mu.Unlock()
	p.discard(drop...)
}

// evict discards the idle items of the least recently used keys beyond
// MaxKeys, never keep's (p.mu held).
func (p *Pool[K, V]) evict(keep K) []V {
	var out []V
	for len(p.idle) > p.o.MaxKeys {
		var oldest K
		first := true
		for k := range p.idle {
			if k != keep && (first || p.used[k] < p.used[oldest]) {
				oldest, first = k, false
			}
		}
		if first {
			break
		}
		out = append(out, p.idle[oldest]...)
		delete(p.idle, oldest)
	}
	return out
}

// touch marks k used now (p.mu held).
func (p *Pool[K, V]) touch(k K) {
	p.clock++
	p.used[k] = p.clock
	if len(p.used) > 4*p.o.MaxKeys { // forget keys long unused
		for x := range p.used {
			if _, idle := p.idle[x]; !idle && x != k {
				delete(p.used, x)
			}
		}
	}
}

func (p *Pool[K, V]) isDrained(k K) bool {
	for _, m := range p.drained {
		if m(k) {
			return true
		}
	}
	return false
}

func (p *Pool[K, V]) discard(vs ...V) {
	for _, v := range vs {
		p.o.Discard(v)
	}
}

// Drain discards the idle items of every key match accepts, cancels and
// waits for their boots in flight, and refuses to refill those keys from
// now on.
func (p *Pool[K, V]) Drain(match func(K) bool) {
	var drop []V
	var wait []*boot[K]
	p.mu.Lock()
	p.drained = append(p.drained, match)
	for k, vs := range p.idle {
		if match(k) {
			drop = append(drop, vs...)
			delete(p.idle, k)
		}
	}
	for _, b := range p.booting {
		if match(b.key) {
			b.cancel()
			wait = append(wait, b)
		}
	}
	p.mu.Unlock()
	p.discard(drop...)
	for _, b := range wait {
		<-b.done
	}
}

// Close drains every key and waits for every boot.
func (p *Pool[K, V]) Close() {
	p.Drain(func(K) bool { return true })
	p.wg.Wait()
}

// RefillDelay bounds how long a refill waits for the session that used an
// item to finish its first turn.
const RefillDelay = 30 * time.Second

// RefillAfter runs refill in the background once first or stop is closed
// (a nil channel never is), or RefillDelay has passed: a new item boots
// after the session that took one has had its first turn, so the boot
// competes with neither its start nor that turn (on two cores a node boot
// beside claude's first turn made that turn three times slower). A nil
// refill does nothing.
func RefillAfter(first, stop <-chan struct{}, refill func()) {
	if refill == nil {
		return
	}
	go func() {
		t := time.NewTimer(RefillDelay)
		defer t.Stop()
		select {
		case <-first:
		case <-stop:
		case <-t.C:
		}
		refill()
	}()
}
