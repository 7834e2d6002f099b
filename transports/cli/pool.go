package cli

import (
	"context"

	"github.com/codesession/codesession/transports"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/warmpool"
)

// The warm-pool glue of a kit transport: the transport embeds a
// *warmpool.Slot keyed by what cannot change after its CLI's boot, and
// uses these for the rest. Pooled processes are contained like sessions:
// each starts through proc under its own group of the runtime's kit
// (WarmGroup: watchdog, cgroup, boot-sweep record), is killed when
// discarded, drained when the runtime closes (DrainWarm), and once adopted
// its group is closed with the session (Shell.OwnGroup).

// Adopt hands a start a pooled item of key when one fits: it takes idle
// items until adopt accepts one (one that cannot take the start's settings
// is discarded); ok is false when the start must boot its own. refill
// boots the key's replacement from a template of spec (the caller runs it
// once the session's first turn is over, so the boot competes with neither
// the start nor that turn). A resume or a provisioned start never adopts.
func Adopt[K comparable, V any](slot *warmpool.Slot[K, V], key K, spec transports.SessionSpec,
	boot func(ctx context.Context, kit *prockit.Kit, tmpl transports.SessionSpec) (V, error),
	adopt func(V) error, discard func(V)) (v V, refill func(), ok bool) {
	pool := slot.Current() // a pool replaced by SetWarmPool meanwhile is closed: it refuses the refill
	if pool == nil || pool.Size() == 0 || spec.ResumeExternalID != "" || !spec.Provision.Empty() {
		return v, func() {}, false
	}
	kit := spec.Procs.Kit()
	refill = func() {
		tmpl := spec
		tmpl.SessionID, tmpl.Procs = "", nil
		pool.Refill(key, func(ctx context.Context) (V, error) { return boot(ctx, kit, tmpl) })
	}
	for {
		w, found := pool.Take(key)
		if !found {
			return v, refill, false
		}
		if adopt(w) == nil {
			return w, refill, true
		}
		discard(w)
	}
}

// Idle is how many pooled items of key are ready for a start (keyErr: the
// key could not be made, so none).
func Idle[K comparable, V any](slot *warmpool.Slot[K, V], key K, keyErr error) int {
	pool := slot.Current()
	if pool == nil || keyErr != nil {
		return 0
	}
	return pool.Idle(key)
}

// WarmGroup is the process bookkeeping of a pooled process: a group of its
// own in kit (nil without a kit).
func WarmGroup(kit *prockit.Kit) *prockit.Group {
	if kit == nil {
		return nil
	}
	return kit.Group("warm-" + transports.RandomHex(6))
}

// RefillAfterFirstTurn runs refill once s's first turn has ended, s
// closed, or warmpool.RefillDelay passed: a boot beside that turn slows it.
func (s *Shell[M, C]) RefillAfterFirstTurn(refill func()) {
	warmpool.RefillAfter(s.FirstEnd, s.Stop, refill)
}
