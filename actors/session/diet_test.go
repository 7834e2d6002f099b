package session

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

func entry(i int, pinned bool) messages.HistoryEntry {
	return messages.HistoryEntry{Turn: i, Kind: messages.HistAction, Text: fmt.Sprintf("e%d", i), Pinned: pinned}
}

func texts(d *Diet) []string {
	var s []string
	for _, e := range d.Snapshot() {
		s = append(s, e.Text)
	}
	return s
}

func TestDietKeepsOrderUnderTheLimits(t *testing.T) {
	var d Diet
	for i := range 5 {
		d.Add(entry(i, i%2 == 0))
	}
	assert.Equal(t, []string{"e0", "e1", "e2", "e3", "e4"}, texts(&d))
	assert.Equal(t, 5, d.Len())
}

func TestDietEvictsOldestUnpinnedPastMaxEntries(t *testing.T) {
	var d Diet
	d.Add(entry(0, true))
	d.Add(entry(1, false))
	d.Add(entry(2, true))
	d.Add(entry(3, false))
	for i := 4; i < DietMaxEntries; i++ {
		d.Add(entry(i, false))
	}
	require.Equal(t, DietMaxEntries, d.Len(), "at the limit nothing is dropped")

	d.Add(entry(DietMaxEntries, false))
	require.Equal(t, DietMaxEntries, d.Len())
	got := texts(&d)
	assert.Equal(t, []string{"e0", "e2", "e3"}, got[:3], "e1, the oldest unpinned, went first; pinned e0 stayed")

	d.Add(entry(DietMaxEntries+1, false))
	got = texts(&d)
	assert.Equal(t, []string{"e0", "e2", "e4"}, got[:3], "then e3")
	assert.Equal(t, fmt.Sprintf("e%d", DietMaxEntries+1), got[len(got)-1], "the newest is kept")
}

func TestDietEvictsPastMaxBytes(t *testing.T) {
	var d Diet
	big := strings.Repeat("x", DietMaxEntryText) // each entry is exactly at the text limit
	n := DietMaxBytes / DietMaxEntryText         // entries that fit
	require.Less(t, n+1, DietMaxEntries, "the byte limit, not the count, must be what fires")
	d.Add(messages.HistoryEntry{Turn: 0, Kind: messages.HistDeny, Text: "pinned " + big[:10], Pinned: true})
	for i := 1; i <= n+1; i++ {
		d.Add(messages.HistoryEntry{Turn: i, Kind: messages.HistAction, Text: big})
	}
	total := 0
	for _, e := range d.Snapshot() {
		total += len(e.Text)
	}
	assert.LessOrEqual(t, total, DietMaxBytes)
	assert.Equal(t, total, d.bytes, "the byte count tracks the entries")
	snap := d.Snapshot()
	assert.True(t, snap[0].Pinned, "the pinned entry survives")
	assert.Equal(t, 2, snap[1].Turn, "the oldest unpinned (turn 1) was dropped")
	assert.Equal(t, n+1, snap[len(snap)-1].Turn)
}

func TestDietNeverDropsPinned(t *testing.T) {
	var d Diet
	for i := range DietMaxEntries + 10 {
		d.Add(entry(i, true))
	}
	assert.Equal(t, DietMaxEntries+10, d.Len(), "pinned entries are over the limit and all kept")

	// an unpinned entry added now is the only one that can go, so it goes at once
	d.Add(entry(1000, false))
	assert.Equal(t, DietMaxEntries+10, d.Len())
	assert.NotContains(t, texts(&d), "e1000")
	for _, e := range d.Snapshot() {
		assert.True(t, e.Pinned)
	}

	// the same over the byte limit
	var b Diet
	big := strings.Repeat("p", DietMaxEntryText)
	for range DietMaxBytes/DietMaxEntryText + 5 {
		b.Add(messages.HistoryEntry{Kind: messages.HistDeny, Text: big, Pinned: true})
	}
	assert.Equal(t, DietMaxBytes/DietMaxEntryText+5, b.Len())
	assert.Greater(t, b.bytes, DietMaxBytes)
}

func TestDietCutsEntryText(t *testing.T) {
	cases := []struct {
		name string
		text string
	}{
		{"ascii", strings.Repeat("a", 1000)},
		{"two-byte runes", strings.Repeat("é", 400)},
		{"three-byte runes", strings.Repeat("世", 400)},
		{"four-byte runes", strings.Repeat("🙂", 400)},
		{"mixed offset", "a" + strings.Repeat("世", 400)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d Diet
			d.Add(messages.HistoryEntry{Kind: messages.HistAction, Text: tc.text})
			got := d.Snapshot()[0].Text
			assert.LessOrEqual(t, len(got), DietMaxEntryText)
			assert.True(t, utf8.ValidString(got), "cut on a rune boundary")
			assert.True(t, strings.HasSuffix(got, "…"), "the cut is marked")
			body := strings.TrimSuffix(got, "…")
			assert.True(t, strings.HasPrefix(tc.text, body))
			// nothing more than the partial rune was lost
			assert.Greater(t, len(body), DietMaxEntryText-len("…")-utf8.UTFMax)
			assert.Equal(t, len(got), d.bytes)
		})
	}
}

func TestCutText(t *testing.T) {
	assert.Equal(t, "short", cutText("short", 10))
	assert.Equal(t, "exactly10!", cutText("exactly10!", 10), "at the limit: untouched")
	assert.Equal(t, "exactly…", cutText("exactly10!!", 10))
	assert.Equal(t, "…", cutText("abcd", 3))
	assert.Equal(t, "…", cutText("世世", 4), "no room for a whole rune")
	assert.Equal(t, "", cutText("", 3))
}

func TestDietSnapshotIsACopy(t *testing.T) {
	var d Diet
	d.Add(entry(1, false))
	s := d.Snapshot()
	s[0].Text = "changed"
	assert.Equal(t, "e1", d.Snapshot()[0].Text)
	var empty Diet
	assert.Empty(t, empty.Snapshot())
}

func TestRoundHistoryInResultsIsTheDiet(t *testing.T) {
	h := newHarness(t)
	h.startTurn1()
	h.agent(1, toolUse("t1", "Bash", `{"command":"`+strings.Repeat("y", 500)+`"}`))
	h.agent(1, clarify("c1", "Bash", `{}`))
	_, err := h.c.Answer(h.tick(), messages.Answer{ClarificationID: "c1", Decision: messages.DecisionDeny, Reason: "no"})
	require.NoError(t, err)
	h.endTurn("done", nil)
	r := h.readNow(1, false)
	require.Len(t, r.Result.RoundHistory, 3)
	act := r.Result.RoundHistory[0]
	assert.Equal(t, messages.HistAction, act.Kind)
	assert.True(t, strings.HasPrefix(act.Text, `Bash {"command":"yyy`))
	assert.LessOrEqual(t, len(act.Text), DietMaxEntryText)
	assert.Equal(t, messages.HistoryEntry{Turn: 1, Kind: messages.HistDeny, Text: "Bash denied: no", Pinned: true}, r.Result.RoundHistory[1])
	assert.Equal(t, messages.HistoryEntry{Turn: 1, Kind: messages.HistTurn, Text: "turn_complete; no diff captured: done"}, r.Result.RoundHistory[2])

	// the result holds a copy: later turns do not change it
	before := append([]messages.HistoryEntry(nil), r.Result.RoundHistory...)
	require.NoError(t, h.c.Guide(h.tick(), messages.Guide{Text: "more"}))
	h.c.BaselineReady(h.tick(), 2)
	h.agent(2, toolUse("t2", "Read", `{}`))
	assert.Equal(t, before, r.Result.RoundHistory)
}

func TestPinnedHistorySurvivesALongSession(t *testing.T) {
	h := newHarness(t)
	h.startTurn1()
	h.agent(1, clarify("c1", "Bash", `{"command":"curl"}`))
	_, err := h.c.Answer(h.tick(), messages.Answer{ClarificationID: "c1", Decision: messages.DecisionDeny, Reason: "no network"})
	require.NoError(t, err)
	require.NoError(t, h.c.Guide(h.tick(), messages.Guide{Text: "keep the API stable", Source: messages.SourceUser}))
	for i := range 3 * DietMaxEntries {
		h.agent(1, toolUse(fmt.Sprint(i), "Read", fmt.Sprintf(`{"file_path":"f%d.go"}`, i)))
	}
	h.endTurn("", nil)
	r := h.readNow(1, false)
	hist := r.Result.RoundHistory
	assert.Len(t, hist, DietMaxEntries)
	assert.Equal(t, messages.HistoryEntry{Turn: 1, Kind: messages.HistDeny, Text: "Bash denied: no network", Pinned: true}, hist[0])
	assert.Equal(t, messages.HistoryEntry{Turn: 1, Kind: messages.HistGuidance, Text: "user: keep the API stable", Pinned: true}, hist[1])
	assert.Equal(t, messages.HistTurn, hist[len(hist)-1].Kind, "the newest entry is the turn summary")
	assert.Equal(t, fmt.Sprintf(`Read {"file_path":"f%d.go"}`, 3*DietMaxEntries-1), hist[len(hist)-2].Text)
}
