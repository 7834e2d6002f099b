package session

import (
	"unicode/utf8"

	"github.com/codesession/codesession/messages"
)

// Diet limits: the round history is what a driver re-reads every turn, so it
// is kept small and pre-truncated; pinned entries survive any eviction.
const (
	DietMaxEntries   = 64
	DietMaxBytes     = 16 << 10
	DietMaxEntryText = 300
)

// Diet is the round-history diet: a bounded, compaction-immune account of
// what the driven agent did. Eviction drops the oldest unpinned entries
// first; answered clarifications, denies and user guidance are pinned and
// never dropped.
type Diet struct {
	entries []messages.HistoryEntry
	bytes   int
}

// Add appends an entry, cutting its text, then evicts to the limits.
func (d *Diet) Add(e messages.HistoryEntry) {
	e.Text = cutText(e.Text, DietMaxEntryText)
	d.entries = append(d.entries, e)
	d.bytes += len(e.Text)
	d.evict()
}

func (d *Diet) evict() {
	for len(d.entries) > DietMaxEntries || d.bytes > DietMaxBytes {
		i := -1
		for j, e := range d.entries {
			if !e.Pinned {
				i = j
				break
			}
		}
		if i < 0 {
			return // only pinned entries left: they are never dropped
		}
		d.bytes -= len(d.entries[i].Text)
		d.entries = append(d.entries[:i], d.entries[i+1:]...)
	}
}

// Snapshot returns a copy of the entries, oldest first.
func (d *Diet) Snapshot() []messages.HistoryEntry {
	return append([]messages.HistoryEntry(nil), d.entries...)
}

// Len is the number of entries held.
func (d *Diet) Len() int { return len(d.entries) }

// cutText cuts s to at most max bytes on a rune boundary, marking the cut.
func cutText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = "…"
	cut := max - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
