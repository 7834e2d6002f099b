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
