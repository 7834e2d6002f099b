package diffcapture

import "github.com/codesession/codesession/messages"

// Quick is a Capturer that can often answer Begin and Finish at once: with
// no process to run, no lock to wait for, and no more than a bounded
// number of stat calls on a local file system. The session actor asks it
// in its own Receive before it hands a stage to its differ, which spares
// the turn the hand-offs to the differ's goroutine and back (0.4 to 1.6 ms
// a stage on the busy 2-core machines of bench/README.md, far more than a
// capture that runs no git). ok false: nothing was done; ask Begin or Finish. settle
// says Settle has work left after the answer (a tree to write, a witness
// to make), which the caller hands to whoever runs Settle.
type Quick interface {
	// BeginNow is Begin when the answer is at hand (never a nil
	// Baseline with ok: a caller could not tell it from none).
	BeginNow() (b Baseline, settle, ok bool)
	// FinishNow is Finish of b (with the turn's edit paths, as Finish
	// has them) when the answer is at hand; a b it answered is done
	// with, as after Finish.
	FinishNow(b Baseline, editPaths []string) (d messages.TurnDiff, settle, ok bool)
}

// nowMaxPaths bounds the witness BeginNow and FinishNow look at: past it,
// its stat calls are work for the differ's goroutine, not a caller's.
const nowMaxPaths = 256

// BeginNow is Begin while the session's witness holds: the current
// snapshot is the baseline, as Begin would find. In a directory with no
// repository around it, still none, the baseline is the tool-event
// fallback's, as Begin would find too.
func (g *Git) BeginNow() (b Baseline, settle, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			g.recovered("BeginNow", r) // git's way, and the next diff says why
			b, settle, ok = nil, false, false
		}
	}()
	g.injectPanic("BeginNow")
	d := g.cachedRepository()
	if d == nil && g.stillNoRepository() {
		return &gitBaseline{kind: kindFallback, why: whyNoRepository}, false, true
	}
	if d == nil || !g.smu.TryLock() {
		return nil, false, false
	}
	defer g.smu.Unlock()
	sc := g.sc
	if sc == nil || sc.repo != d.rp || sc.cur == nil || !sc.unchanged(d, nowMaxPaths) {
		return nil, false, false
	}
	return &gitBaseline{kind: kindScratch, repo: d.rp, sc: sc, snap: sc.cur}, sc.owesSettle(), true
}

// FinishNow is Finish of a snapshot baseline while the session's witness
// holds and the turn's diff needs no git: nothing changed since the
// baseline, or Prepare diffed the work tree as it stands. The fallback
// baseline of a directory with no repository is answered from the edit
// paths, as Finish answers it.
func (g *Git) FinishNow(base Baseline, editPaths []string) (diff messages.TurnDiff, settle, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			g.recovered("FinishNow", r) // Finish's way, whose diff says why
			diff, settle, ok = messages.TurnDiff{}, false, false
		} else if ok {
			diff = g.withPanics(diff)
		}
	}()
	g.injectPanic("FinishNow")
	b, _ := base.(*gitBaseline)
	if b != nil && b.kind == kindFallback {
		return ToolEventDiff(g.cwd, editPaths, g.maxFiles, b.why), false, true
	}
	if b == nil || b.kind != kindScratch {
		return messages.TurnDiff{}, false, false
	}
	d := g.cachedRepository()
	if d == nil || d.rp.top != b.repo.top || d.rp.objects != b.repo.objects || !g.smu.TryLock() {
		return messages.TurnDiff{}, false, false
	}
	defer g.smu.Unlock()
	sc := g.sc
	if sc == nil || sc != b.sc || sc.repo != d.rp || !sc.unchanged(d, nowMaxPaths) {
		return messages.TurnDiff{}, false, false
	}
	if diff, ok = g.diffAsItStands(sc, b); !ok {
		return messages.TurnDiff{}, false, false
	}
	b.remove()
	return diff, sc.owesSettle(), true
}

// owesSettle says whether Settle has work left: the current snapshot's
// tree to write, or a witness to make. Callers hold smu.
func (sc *scratchState) owesSettle() bool {
	return sc.wit == nil || (sc.cur != nil && sc.cur.unwritten())
}

// unwritten says whether the snapshot's tree is still to be written (not
// while someone is writing it just now).
func (sn *snapshot) unwritten() bool {
	if !sn.mu.TryLock() {
		return false
	}
	defer sn.mu.Unlock()
	return sn.tree == "" && sn.index != ""
}

var _ Quick = (*Git)(nil)
