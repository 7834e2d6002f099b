package actors

import (
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/proc"
)

// sizeWarmPools gives every backend with a warm pool the config's size
// (only the runtime's own default backends: a registry the caller built
// keeps the pools it was built with).
func sizeWarmPools(r *transports.Registry, size int) {
	eachWarmPooler(r, func(w transports.WarmPooler) { w.SetWarmPool(size) })
}

// drainWarmPools kills the pooled processes this runtime's kit started
// (every pooled process when the runtime has no kit).
func drainWarmPools(r *transports.Registry, kit *proc.Kit) {
	eachWarmPooler(r, func(w transports.WarmPooler) { w.DrainWarm(kit) })
}

func eachWarmPooler(r *transports.Registry, f func(transports.WarmPooler)) {
	for _, id := range r.IDs() {
		t, err := r.Get(id)
		if err != nil {
			continue
		}
		if w, ok := transports.Innermost(t).(transports.WarmPooler); ok {
			f(w)
		}
	}
}
