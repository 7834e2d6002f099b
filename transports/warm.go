package transports

import "github.com/codesession/codesession/transports/proc"

// WarmPooler is a transport that keeps initialized agent processes ready
// ahead of the starts that adopt them (claude-code's warm pool): the
// runtime sizes the pool from its config and drains what belongs to its
// process kit when it closes, so no pooled process outlives it.
type WarmPooler interface {
	SetWarmPool(size int)
	DrainWarm(kit *proc.Kit)
}

// WarmCounter is a WarmPooler that counts what its pool holds: idle
// processes (booted and handed no session yet) and, of those, the ready
// ones (settled after the work the agent does on its own after its boot).
// The counts are the transport's, for every runtime that uses it.
type WarmCounter interface {
	WarmBooted() int
	WarmReady() int
}

// Unwrapper is a transport that wraps another (the runtime's containment).
type Unwrapper interface {
	Unwrap() Transport
}

// Innermost unwraps t down to the backend itself.
func Innermost(t Transport) Transport {
	for {
		u, ok := t.(Unwrapper)
		if !ok {
			return t
		}
		t = u.Unwrap()
	}
}
