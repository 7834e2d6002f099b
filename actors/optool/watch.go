package optool

import (
	"context"

	"github.com/codesession/codesession/actors/store"
)

// StoreWatch reads a session's Mark from a store (the embedded runtime's,
// rt.Store()): its last persisted seq and that event's type.
func StoreWatch(st store.Store) WatchFunc {
	return func(ctx context.Context, sid string) (Mark, error) {
		seq, err := st.LastSeq(ctx, sid)
		if err != nil || seq == 0 {
			return Mark{Seq: seq}, err
		}
		evs, err := st.ReadEvents(ctx, sid, seq-1, 1)
		if err != nil || len(evs) == 0 {
			return Mark{Seq: seq}, err
		}
		return Mark{Seq: seq, Last: evs[0].Event.Type}, nil
	}
}
