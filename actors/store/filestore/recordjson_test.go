package filestore

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// recordEncoderCovers is every field appendRecordJSON writes, by struct:
// TestRecordEncoderKnowsEveryField fails when one of these structs gets a
// field this list (and so the encoder) does not name. A field added here
// must be added to appendRecordJSON too; TestAppendRecordJSONEveryField
// then shows whether it is written as encoding/json writes it.
var recordEncoderCovers = map[reflect.Type][]string{
	reflect.TypeFor[messages.SessionRecord](): {"SessionID", "BackendID", "Cwd", "Model", "Effort", "MaxPosture", "Posture",
		"MaxRounds", "MaxCostUSD", "AllowedTools", "TaskBrief", "TaskTags", "Status", "CreatedAt", "UpdatedAt",
		"RoundsElapsed", "CostUSD", "Runs", "Outcome", "OutcomeNote", "Version", "Worktree", "Provision"},
	reflect.TypeFor[messages.Run](): {"StartedAt", "ExternalSessionID", "OwnerScopeID", "Runtime", "Containment"},
	reflect.TypeFor[messages.Applied](): {"LandlockABI", "Writable", "ReadDenied", "ReadAllowed", "ReadsOpen", "Network",
		"ConnectTCP", "Relayed", "BestEffort"},
	reflect.TypeFor[messages.Worktree]():  {"Path", "Branch", "Repo", "Base"},
	reflect.TypeFor[messages.Provision](): {"CapabilityIDs", "Applied", "Ignored", "Tiers", "AwaitingApproval", "TokenScopeNotes", "Notes", "Manifest"},
}

// TestRecordEncoderKnowsEveryField: every struct a record holds is in
// recordEncoderCovers with exactly its fields, in order, and no type in
// it encodes itself (a MarshalJSON or MarshalText the encoder would have
// to call) but time.Time, which appendRecordJSON writes as its
// MarshalJSON does.
func TestRecordEncoderKnowsEveryField(t *testing.T) {
	timeType := reflect.TypeFor[time.Time]()
	seen := map[reflect.Type]bool{}
	var walk func(rt reflect.Type, path string)
	walk = func(rt reflect.Type, path string) {
		if rt == timeType {
			return
		}
		for _, m := range []reflect.Type{reflect.TypeFor[json.Marshaler](), reflect.TypeFor[encoding.TextMarshaler]()} {
			require.False(t, rt.Implements(m) || reflect.PointerTo(rt).Implements(m),
				"%s (%s) implements %s: appendRecordJSON must call it or leave the record to encoding/json", path, rt, m)
		}
		switch rt.Kind() {
		case reflect.Pointer, reflect.Slice:
			walk(rt.Elem(), path+"[]")
		case reflect.Map:
			require.Equal(t, reflect.String, rt.Key().Kind(), "%s: only string keys are encoded", path)
			walk(rt.Elem(), path+"{}")
		case reflect.Struct:
			if seen[rt] {
				return
			}
			seen[rt] = true
			covered, ok := recordEncoderCovers[rt]
			require.True(t, ok, "%s: struct %s is not one appendRecordJSON writes", path, rt)
			var fields []string
			for i := range rt.NumField() {
				f := rt.Field(i)
				fields = append(fields, f.Name)
				walk(f.Type, path+"."+f.Name)
			}
			require.Equal(t, covered, fields, "the fields of %s changed: teach appendRecordJSON (and recordEncoderCovers) the new ones", rt)
		case reflect.String, reflect.Int, reflect.Bool, reflect.Float64, reflect.Uint16:
		default:
			t.Fatalf("%s: kind %s is not one appendRecordJSON writes", path, rt.Kind())
		}
	}
	walk(reflect.TypeFor[messages.SessionRecord](), "SessionRecord")
	require.Len(t, seen, len(recordEncoderCovers), "a struct in recordEncoderCovers is no longer in a record")
}

// requireSameRecord: appendRecordJSON writes what json.Marshal writes, or
// leaves the record to it because json.Marshal refuses it; encodeRecord's
// and encodeRecordFrame's bytes are json.Marshal's with a newline.
func requireSameRecord(t testing.TB, rec *messages.SessionRecord) (handled bool) {
	t.Helper()
	want, werr := json.Marshal(rec)
	got, ok := appendRecordJSON([]byte("prefix"), rec)
	require.Equal(t, "prefix", string(got[:len("prefix")]), "what b held is kept")
	got = got[len("prefix"):]
	if !ok {
		require.Empty(t, got, "nothing appended when the record is left to encoding/json")
		require.Error(t, werr, "left to encoding/json without need: %+v", rec)
		_, err := encodeRecord("test", rec)
		require.Error(t, err)
		assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
		return false
	}
	require.NoError(t, werr, "appendRecordJSON encoded what encoding/json refuses: %+v", rec)
	require.Equal(t, string(want), string(got))
	data, err := encodeRecord("test", rec)
	require.NoError(t, err)
	require.Equal(t, string(want)+"\n", string(data))
	if len(rec.SessionID) > 255 {
		// a frame holds a session id of at most 255 bytes (its length is
		// one byte); Create and PutMeta refuse a record whose id is not a
		// valid one (cs_ and 64 hex digits) before they encode it, so
		// such an id never reaches encodeRecordFrame (the fuzz target
		// found this: testdata/fuzz/FuzzAppendRecordJSON/7100b1c6bb4b76b0)
		return true
	}
	frame, body, err := encodeRecordFrame("test", rec)
	require.NoError(t, err)
	require.Equal(t, string(encodeFrame(frameRecord, rec.SessionID, data)), string(frame))
	require.Equal(t, string(data), string(body))
	return true
}

// recordValues are the values a field of type rt is tried with: for a
// struct, its zero value and then each of its fields set alone to each of
// its values (recursively: a run's containment's ports alone), so a field
// the encoder gets wrong, or does not know, shows on its own.
func recordValues(t *testing.T, rt reflect.Type) []reflect.Value {
	vals := func(vs ...any) []reflect.Value {
		out := make([]reflect.Value, len(vs))
		for i, v := range vs {
			out[i] = reflect.ValueOf(v).Convert(rt)
		}
		return out
	}
	switch rt {
	case reflect.TypeFor[time.Time]():
		return vals(recordTimes()...)
	}
	switch rt.Kind() {
	case reflect.String:
		return vals("", "x", nasty, `<a href="x?a=1&b=2">`, "\u2028\u2029", "\xff\x80", "\x00\x7f")
	case reflect.Int:
		return vals(0, 7, -3, math.MaxInt64, math.MinInt64)
	case reflect.Bool:
		return vals(false, true)
	case reflect.Uint16:
		return vals(uint16(0), uint16(22), uint16(math.MaxUint16))
	case reflect.Float64:
		return vals(recordFloats()...)
	case reflect.Slice:
		out := []reflect.Value{reflect.Zero(rt), reflect.MakeSlice(rt, 0, 0)}
		elems := recordValues(t, rt.Elem())
		for _, e := range elems {
			s := reflect.MakeSlice(rt, 1, 1)
			s.Index(0).Set(e)
			out = append(out, s)
		}
		all := reflect.MakeSlice(rt, 0, len(elems))
		out = append(out, reflect.Append(all, elems...))
		return out
	case reflect.Map:
		m := reflect.MakeMap(rt)
		for _, k := range []string{"zeta", "alpha", nasty, "<&>", "", "Alpha", "\u2028"} {
			m.SetMapIndex(reflect.ValueOf(k), reflect.ValueOf("T2<"+k+">"))
		}
		one := reflect.MakeMap(rt)
		one.SetMapIndex(reflect.ValueOf("a"), reflect.ValueOf(""))
		return []reflect.Value{reflect.Zero(rt), reflect.MakeMap(rt), one, m}
	case reflect.Pointer:
		out := []reflect.Value{reflect.Zero(rt)}
		for _, e := range recordValues(t, rt.Elem()) {
			p := reflect.New(rt.Elem())
			p.Elem().Set(e)
			out = append(out, p)
		}
		return out
	case reflect.Struct:
		out := []reflect.Value{reflect.Zero(rt)}
		for i := range rt.NumField() {
			for _, fv := range recordValues(t, rt.Field(i).Type) {
				v := reflect.New(rt).Elem()
				v.Field(i).Set(fv)
				out = append(out, v)
			}
		}
		return out
	}
	t.Fatalf("kind %s (%s) not covered by this test", rt.Kind(), rt)
	return nil
}

// recordTimes are times in every shape time.Time.MarshalJSON writes: zero,
// UTC, zones east and west with minutes, whole seconds and every width of
// fraction, a monotonic reading, the years at the ends of its range.
func recordTimes() []any {
	east := time.FixedZone("east", 5*3600+45*60)
	west := time.FixedZone("west", -(9*3600 + 30*60))
	return []any{
		time.Time{},
		time.Now(), // with a monotonic reading
		time.Now().UTC(),
		time.Date(2026, 12, 6, 13, 4, 5, 0, time.UTC),
		time.Date(2026, 12, 6, 13, 4, 5, 100_000_000, east),
		time.Date(2026, 1, 2, 3, 4, 5, 123_456_789, west),
		time.Date(2026, 1, 2, 3, 4, 5, 120, time.Local),
		time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.FixedZone("", 23*3600+59*60)),
		time.Unix(1, 0).In(time.FixedZone("", -1)), // a seconds offset, cut to minutes
	}
}

// recordFloats are floats in every format encoding/json picks: plain,
// exponent below 1e-6 and from 1e21, the edges of both, negative zero.
func recordFloats() []any {
	return []any{0.0, math.Copysign(0, -1), 0.01, 1.5, -2, 1e-6, 9.99e-7, 1e-7, -2.5e-9, 123456789.125,
		1e20, 999999999999999999999.0, 1e21, 1.5e21, 5e300, math.SmallestNonzeroFloat64, math.MaxFloat64, 0.1 + 0.2}
}

// TestAppendRecordJSONEveryField: each field of a record and of what it
// nests, set alone to each of its values (empty and nil lists, zero values
// omitempty drops, HTML and control characters, invalid UTF-8, floats and
// times in every format), encodes as json.Marshal encodes it.
func TestAppendRecordJSONEveryField(t *testing.T) {
	values := recordValues(t, reflect.TypeFor[messages.SessionRecord]())
	require.Greater(t, len(values), 300)
	for _, v := range values {
		rec := v.Interface().(messages.SessionRecord)
		require.True(t, requireSameRecord(t, &rec))
	}
}

// TestAppendRecordJSONRandom: records with every field set at random (each
// zero a third of the time), whole runs, containment, worktree and
// provision included, encode as json.Marshal encodes them.
func TestAppendRecordJSONRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (rand.NewPCG(35, seed) repeats the run)", seed)
		}
	})
	rng := rand.New(rand.NewPCG(35, seed))
	full := 0
	for range 3000 {
		var rec messages.SessionRecord
		fillRandom(t, rng, reflect.ValueOf(&rec).Elem())
		requireSameRecord(t, &rec)
		if rec.Provision != nil && rec.Worktree != nil && len(rec.Runs) > 0 {
			full++
		}
	}
	assert.Greater(t, full, 100, "records with every part set")
}

// fillRandom sets v (and what it holds) at random from recordValues'
// values, a third of them left zero.
func fillRandom(t *testing.T, rng *rand.Rand, v reflect.Value) {
	if rng.IntN(3) == 0 && v.Kind() != reflect.Struct {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			ts := recordTimes()
			v.Set(reflect.ValueOf(ts[rng.IntN(len(ts))]))
			return
		}
		for i := range v.NumField() {
			fillRandom(t, rng, v.Field(i))
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillRandom(t, rng, p.Elem())
		v.Set(p)
	case reflect.Slice:
		n := rng.IntN(4)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fillRandom(t, rng, s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := range rng.IntN(20) {
			m.SetMapIndex(reflect.ValueOf(fmt.Sprintf("cap-%d<%d>", rng.IntN(100), i)), reflect.ValueOf("T"+fmt.Sprint(i)))
		}
		v.Set(m)
	default:
		vs := recordValues(t, v.Type())
		v.Set(vs[rng.IntN(len(vs))])
	}
}

// TestAppendRecordJSONRefuses: what json.Marshal refuses (a time outside
// RFC 3339, a NaN or infinite cost) is left to it, and encodeRecord fails
// with invalid as it did.
func TestAppendRecordJSONRefuses(t *testing.T) {
	base := messages.SessionRecord{SessionID: "cs_x", BackendID: "b", Status: messages.StatusRunning}
	for _, mod := range []func(r *messages.SessionRecord){
		func(r *messages.SessionRecord) { r.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(r *messages.SessionRecord) { r.UpdatedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(r *messages.SessionRecord) { r.UpdatedAt = time.Unix(0, 0).In(time.FixedZone("", 24*3600)) },
		func(r *messages.SessionRecord) { r.MaxCostUSD = math.NaN() },
		func(r *messages.SessionRecord) { r.CostUSD = math.Inf(-1) },
		func(r *messages.SessionRecord) {
			r.Runs = []messages.Run{{}, {StartedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}
		},
	} {
		rec := base
		mod(&rec)
		assert.False(t, requireSameRecord(t, &rec))
	}
}

// TestEncodeRecordAllocs: a record's encoding is one allocation, the slice
// the session keeps (encoding/json took a dozen); its frame for a commit
// of its own is one too, the frame, which the session keeps the body of.
func TestEncodeRecordAllocs(t *testing.T) {
	rec := benchRecord()
	encodeRecord("test", &rec) // the scratch buffer, grown once
	assert.LessOrEqual(t, testing.AllocsPerRun(200, func() {
		if _, err := encodeRecord("test", &rec); err != nil {
			t.Fatal(err)
		}
	}), 1.0)
	assert.LessOrEqual(t, testing.AllocsPerRun(200, func() {
		if _, _, err := encodeRecordFrame("test", &rec); err != nil {
			t.Fatal(err)
		}
	}), 1.0)
}

// TestAppendRecordJSONRealRecord: a real session's meta.json (a `bench
// sessions` session's, as main's store wrote it with encoding/json before
// appendRecordJSON: indented from the compact encoding) decodes and
// encodes back to that compact encoding, and writeMetaFile's indenting of
// it is the very file.
func TestAppendRecordJSONRealRecord(t *testing.T) {
	meta, err := os.ReadFile(filepath.Join("testdata", "bench-meta.json"))
	require.NoError(t, err)
	rec := benchMetaRecord(t)
	require.True(t, requireSameRecord(t, &rec))
	var compact bytes.Buffer
	require.NoError(t, json.Compact(&compact, meta))
	got, ok := appendRecordJSON(nil, &rec)
	require.True(t, ok)
	require.Equal(t, compact.String(), string(got))
	var indented bytes.Buffer
	require.NoError(t, json.Indent(&indented, got, "", "  "))
	require.Equal(t, string(bytes.TrimSpace(meta)), indented.String())
}

// benchMetaRecord is testdata/bench-meta.json's record.
func benchMetaRecord(t testing.TB) messages.SessionRecord {
	meta, err := os.ReadFile(filepath.Join("testdata", "bench-meta.json"))
	require.NoError(t, err)
	var rec messages.SessionRecord
	require.NoError(t, json.Unmarshal(meta, &rec))
	require.NotEmpty(t, rec.Runs)
	return rec
}

// benchRecord is a record as a `bench sessions` session has it mid-load:
// a run with its containment, a provision, a worktree.
func benchRecord() messages.SessionRecord {
	at := time.Date(2026, 12, 6, 13, 4, 5, 123456789, time.UTC)
	return messages.SessionRecord{SessionID: "cs_01JEXAMPLE0000000000000000", BackendID: "claude-code", Cwd: "/home/user/src/project",
		Model: "sonnet", Effort: "medium", MaxPosture: messages.PostureDefault, Posture: messages.PostureDefault, MaxRounds: 40, MaxCostUSD: 2.5,
		AllowedTools: []string{"Read", "Edit", "Bash(go test:*)"}, TaskBrief: "Fix the flaky test in the store & make it deterministic <issue 35>.",
		TaskTags: []string{"bench", "store"}, Status: messages.StatusRunning, CreatedAt: at, UpdatedAt: at.Add(3 * time.Second),
		RoundsElapsed: 3, CostUSD: 0.0123,
		Runs: []messages.Run{{StartedAt: at, ExternalSessionID: "5f0c6a2e-1b7d-4c11-9a34-6f1e2d3c4b5a", OwnerScopeID: "scope_1", Runtime: "rt_7",
			Containment: &messages.Applied{LandlockABI: 5, Writable: []string{"/home/user/src/project", "/tmp"}, ReadDenied: []string{"/home/user/.ssh"},
				Network: "model-only", ConnectTCP: []uint16{443}}}},
		Version:   messages.RecordVersion,
		Worktree:  &messages.Worktree{Path: "/home/user/.codesession/worktrees/01jexample", Branch: "codesession/01jexample", Repo: "/home/user/src/project", Base: "c6ce979"},
		Provision: &messages.Provision{CapabilityIDs: []string{"skill:go", "mcp:github"}, Applied: []string{"skill:go"}, Ignored: []string{"mcp:github"}, Tiers: map[string]string{"skill:go": "T1", "mcp:github": "T2"}, Notes: []string{"mcp:github: awaiting approval"}},
	}
}

// FuzzAppendRecordJSON: for any strings, numbers and times in any field of
// a record and what it nests, the hand-written encoding is json.Marshal's
// (or the record is left to it).
func FuzzAppendRecordJSON(f *testing.F) {
	f.Add("cs_x", nasty, "<a>&", int64(0), int64(0), 0, 0.5, -0.0, true, uint16(443), "T1")
	f.Add("", "\u2028", "\xff", int64(-1<<62), int64(1e9), -5, 1e-7, 1e21, false, uint16(0), "")
	f.Add("\x00", "é", "\\\"", int64(1e18), int64(-1), 1<<40, math.MaxFloat64, 5e-324, true, uint16(65535), "\u2029")
	f.Fuzz(func(t *testing.T, s1, s2, s3 string, nanos, nanos2 int64, n int, cost, cost2 float64, flag bool, port uint16, tier string) {
		at := time.Unix(0, nanos).In(time.FixedZone("z", n%50*900+n%7))
		rec := messages.SessionRecord{SessionID: s1, BackendID: s2, Cwd: s3, Model: s1 + s2, Effort: messages.Effort(s3),
			MaxPosture: messages.Posture(s2), Posture: messages.Posture(s1), MaxRounds: n, MaxCostUSD: cost, AllowedTools: []string{s1, s2},
			TaskBrief: s2 + s3, Status: messages.Status(s3), CreatedAt: at, UpdatedAt: time.Unix(nanos2, nanos%1e9),
			RoundsElapsed: -n, CostUSD: cost2, Outcome: messages.Outcome(s1), OutcomeNote: s3, Version: n / 3}
		if flag {
			rec.TaskTags = []string{}
			rec.Runs = []messages.Run{{StartedAt: at.UTC(), ExternalSessionID: s2, OwnerScopeID: s3, Runtime: s1,
				Containment: &messages.Applied{LandlockABI: n, Writable: []string{s1}, ReadDenied: []string{}, ReadAllowed: []string{s2, s3},
					ReadsOpen: flag, Network: s2, ConnectTCP: []uint16{port, port / 2}, Relayed: []string{s3}, BestEffort: []string{s1 + s3}}}, {}}
			rec.Worktree = &messages.Worktree{Path: s1, Branch: s2, Repo: s3, Base: tier}
			rec.Provision = &messages.Provision{CapabilityIDs: []string{s1}, Applied: []string{}, Ignored: []string{s2}, Tiers: map[string]string{s1: tier, s2: tier + s3, tier: s1},
				AwaitingApproval: []string{tier}, TokenScopeNotes: []string{s3}, Notes: []string{s1, s2}, Manifest: s3}
		} else {
			rec.Runs = []messages.Run{}
			rec.Provision = &messages.Provision{}
		}
		requireSameRecord(t, &rec)
	})
}

// BenchmarkEncodeRecord: records encoded by encodeRecord
// (appendRecordJSON) and by json.Marshal with the newline appended (what
// the store did before), in the same run: a `bench sessions` session's
// (testdata/bench-meta.json: a run, a provision with its manifest) and a
// full one (a run with its containment, a worktree, a provision with
// tiers).
func BenchmarkEncodeRecord(b *testing.B) {
	for _, c := range []struct {
		name string
		rec  messages.SessionRecord
	}{{"bench", benchMetaRecord(b)}, {"full", benchRecord()}} {
		rec := c.rec
		data, err := encodeRecord("bench", &rec)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"/append", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := encodeRecord("bench", &rec); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/encoding_json", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				data, err := json.Marshal(rec)
				if err != nil {
					b.Fatal(err)
				}
				_ = append(data, '\n')
			}
		})
	}
}
