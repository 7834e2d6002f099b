package warmpool_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports/warmpool"
)

// item is a booted thing the tests can kill and see discarded.
type item struct {
	key  string
	n    int
	dead bool
}

type books struct {
	mu        sync.Mutex
	booted    int
	discarded []*item
}

func (b *books) pool(size int) *warmpool.Pool[string, *item] {
	return warmpool.New[string, *item](warmpool.Options[*item]{Size: size, MaxKeys: 2,
		Alive: func(i *item) bool { return !i.dead },
		Discard: func(i *item) {
			b.mu.Lock()
			b.discarded = append(b.discarded, i)
			b.mu.Unlock()
		}})
}

func (b *books) boot(key string) func(context.Context) (*item, error) {
	return func(context.Context) (*item, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.booted++
		return &item{key: key, n: b.booted}, nil
	}
}

func (b *books) discards() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.discarded)
}

func TestRefillKeepsSizeIdleAndTakeHandsThemOut(t *testing.T) {
	var b books
	p := b.pool(2)
	defer p.Close()
	_, ok := p.Take("a")
	assert.False(t, ok, "an empty pool misses")
	p.Refill("a", b.boot("a"))
	p.Refill("a", b.boot("a")) // already booting: no more
	require.Eventually(t, func() bool { return p.Idle("a") == 2 }, time.Minute, time.Millisecond)
	assert.Equal(t, 2, b.booted)
	v, ok := p.Take("a")
	require.True(t, ok)
	assert.Equal(t, "a", v.key)
	_, ok = p.Take("b")
	assert.False(t, ok, "another key has nothing")
	assert.Equal(t, 1, p.Idle("a"))
}

func TestTakeMatchingHandsOutAnItemOfAnotherKeyThatFits(t *testing.T) {
	var b books
	p := b.pool(1)
	defer p.Close()
	var dead *item
	p.Refill("a", func(context.Context) (*item, error) { dead = &item{key: "a"}; return dead, nil })
	p.Refill("b", b.boot("b"))
	require.Eventually(t, func() bool { return p.Idle("a") == 1 && p.Idle("b") == 1 }, time.Minute, time.Millisecond)
	dead.dead = true

	_, _, ok := p.TakeMatching(func(k string, _ *item) bool { return k == "c" })
	assert.False(t, ok, "nothing fits")
	assert.Equal(t, 1, b.discards(), "the dead item met on the way was discarded")
	assert.Equal(t, 0, p.Idle("a"))
	assert.Equal(t, 1, p.Idle("b"), "an item that does not fit stays")

	k, v, ok := p.TakeMatching(func(k string, i *item) bool { return i.key == "b" })
	require.True(t, ok)
	assert.Equal(t, "b", k)
	assert.Equal(t, "b", v.key)
	assert.Equal(t, 0, p.Idle("b"), "the item is handed out once")
	_, _, ok = p.TakeMatching(func(string, *item) bool { return true })
	assert.False(t, ok, "the pool is empty")
}

func TestDeadIdleItemIsNeverHandedOut(t *testing.T) {
	var b books
	p := b.pool(1)
	defer p.Close()
	var booted *item
	p.Refill("a", func(ctx context.Context) (*item, error) { booted = &item{key: "a"}; return booted, nil })
	require.Eventually(t, func() bool { return p.Idle("a") == 1 }, time.Minute, time.Millisecond)
	booted.dead = true
	_, ok := p.Take("a")
	assert.False(t, ok)
	assert.Equal(t, 1, b.discards(), "the dead item was discarded")
	assert.Equal(t, 0, p.Idle("a"))
}

func TestFailedBootIsDroppedAndRetriedByTheNextRefill(t *testing.T) {
	var b books
	p := b.pool(1)
	defer p.Close()
	p.Refill("a", func(context.Context) (*item, error) { return nil, errors.New("no") })
	require.Eventually(t, func() bool { p.Refill("a", b.boot("a")); return p.Idle("a") == 1 }, time.Minute, time.Millisecond)
	assert.Equal(t, 0, b.discards())
}

func TestMaxKeysEvictsTheLeastRecentlyUsedKey(t *testing.T) {
	var b books
	p := b.pool(1)
	defer p.Close()
	for _, k := range []string{"a", "b"} {
		p.Refill(k, b.boot(k))
		require.Eventually(t, func() bool { return p.Idle(k) == 1 }, time.Minute, time.Millisecond)
	}
	_, _ = p.Take("a") // a is the most recent now, and empty
	p.Refill("a", b.boot("a"))
	require.Eventually(t, func() bool { return p.Idle("a") == 1 }, time.Minute, time.Millisecond)
	p.Refill("c", b.boot("c"))
	require.Eventually(t, func() bool { return p.Idle("c") == 1 }, time.Minute, time.Millisecond)
	assert.Equal(t, 0, p.Idle("b"), "b was used longest ago")
	assert.Equal(t, 1, p.Idle("a"))
	// the pool discards what it evicted after it lets go of its lock, so
	// c can be idle a moment before b's item is discarded
	require.Eventually(t, func() bool { return b.discards() == 1 }, time.Minute, time.Millisecond)
	b.mu.Lock()
	defer b.mu.Unlock()
	assert.Equal(t, "b", b.discarded[0].key)
}

func TestDrainDiscardsCancelsAndRefusesRefills(t *testing.T) {
	var b books
	p := b.pool(1)
	defer p.Close()
	p.Refill("keep", b.boot("keep"))
	p.Refill("gone", b.boot("gone"))
	require.Eventually(t, func() bool { return p.Idle("keep") == 1 && p.Idle("gone") == 1 }, time.Minute, time.Millisecond)
	_, _ = p.Take("gone")
	started := make(chan struct{})
	p.Refill("gone", func(ctx context.Context) (*item, error) {
		close(started)
		<-ctx.Done() // a boot that only a cancel ends
		return &item{key: "gone"}, nil
	})
	<-started
	p.Drain(func(k string) bool { return k == "gone" })
	assert.Equal(t, 1, b.discards(), "the cancelled boot's item was discarded, once Drain returned")
	p.Refill("gone", b.boot("gone"))
	assert.Equal(t, 0, p.Idle("gone"))
	assert.Equal(t, 1, p.Idle("keep"), "other keys are untouched")
	p.Close()
	assert.Equal(t, 2, b.discards())
}

func TestSizeZeroDisables(t *testing.T) {
	var b books
	p := b.pool(0)
	p.Refill("a", b.boot("a"))
	p.Close()
	assert.Equal(t, 0, b.booted)
}

func TestRefillAfterWaitsForTheFirstTurnOrTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first, stop := make(chan struct{}), make(chan struct{})
		var mu sync.Mutex
		var fired []string
		mark := func(s string) func() {
			return func() { mu.Lock(); fired = append(fired, s); mu.Unlock() }
		}
		got := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), fired...) }
		warmpool.RefillAfter(first, nil, mark("first"))
		warmpool.RefillAfter(nil, stop, mark("stop"))
		warmpool.RefillAfter(nil, nil, mark("delay"))
		warmpool.RefillAfter(first, stop, nil) // nothing to run
		synctest.Wait()
		assert.Empty(t, got(), "nothing refills before the first turn ends")
		close(first)
		synctest.Wait()
		close(stop)
		synctest.Wait()
		assert.Equal(t, []string{"first", "stop"}, got())
		time.Sleep(warmpool.RefillDelay)
		synctest.Wait()
		assert.Equal(t, []string{"first", "stop", "delay"}, got())
	})
}

// Take hands out a settled item before an older one still settling, and
// the oldest when none has settled; Ready counts only settled items.
func TestTakePrefersSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		booted := 0
		settled := map[int]bool{}
		p := warmpool.New[string, *item](warmpool.Options[*item]{Size: 3, MaxKeys: 2,
			Discard: func(*item) {},
			Settled: func(i *item) bool { mu.Lock(); defer mu.Unlock(); return settled[i.n] }})
		defer p.Close()
		p.Refill("a", func(context.Context) (*item, error) {
			mu.Lock()
			booted++
			n := booted
			mu.Unlock()
			time.Sleep(time.Duration(n) * time.Millisecond) // idle in boot order
			return &item{key: "a", n: n}, nil
		})
		time.Sleep(time.Second)
		require.Equal(t, 3, p.Idle("a"))
		assert.Zero(t, p.ReadyTotal())
		mu.Lock()
		settled[2] = true
		mu.Unlock()
		assert.Equal(t, 1, p.ReadyTotal())
		got, ok := p.Take("a")
		require.True(t, ok)
		assert.Equal(t, 2, got.n, "the settled one")
		got, ok = p.Take("a")
		require.True(t, ok)
		assert.Equal(t, 1, got.n, "none settled: the oldest")
	})
}
