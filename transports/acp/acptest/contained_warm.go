package acptest

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/contain"
	"github.com/codesession/codesession/transports/proc/confinetest"
	"github.com/codesession/codesession/transports/transporttest"
)

// ContainedWarmRecord: b contained as the runtime contains it, with a warm
// pool of one. A session that adopts the pooled process says on its
// record what that process may write, its scratch folder included (its
// rules were built in the pool's group, so the session's own group had
// seen no start: before, the record lacked the folder).
func ContainedWarmRecord(t *testing.T, b Backend) {
	confinetest.NeedLandlock(t)
	w := NewWarm(t, b, 1, nil)
	tr := contain.Wrap(w.Tr, contain.Options{Kit: w.Kit})
	// the scratch folder: os.MkdirTemp("", "codesession-<id>-")
	scratch := regexp.MustCompile("^" + regexp.QuoteMeta(filepath.Join(os.TempDir(), "codesession-"+b.New().Descriptor().ID+"-")) + "[0-9]+$")
	open := func(id string) (*Started, *messages.Applied) {
		t.Helper()
		rec := transporttest.NewRecorder()
		ctx, cancel := context.WithTimeout(context.Background(), liveWait)
		defer cancel()
		s, err := tr.Open(ctx, w.Spec(id, messages.PostureDefault), rec.Sink)
		if err != nil {
			t.Fatalf("Open %s: %v", id, err)
		}
		st := &Started{S: s, Rec: rec}
		t.Cleanup(func() { st.Close(t) })
		ev, ok := rec.Started()
		if !ok || ev.Containment == nil {
			t.Fatalf("Open %s: no EvStarted with its containment", id)
		}
		return st, ev.Containment
	}
	hasScratch := func(a *messages.Applied) bool {
		for _, p := range a.Writable {
			if scratch.MatchString(p) {
				return true
			}
		}
		return false
	}
	a, appliedA := open("cs-warm-rec-a")
	if !hasScratch(appliedA) {
		t.Errorf("the booting session's record lacks its scratch folder %s: %v", scratch, appliedA.Writable)
	}
	a.Turn(t, 1, "hello")
	deadline := time.Now().Add(liveWait)
	for w.Tr.WarmReady() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the pool did not fill after the first turn")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, appliedB := open("cs-warm-rec-b")
	if n := w.Tr.WarmReady(); n != 0 {
		t.Fatalf("the second session did not adopt the pooled process (%d still pooled)", n)
	}
	if !hasScratch(appliedB) {
		t.Errorf("the adopting session's record lacks the pooled process's scratch folder %s: %v", scratch, appliedB.Writable)
	}
}
