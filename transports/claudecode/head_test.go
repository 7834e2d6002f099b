package claudecode

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// headKeys counts the keys of b's outer object that a decode of the head
// would read into its type or its subtype (encoding/json matches keys
// without regard to case). With two of either, the decode keeps the last
// and lineHead reads the first; the CLI never writes such a line.
func headKeys(b []byte) (types, subtypes int) {
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return 0, 0
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return types, subtypes
		}
		if s, ok := k.(string); ok {
			switch {
			case strings.EqualFold(s, "type"):
				types++
			case strings.EqualFold(s, "subtype"):
				subtypes++
			}
		}
		var v json.RawMessage
		if d.Decode(&v) != nil {
			return types, subtypes
		}
	}
	return types, subtypes
}

// headOfTwoPass decodes the head the slow way, the reference for lineHead.
func headOfTwoPass(b []byte) (typ, subtype string, err error) {
	var head struct {
		Type    string `json:"type"`
		Subtype string `json:"subtype"`
	}
	err = json.Unmarshal(bytes.TrimSpace(b), &head)
	return head.Type, head.Subtype, err
}

func TestLineHeadReadsWhatTheDecodeReads(t *testing.T) {
	var all [][]byte
	for _, name := range append(append([]string{}, hostDriven...), rawStdout...) {
		all = append(all, stdoutLines(t, name)...)
	}
	require.NotEmpty(t, all)
	for _, l := range all {
		typ, sub, ok := lineHead(bytes.TrimSpace(l))
		if !ok {
			continue
		}
		wantTyp, wantSub, err := headOfTwoPass(l)
		require.NoError(t, err)
		assert.Equal(t, wantTyp, typ, "%.120s", l)
		if typ == "system" {
			assert.Equal(t, wantSub, sub, "%.120s", l)
		}
	}
	// the CLI's own bytes (the host-driven captures were written again
	// with their keys sorted): every line but the result line, which
	// starts with its durations, takes the fast path
	for _, name := range rawStdout {
		for _, l := range stdoutLines(t, name) {
			typ, _, _ := headOfTwoPass(l)
			_, _, ok := lineHead(bytes.TrimSpace(l))
			assert.Equal(t, typ != "result", ok, "%.120s", l)
		}
	}
}

func TestLineHeadFallsBackOnAnyOtherShape(t *testing.T) {
	for _, s := range []string{`{"subtype":"init","type":"system"}`, `{ "type":"user"}`, `{"type":"us\"er"}`,
		`{"type":""}`, `{"type":"system","session_id":"x","subtype":"init"}`, `{"type":5}`, "{\"type\":\"a\x01\"}",
		"{\"type\":\"\xff\"}", "{\"type\":\"système\"}"} {
		_, _, ok := lineHead([]byte(s))
		assert.False(t, ok, s)
	}
	typ, sub, ok := lineHead([]byte(`{"type":"system","subtype":"init","cwd":"/"}`))
	assert.True(t, ok)
	assert.Equal(t, "system", typ)
	assert.Equal(t, "init", sub)
}

func TestParseLineWithAFastHeadStillRefusesWhatIsNotJSON(t *testing.T) {
	for _, s := range []string{`{"type":"assistant","message":`, `{"type":"user"}garbage`, `{"type":"brand_new","x":}`,
		`{"type":"stream_event","event":{"type":"content_block_delta"`, `{"type":"control_cancel_request","request_id":`,
		`{"type":"system","subtype":"init",`} {
		l, err := ParseLine([]byte(s))
		assert.Nil(t, l, s)
		assert.True(t, errors.Is(err, ErrNotJSON), "%s: %v", s, err)
	}
	// well-formed JSON whose fields have the wrong types is a line that
	// does not parse, as before
	_, err := ParseLine([]byte(`{"type":"result","num_turns":"three"}`))
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrNotJSON))
}

// FuzzParseLineHead checks ParseLine with its fast head against the
// decode of the whole head: the same lines parse, to the same value, and
// the same ones are refused as not JSON.
func FuzzParseLineHead(f *testing.F) {
	for _, name := range append(append([]string{}, hostDriven...), rawStdout...) {
		for _, l := range stdoutLines(f, name) {
			f.Add(l)
		}
	}
	for _, s := range []string{`{"type":"result"`, `{"type":"user"}x`, `{"type":"system","subtype":"init"}`,
		`{"type":"a","type":"b"}`, `{"type":"user","TYPE":"result"}`, "{\"type\":\"\xff\"}",
		"{\"type\":\"system\",\"subtype\":\"in\xc3\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if types, subtypes := headKeys(data); types > 1 || subtypes > 1 {
			return // the decode keeps the last, lineHead reads the first
		}
		got, err := ParseLine(data)
		// the reference: the same line with a space after its brace,
		// which lineHead never takes, so the head is decoded in full
		want, werr := ParseLine(append([]byte("{ "), bytes.TrimPrefix(bytes.TrimSpace(data), []byte("{"))...))
		if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
			want, werr = ParseLine(data)
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("fast head: %v; full head: %v", err, werr)
		}
		if errors.Is(err, ErrNotJSON) != errors.Is(werr, ErrNotJSON) {
			t.Fatalf("not JSON: fast head %v, full head %v", err, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("fast head %#v, full head %#v", got, want)
		}
	})
}

// BenchmarkParseLineHead parses the CLI's own stdout lines (the raw
// captures, keys in the CLI's order) with the fast head and, in the same
// run, the same lines with a space after the brace, which takes the full
// decode of the head: compare the two ns/op.
func BenchmarkParseLineHead(b *testing.B) {
	var lines, spaced [][]byte
	for _, name := range rawStdout {
		for _, l := range stdoutLines(b, name) {
			if len(l) < 20<<10 { // the initialize response is parsed once per session
				lines = append(lines, l)
				spaced = append(spaced, append([]byte("{ "), l[1:]...))
			}
		}
	}
	for _, bc := range []struct {
		name  string
		lines [][]byte
	}{{"fast-head", lines}, {"full-head", spaced}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := ParseLine(bc.lines[i%len(bc.lines)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
