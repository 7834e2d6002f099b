package filestore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store/storetest"
	"github.com/codesession/codesession/messages"
)

// stdLine is an event's line as encoding/json writes it (the store's
// encoder before appendEventLine, and its fallback).
func stdLine(ev *messages.PersistedEvent) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(ev)
	return buf.Bytes(), err
}

// requireSameLine: appendEventLine writes what encoding/json writes, or
// leaves the event to it (a nested record, or a value it refuses).
func requireSameLine(t *testing.T, ev *messages.PersistedEvent) (handled bool) {
	t.Helper()
	want, werr := stdLine(ev)
	got, ok := appendEventLine([]byte("prefix"), ev)
	require.True(t, bytes.HasPrefix(got, []byte("prefix")), "what b held is kept")
	got = got[len("prefix"):]
	if !ok {
		require.Empty(t, got, "nothing appended when the event is left to encoding/json")
		require.True(t, ev.Event.Containment != nil || werr != nil, "left to encoding/json without need: %+v", ev)
		return false
	}
	require.NoError(t, werr, "appendEventLine encoded what encoding/json refuses: %+v", ev)
	require.Equal(t, string(want), string(got))
	return true
}

// nasty is a string with everything encoding/json escapes or replaces.
const nasty = "a \"q\" \\ </b>&amp; \n\r\t\b\f \x00\x01\x1f\x7f é ü 中 \u2028\u2029 \xff\xfe end"

// TestAppendEventLineEveryField sets each field of messages.Event alone
// (so a field added to Event and not to appendEventLine fails here) and
// compares the line with encoding/json's.
func TestAppendEventLineEveryField(t *testing.T) {
	at := time.Date(2026, 12, 6, 13, 4, 5, 123456789, time.FixedZone("x", 3600+1800))
	rt := reflect.TypeFor[messages.Event]()
	handled := 0
	for i := range rt.NumField() {
		f := rt.Field(i)
		for _, v := range fieldValues(t, rt, f) {
			ev := messages.PersistedEvent{Seq: 42, At: at, Turn: 3, Event: messages.Event{Type: messages.EvText}}
			reflect.ValueOf(&ev.Event).Elem().Field(i).Set(reflect.ValueOf(v).Convert(f.Type))
			if requireSameLine(t, &ev) {
				handled++
			}
		}
	}
	assert.Greater(t, handled, 40, "most fields are encoded by hand")

	// the events the store tests use, every field set at once, zero times
	for _, ev := range storetest.NewEvents(1, 10) {
		requireSameLine(t, &ev)
	}
	all := messages.PersistedEvent{Seq: math.MaxUint64, Turn: -1}
	rv := reflect.ValueOf(&all.Event).Elem()
	for i := range rt.NumField() {
		switch f := rv.Field(i); f.Kind() {
		case reflect.String:
			f.SetString(nasty)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int:
			f.SetInt(int64(i))
		case reflect.Float64:
			f.SetFloat(float64(i) / 3)
		case reflect.Slice:
			f.SetBytes([]byte(`[1, {"x": "y"}]`))
		}
	}
	require.True(t, requireSameLine(t, &all))

	// what encoding/json refuses is left to it (and refused there)
	for _, ev := range []messages.PersistedEvent{
		{Seq: 1, At: at, Event: messages.Event{Type: messages.EvText, CostUSD: math.NaN()}},
		{Seq: 1, At: at, Event: messages.Event{Type: messages.EvText, TotalCostUSD: math.Inf(1)}},
		{Seq: 1, At: at, Event: messages.Event{Type: messages.EvToolUse, Input: json.RawMessage(`{"a":`)}},
		{Seq: 1, At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Event: messages.Event{Type: messages.EvText}},
	} {
		assert.False(t, requireSameLine(t, &ev))
	}
}

// TestAppendEventLineRealLogs: the lines of a real session's log (a
// `bench sessions` session, written by encoding/json: tool calls, a
// clarification, guidance, diffs, usage, the release) decode and encode
// back to the very same bytes.
func TestAppendEventLineRealLogs(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "bench-session.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	n, handled := 0, 0
	for sc.Scan() {
		var ev messages.PersistedEvent
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev))
		if requireSameLine(t, &ev) {
			handled++
			got, _ := appendEventLine(nil, &ev)
			require.Equal(t, string(sc.Bytes())+"\n", string(got))
		}
		n++
	}
	require.NoError(t, sc.Err())
	require.Equal(t, 76, n)
	assert.Equal(t, n, handled, "every line of a session without a containment record is encoded by hand")
}

// fieldValues is what the field-by-field tests set the field f of the
// struct rt to: awkward values of its kind. A kind without values here
// stops the test, so a new field of a new kind is noticed.
func fieldValues(t *testing.T, rt reflect.Type, f reflect.StructField) []any {
	t.Helper()
	switch f.Type.Kind() {
	case reflect.String:
		return []any{"x", nasty}
	case reflect.Bool:
		return []any{true}
	case reflect.Int, reflect.Int64:
		return []any{7, -3, math.MaxInt64}
	case reflect.Float64:
		return []any{0.01, 1e-7, 123456789.125, 1e21, -2.5e-9, 5e300}
	case reflect.Slice:
		if f.Type == reflect.TypeFor[json.RawMessage]() {
			return []any{json.RawMessage(`{ "a" : [1, 2,  3], "b":"<&>\u2028" , "c": null }`), json.RawMessage(`"s"`)}
		}
		return []any{reflect.MakeSlice(f.Type, 0, 0).Interface(), reflect.MakeSlice(f.Type, 2, 2).Interface()}
	case reflect.Pointer:
		return []any{reflect.New(f.Type.Elem()).Interface()}
	}
	t.Fatalf("%s.%s: kind %s not covered by this test", rt.Name(), f.Name, f.Type.Kind())
	return nil
}

// setEachField calls try with a copy of zero in which one field (of the
// struct zero points to) is set, for each field and each value this test
// has for its kind, so a field added to the struct and not to the hand
// encoding fails the comparison try makes.
func setEachField(t *testing.T, zero any, try func(v any)) {
	t.Helper()
	rt := reflect.TypeOf(zero).Elem()
	for i := range rt.NumField() {
		f := rt.Field(i)
		for _, v := range fieldValues(t, rt, f) {
			c := reflect.New(rt)
			c.Elem().Field(i).Set(reflect.ValueOf(v).Convert(f.Type))
			try(c.Interface())
		}
	}
}

// TestAppendEventLineUsageAndDiff: a turn's usage and diff, each field
// alone and all at once, as encoding/json writes them.
func TestAppendEventLineUsageAndDiff(t *testing.T) {
	at := time.Date(2026, 12, 6, 13, 4, 5, 123456789, time.UTC)
	line := func(e messages.Event) {
		ev := messages.PersistedEvent{Seq: 9, At: at, Turn: 2, Event: e}
		require.True(t, requireSameLine(t, &ev), "%+v", e)
	}
	setEachField(t, &messages.Usage{}, func(v any) {
		line(messages.Event{Type: messages.EvTurnEnd, Usage: v.(*messages.Usage)})
	})
	setEachField(t, &messages.TurnDiff{}, func(v any) {
		line(messages.Event{Type: messages.EvTurnDiff, Diff: v.(*messages.TurnDiff)})
	})
	setEachField(t, &messages.FileChange{}, func(v any) {
		d := &messages.TurnDiff{Source: messages.DiffGit, Files: []messages.FileChange{*v.(*messages.FileChange), {Path: "b", Status: "M"}}}
		line(messages.Event{Type: messages.EvTurnDiff, Diff: d})
	})
	line(messages.Event{Type: messages.EvTurnEnd, State: messages.TurnState("done"), CostUSD: 0.25, Fatal: true, Note: "n",
		Usage: &messages.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: -4}})
	line(messages.Event{Type: messages.EvTurnDiff, Child: nasty, ReleaseReason: "r", Diff: &messages.TurnDiff{
		Source: messages.DiffToolEvents, FilesOmitted: 3, Summary: nasty, UnifiedDiff: nasty, Truncated: true, Warning: nasty,
		Files: []messages.FileChange{{Path: nasty, OldPath: nasty, Status: "R", Insertions: 5, Deletions: 6, Binary: true}}}})
	// the containment record is still left to encoding/json
	ev := messages.PersistedEvent{Seq: 1, At: at, Event: messages.Event{Type: messages.EvStarted, Containment: &messages.Applied{}}}
	require.False(t, requireSameLine(t, &ev))
}

// FuzzAppendEventLine: for any strings, numbers, times and inputs, the
// hand-written line is encoding/json's (or the event is left to it).
func FuzzAppendEventLine(f *testing.F) {
	f.Add(uint64(1), int64(0), 0, "text", nasty, "tool", []byte(`{"a":1}`), 0.5, true, 3)
	f.Add(uint64(1<<63), int64(-1<<62), -5, "", "\u2028", "", []byte(` [ ] `), 1e-7, false, 0)
	f.Add(uint64(9), int64(1e18), 1, "\xff", "<>&", "\x00", []byte(`"\u00e9"`), 1e21, true, -1)
	f.Fuzz(func(t *testing.T, seq uint64, nanos int64, turn int, text, output, tool string, input []byte, cost float64, flag bool, n int) {
		ev := messages.PersistedEvent{Seq: seq, At: time.Unix(0, nanos).In(time.FixedZone("z", turn%50*900)), Turn: turn,
			Event: messages.Event{Type: messages.EventType(tool), Text: text, Delta: flag, ToolName: tool, Input: input,
				Output: output, IsError: !flag, OriginalBytes: n, NumTurns: -n, CostUSD: cost, TotalCostUSD: -cost,
				Reason: text + output, Note: output}}
		if flag {
			ev.Event.Usage = &messages.Usage{InputTokens: nanos, OutputTokens: int64(n), CacheReadTokens: int64(turn)}
			ev.Event.Diff = &messages.TurnDiff{Source: messages.DiffSource(tool), Summary: text, Warning: output, FilesOmitted: n,
				Files: []messages.FileChange{{Path: text, OldPath: output, Status: tool, Insertions: turn, Deletions: -n, Binary: !flag}}}
		} else if n%2 == 0 {
			ev.Event.Diff = &messages.TurnDiff{UnifiedDiff: text}
		}
		requireSameLine(t, &ev)
	})
}

// BenchmarkEventLine: a real session's events encoded as log lines by
// appendEventLine and by encoding/json's Encoder (what the store used
// before), in the same run: ns/event and allocations.
func BenchmarkEventLine(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "bench-session.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	var evs []messages.PersistedEvent
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var ev messages.PersistedEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			b.Fatal(err)
		}
		evs = append(evs, ev)
	}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = buf[:0]
			for i := range evs {
				line, ok := appendEventLine(buf, &evs[i])
				if !ok {
					w, _ := stdLine(&evs[i])
					line = append(buf, w...)
				}
				buf = line
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			for i := range evs {
				if err := enc.Encode(&evs[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
	})
}
