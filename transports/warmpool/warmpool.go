// Package warmpool keeps things that are slow to start (an agent CLI that
// has finished its handshake) ready ahead of need, per key, so a start can
// adopt one instead of waiting for a boot.
//
// A Pool holds up to Size idle items per key. Take hands out an idle item
// that is still alive (dead ones are discarded on the way) and never
// blocks; Refill boots items in the background until the key has Size idle
// or booting ones. Keys are learnt from use: the caller refills the key of
// each start it served, so the first start of a key is cold and later ones
// are warm. At most MaxKeys keys hold idle items; filling a new key
// discards the idle items of the key used longest ago.
//
// An item can be idle and not settled yet: an agent CLI keeps working on
// its own for a while after its handshake, and a turn beside that work is
// slower. Options.Settled tells settled items (Settling watches a
// process's CPU time until it stands still); Take hands them out first
// and ReadyTotal (a Slot's WarmReady) counts only them, so a caller that
// waits for a ready item (the benchmark) gets a settled one. Take never waits for a settle: an
// unsettled item is still far ahead of a boot.
//
// Drain ends a part of the pool (the items of one owner, say a runtime
// closing): idle items of matching keys are discarded, boots of matching
// keys in flight are cancelled and waited for, and matching keys are never
// refilled again. Close drains everything.
//
// The pool only books: what an item is, how it boots, how it is told alive
// and how it is discarded are the caller's functions. Everything is safe
// for concurrent use; the boot and discard functions run on the pool's own
// goroutines, never under its lock.
//
// A transport with a pool embeds a *Slot: the runtime's side of it
// (transports.WarmPooler: SetWarmPool, DrainWarm per process kit), so
// every backend's pool is sized and drained the same way. EnvKey is the
// keys' fingerprint of a process environment, and RefillAfter the wait
// for a session's first turn before its replacement boots.
package warmpool
