package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
)

// RunFaults runs the store contract for callers under every fault Faulty
// injects, wrapped around the stores open returns: a writer that follows
// the contract (after a failed Append, re-read LastSeq before retrying;
// never drop a batch) ends with a gapless log holding every event exactly
// once, whatever the faults (a write that lands but reports failure, a
// panic inside Append, a short write, a full disk for a while).
func RunFaults(t *testing.T, open func(t *testing.T) store.Store) {
	faults := []struct {
		name string
		arm  func(f *store.Faulty, n int)
	}{
		{"LandThenFail", (*store.Faulty).LandThenFail},
		{"PanicAppends", (*store.Faulty).PanicAppends},
		{"PartialAppends", (*store.Faulty).PartialAppends},
		{"NoSpace", (*store.Faulty).NoSpace},
		{"FailAppends", (*store.Faulty).FailAppends},
	}
	for _, fault := range faults {
		t.Run(fault.name, func(t *testing.T) {
			st := open(t)
			t.Cleanup(func() { _ = st.Close() })
			f := store.NewFaulty(st)
			ctx := context.Background()
			rec := NewRecord(baseTime)
			require.NoError(t, f.Create(ctx, rec))
			const total = 200
			all := NewEvents(1, total)
			w := &retryingWriter{st: f, sid: rec.SessionID}
			for next := 0; next < total; {
				n := min(7, total-next)
				if next%21 == 0 {
					fault.arm(f, 3) // a streak of three faults, then the store works
				}
				require.NoError(t, w.append(ctx, all[next:next+n]), "batch at seq %d", next+1)
				next += n
			}
			requireLastSeq(t, f.Inner(), rec.SessionID, total)
			requireEvents(t, f.Inner(), rec.SessionID, 0, 0, all)
		})
	}
}

// retryingWriter follows the Append contract the way the session's persist
// writer does: nothing is dropped, and the store's LastSeq, re-read after
// every failure, decides what is still to write.
type retryingWriter struct {
	st  store.Store
	sid string
}

func (w *retryingWriter) append(ctx context.Context, evs []messages.PersistedEvent) error {
	for attempt := 0; attempt < 50; attempt++ {
		err := w.try(ctx, evs)
		if err == nil {
			return nil
		}
		var e *messages.Error
		if errors.As(err, &e) && e.Code == messages.CodeConflict {
			return err // a real bug: the contract says re-reading LastSeq prevents this
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("the store never took the batch")
}

func (w *retryingWriter) try(ctx context.Context, evs []messages.PersistedEvent) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("append panicked: %v", p)
		}
	}()
	last, err := w.st.LastSeq(ctx, w.sid)
	if err != nil {
		return err
	}
	for len(evs) > 0 && evs[0].Seq <= last {
		evs = evs[1:]
	}
	return w.st.Append(ctx, w.sid, evs)
}
