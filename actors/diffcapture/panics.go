package diffcapture

import (
	"fmt"
	"strings"

	"github.com/codesession/codesession/messages"
)

// A panic in diff capture is a bug. It must not take the daemon down (the
// capture runs in a session's differ goroutine, and a diff is never worth
// a process), and it must not vanish into a quiet fallback either: Settle,
// Prepare, BeginNow and FinishNow used to recover into "take git's way" and
// nothing ever said so. Each recovered panic is kept here and handed out as
// an internal-error warning on the next diff the session gets (Finish or
// FinishNow), so the turn's events show it (the session emits a diff
// warning as a warning event) and a test sees it, without re-panicking in
// a goroutine no supervisor watches.

// maxKeptPanics bounds the panics kept for the next diff.
const maxKeptPanics = 8

// recovered keeps a recovered panic for the next diff.
func (g *Git) recovered(where string, r any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.panics) < maxKeptPanics {
		g.panics = append(g.panics, fmt.Sprintf("%s panicked: %v", where, r))
	}
}

// withPanics adds the panics kept since the last diff to d's warning.
func (g *Git) withPanics(d messages.TurnDiff) messages.TurnDiff {
	g.mu.Lock()
	ps := g.panics
	g.panics = nil
	g.mu.Unlock()
	if len(ps) == 0 {
		return d
	}
	w := messages.Errorf(messages.CodeInternal, "diff capture", "a bug: %s", strings.Join(ps, "; ")).Error()
	if d.Warning != "" {
		w = d.Warning + "; " + w
	}
	d.Warning = w
	return d
}

// injectPanic is a test seam: it panics when where is the one set.
func (g *Git) injectPanic(where string) {
	if g.panicAt == where {
		panic("injected for a test")
	}
}
