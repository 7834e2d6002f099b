package warmpool_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/warmpool"
)

type kitKey struct {
	kit  *proc.Kit
	name string
}

// A slot drains what one kit booted and leaves another's; SetWarmPool
// closes the pool it replaces, discarding what it held.
func TestSlotDrainsPerKitAndReplaces(t *testing.T) {
	var b books
	s := warmpool.NewSlot(func(i *item) bool { return !i.dead },
		func(i *item) { b.mu.Lock(); b.discarded = append(b.discarded, i); b.mu.Unlock() },
		func(k kitKey) *proc.Kit { return k.kit })
	assert.Nil(t, s.Current())
	assert.Zero(t, s.WarmPool())
	assert.Zero(t, s.WarmReady())
	s.DrainWarm(nil) // no pool: nothing to do

	s.SetWarmPool(1)
	require.Equal(t, 1, s.WarmPool())
	kitA, kitB := &proc.Kit{RuntimeID: "a"}, &proc.Kit{RuntimeID: "b"}
	a, c := kitKey{kitA, "x"}, kitKey{kitB, "x"}
	s.Current().Refill(a, b.boot("a"))
	s.Current().Refill(c, b.boot("b"))
	require.Eventually(t, func() bool { return s.WarmReady() == 2 }, time.Minute, time.Millisecond)

	s.DrainWarm(kitA)
	assert.Equal(t, 1, b.discards(), "only kit a's item")
	assert.Equal(t, 1, s.Current().Idle(c))

	s.SetWarmPool(2)
	assert.Equal(t, 2, b.discards(), "the replaced pool was closed")
	assert.Equal(t, 2, s.WarmPool())
	assert.Zero(t, s.WarmReady())
}

func TestEnvKeyIgnoresOrderNotContent(t *testing.T) {
	env := []string{"B=2", "A=1"}
	assert.Equal(t, warmpool.EnvKey([]string{"A=1", "B=2"}), warmpool.EnvKey(env))
	assert.Equal(t, []string{"B=2", "A=1"}, env, "the caller's slice is left as it was")
	assert.NotEqual(t, warmpool.EnvKey([]string{"A=1", "B=3"}), warmpool.EnvKey(env))
	assert.NotEqual(t, warmpool.EnvKey([]string{"A=1B=2"}), warmpool.EnvKey(env))
}
