package controlplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

func TestCheckDepth(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{``, true},
		{`{"brief":"x"}`, true},
		{deep(MaxBodyDepth), true},
		{deep(MaxBodyDepth + 1), false},
		{strings.Repeat(`{"a":`, MaxBodyDepth+1), false}, // unclosed still counts
		{strings.Repeat("[", 1_000_000), false},
		// brackets inside strings are text, escaped quotes do not end them
		{`{"brief":"` + strings.Repeat("[", 5000) + `"}`, true},
		{`{"brief":"\"` + strings.Repeat("{", 5000) + `"}`, true},
		{`{"brief":"\\"` + strings.Repeat("[", MaxBodyDepth+1), false},
		// closing brackets give the depth back
		{strings.Repeat("[]", 10_000), true},
		{strings.Repeat(deep(MaxBodyDepth)+",", 100), true},
	} {
		err := checkDepth([]byte(c.body))
		name := c.body
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		if c.ok {
			assert.NoError(t, err, name)
			continue
		}
		require.Error(t, err, name)
		assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err), name)
		assert.Contains(t, err.Error(), "nesting too deep", name)
	}
}

// bodyTypes are the request types of every route that reads a body.
func bodyTypes() map[string]func() any {
	return map[string]func() any{
		"start":     func() any { return new(messages.Start) },
		"read-turn": func() any { return new(readTurnRequest) },
		"answer":    func() any { return new(answerRequest) },
		"guidance":  func() any { return new(guidanceRequest) },
		"posture":   func() any { return new(postureRequest) },
		"interrupt": func() any { return new(struct{}) },
		"stop":      func() any { return new(stopRequest) },
		"resume":    func() any { return new(resumeRequest) },
		"scope":     func() any { return new(scopeRequest) },
	}
}

// allocated runs f and reports the bytes and the objects the process
// allocated meanwhile: the work a body costs, without a clock. The counts
// are the whole process's, so another goroutine (the fuzzing engine's, the
// HTTP server's) can add to them; leastAllocated takes the least of a few
// runs, which only f's own allocations are always part of.
func allocated(f func()) (bytes, objects uint64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, after.Mallocs - before.Mallocs
}

func leastAllocated(f func()) (bytes, objects uint64) {
	bytes, objects = allocated(f)
	for range 2 {
		b, o := allocated(f)
		bytes, objects = min(bytes, b), min(objects, o)
	}
	return bytes, objects
}

// A body nested far deeper than any request is refused before any decoding,
// in memory that does not grow with the depth. Before the bound, the key
// check built a path string per level: 20,000 '[' cost 411 MB and 3 s,
// 40,000 cost 1.6 GB (it fails here on the old code), and 1,000,000 drove
// the daemon to 9.5 GiB.
func TestDeepBodiesAreRefusedInBoundedMemory(t *testing.T) {
	shapes := map[string]func(n int) string{
		"arrays":        func(n int) string { return strings.Repeat("[", n) },
		"objects":       func(n int) string { return strings.Repeat(`{"a":`, n) },
		"under a field": func(n int) string { return `{"brief":"x","allowedTools":` + strings.Repeat("[", n) },
		"closed":        func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) },
		"under a list":  func(n int) string { return `{"taskTags":` + strings.Repeat("[", n) },
	}
	for name, shape := range shapes {
		for _, n := range []int{MaxBodyDepth + 1, 20_000, 1_000_000 / len(shape(1))} {
			body := []byte(shape(n))
			for route, dst := range bodyTypes() {
				var err error
				b, objs := leastAllocated(func() { err = decodeJSON(body, int64(len(body)), dst()) })
				require.Error(t, err, "%s %s depth %d", route, name, n)
				assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
				assert.Contains(t, err.Error(), "nesting too deep", "%s %s depth %d", route, name, n)
				// the refusal is the bound's, before the body is decoded:
				// a few small objects, whatever the depth
				assert.Less(t, b, uint64(64<<10), "%s %s depth %d: bytes allocated", route, name, n)
				assert.Less(t, objs, uint64(64), "%s %s depth %d: objects allocated", route, name, n)
			}
		}
	}
	// at the bound the body is decoded as before
	var op messages.Start
	at := `{"brief":"x","allowedTools":` + strings.Repeat("[", MaxBodyDepth-1) + strings.Repeat("]", MaxBodyDepth-1) + `}`
	err := decodeJSON([]byte(at), int64(len(at)), &op)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "nesting too deep", "a body at the bound reaches the decoder")
}

// The key check names the field it refuses with its full path, built only
// for the error.
func TestCheckKeysNamesNestedFields(t *testing.T) {
	type inner struct {
		Name string `json:"name"`
	}
	type outer struct {
		Items [][]inner `json:"items"`
		One   inner     `json:"one"`
	}
	for body, field := range map[string]string{
		`{"items":[[{"name":"a"},{"Name":"b"}]]}`: "items[][].Name",
		`{"one":{"name":"a","name":"b"}}`:         "one.name",
		`{"one":{"x":1}}`:                         "one.x",
		`{"items":[],"items":[]}`:                 "items",
	} {
		err := checkKeys([]byte(body), new(outer))
		var me *messages.Error
		require.True(t, errors.As(err, &me), body)
		assert.Equal(t, field, me.Field, body)
	}
	assert.NoError(t, checkKeys([]byte(`{"items":[[{"name":"a"}]],"one":{"name":"b"}}`), new(outer)))
}

// A syntax error ends the key walk. It did not: after a syntax error
// json.Decoder.More still says more is to come, and the walk asked for the
// next element forever, so a 20-byte body held a handler goroutine at full
// CPU until the daemon died (FuzzDecodeBody found it; it hangs on the old
// code, and the deadline here only stops that hang).
func TestMalformedBodiesEndTheKeyWalk(t *testing.T) {
	for _, body := range []string{
		`{"allowedTools":[x]}`, `[Read"]`, `{"brief":"x","allowedTools":[Read","Edit"]}`,
		`{"a":{"b":[1,x]}}`, `{"brief" 1}`, `[1 2]`, `{"brief":"x",}`,
	} {
		for route, dst := range bodyTypes() {
			done := make(chan error, 1)
			go func() { done <- decodeJSON([]byte(body), int64(len(body)), dst()) }()
			select {
			case err := <-done:
				require.Error(t, err, "%s %s", route, body)
				assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err), "%s %s", route, body)
			case <-time.After(time.Minute):
				t.Fatalf("%s: decoding %s did not end", route, body)
			}
		}
	}
}

// Every route that reads a body refuses the 1 MB body of '[' with the
// typed error, the daemon's allocations staying far from the body squared.
func TestDeepBodyIsRefusedOnEveryRoute(t *testing.T) {
	f := newFixture(t)
	sid := f.start("hello").SessionID
	deep := bytes.Repeat([]byte("["), DefaultMaxBodyBytes-16)
	for _, c := range []struct{ method, path string }{
		{"POST", "/api/code-sessions"},
		{"POST", "/api/code-sessions/" + sid + "/read-turn"},
		{"POST", "/api/code-sessions/" + sid + "/answer"},
		{"POST", "/api/code-sessions/" + sid + "/guidance"},
		{"POST", "/api/code-sessions/" + sid + "/posture"},
		{"POST", "/api/code-sessions/" + sid + "/interrupt"},
		{"POST", "/api/code-sessions/" + sid + "/stop"},
		{"POST", "/api/code-sessions/" + sid + "/resume"},
		{"PUT", "/api/scope"},
	} {
		var r resp
		b, _ := allocated(func() { r = f.call(c.method, c.path, deep, "Content-Type", "application/json") })
		require.Equal(t, http.StatusBadRequest, r.status, "%s %s: %+v", c.method, c.path, r.Error)
		assert.Equal(t, messages.CodeInvalid, r.code(), c.path)
		assert.Contains(t, r.Error.Message, "nesting too deep", c.path)
		// reading the body and the client's copy are a few MB; the old
		// walk needed terabytes
		assert.Less(t, b, uint64(64<<20), "%s %s: bytes allocated", c.method, c.path)
	}
	// the session is still there and answers
	r := f.call("GET", "/api/code-sessions/"+sid, nil)
	assert.Equal(t, http.StatusOK, r.status)
}

// FuzzDecodeBody runs every route's body decoder on any input and holds it
// to what a request body may cost: no panic; every refusal an invalid
// *messages.Error; a body nested deeper than MaxBodyDepth refused as too
// deep; and memory and work (bytes and objects allocated, the measure of
// time that does not depend on the machine's speed) linear in the body's
// length, never growing with its square.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"brief":"x"}`, `{"BRIEF":"x"}`, `{"brief":"a","brief":"b"}`,
		`{"brief":"x","allowedTools":["Read","Edit"],"taskTags":["a"]}`,
		`{"clarificationId":"c","decision":{"kind":"deny","reason":"no"}}`,
		`{"timeoutMs":100,"includeDiff":true}`, `[1,2,3]`, `"x"`, `{"a":[{"b":[{"c":{}}]}]}`,
		strings.Repeat("[", 20_000), strings.Repeat(`{"a":`, 5_000),
		`{"brief":"x","allowedTools":` + strings.Repeat("[", 3000),
		`{"brief":"` + strings.Repeat(`\"[`, 2000) + `"}`,
		strings.Repeat("[]", 5000), `{"brief":"x"} {}`, `{"brief":"x"`,
		// the fuzzer's first find: the key walk spun forever on it
		"{\"brief\":\"\",\"allowedTools\":[Read\",\"Edit\"],\"\x95\x95skTags\":[\"a\"]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		tooDeep := validJSONDeeperThan(body, MaxBodyDepth)
		for route, dst := range bodyTypes() {
			var err error
			b, objs := leastAllocated(func() { err = decodeJSON(body, 1<<20, dst()) })
			if err != nil {
				var me *messages.Error
				require.True(t, errors.As(err, &me), "%s: an untyped error %v", route, err)
				require.Equal(t, messages.CodeInvalid, me.Code, "%s: %v", route, err)
			}
			if tooDeep {
				require.Error(t, err, route)
				require.Contains(t, err.Error(), "nesting too deep", route)
			}
			n := uint64(len(body))
			require.LessOrEqual(t, b, 256*n+256<<10, "%s: %d bytes allocated for a %d-byte body", route, b, n)
			require.LessOrEqual(t, objs, 16*n+1024, "%s: %d objects allocated for a %d-byte body", route, objs, n)
		}
	})
}

// validJSONDeeperThan reports whether body is valid JSON nesting deeper
// than max, measured with encoding/json's tokens (not with checkDepth).
func validJSONDeeperThan(body []byte, limit int) bool {
	if len(body) > 100_000 || !json.Valid(body) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest > limit
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			deepest = max(deepest, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}
