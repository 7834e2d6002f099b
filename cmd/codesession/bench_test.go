package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/bench"
	"github.com/codesession/codesession/messages"
)

func TestBenchSessionsJSON(t *testing.T) {
	t.Parallel()
	r := runCLI(t, invocation{}, "bench", "sessions", "--sessions", "12", "--turns", "2", "--events", "9", "--json", "--home", t.TempDir())
	require.Equal(t, exitOK, r.code, r.stderr)
	var rep bench.Report
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	assert.True(t, rep.Passed)
	require.Len(t, rep.Results, 1)
	assert.Equal(t, bench.SuiteSessions, rep.Results[0].Suite)
	assert.Contains(t, rep.Results[0].Params, "12 concurrent sessions x 2 turns x ~9 events")
	assert.Contains(t, r.stderr, "bench sessions", "progress goes to stderr")
}

func TestBenchText(t *testing.T) {
	t.Parallel()
	r := runCLI(t, invocation{}, "bench", "routing", "--quiet", "--home", t.TempDir())
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "== routing")
	assert.Contains(t, r.stdout, "verdict: PASS")
	assert.Empty(t, r.stderr)
}

// TestBenchCPUProfile: --cpuprofile leaves a profile of the run (gzipped
// protobuf, as go tool pprof reads it); a path it cannot create is an
// error before any suite runs. Not parallel: the process takes one CPU
// profile at a time (TestBenchTurnsProfile takes the other).
func TestBenchCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	r := runCLI(t, invocation{}, "bench", "routing", "--quiet", "--home", t.TempDir(), "--cpuprofile", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(b), 2)
	assert.Equal(t, []byte{0x1f, 0x8b}, b[:2], "a gzipped profile")

	r = runCLI(t, invocation{}, "bench", "routing", "--quiet", "--home", t.TempDir(), "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "cpu.prof"))
	assert.NotEqual(t, exitOK, r.code)
	assert.Contains(t, r.stderr, "cpu profile")
	assert.NotContains(t, r.stdout, "== routing", "no suite ran")
}

// TestBenchTurnsProfile: --turns-profile leaves a profile of the sessions
// suite's turns phase; with --cpuprofile it is a usage error (one CPU
// profile at a time).
func TestBenchTurnsProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "turns.prof")
	r := runCLI(t, invocation{}, "bench", "sessions", "--sessions", "6", "--turns", "2", "--quiet", "--home", t.TempDir(), "--turns-profile", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(b), 2)
	assert.Equal(t, []byte{0x1f, 0x8b}, b[:2], "a gzipped profile")

	r = runCLI(t, invocation{}, "bench", "sessions", "--turns-profile", path, "--cpuprofile", path+".2")
	assert.Equal(t, exitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "one CPU profile at a time")

	// the native suite profiles its last rung's turns; with the sessions
	// suite before it the file holds the sessions' one profile (a second
	// profile appended to it would be unreadable)
	native := filepath.Join(t.TempDir(), "native.prof")
	r = runCLI(t, invocation{}, "bench", "native", "--concurrency", "1,2", "--native-turns", "2", "--quiet", "--home", t.TempDir(), "--turns-profile", native)
	require.Equal(t, exitOK, r.code, r.stderr)
	b, err = os.ReadFile(native)
	require.NoError(t, err)
	require.Greater(t, len(b), 2)
	assert.Equal(t, []byte{0x1f, 0x8b}, b[:2], "a gzipped profile")
	assert.NotContains(t, r.stderr, "nothing written")

	both := filepath.Join(t.TempDir(), "both.prof")
	r = runCLI(t, invocation{}, "bench", "sessions", "native", "--sessions", "4", "--turns", "2", "--native-turns", "2", "--concurrency", "1", "--quiet", "--home", t.TempDir(), "--turns-profile", both)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "turns profile not taken: an earlier suite of this run took it")
	b, err = os.ReadFile(both)
	require.NoError(t, err)
	// one gzip member, the whole file (bytes.Reader is read byte-wise, so
	// nothing past the member is buffered away)
	br := bytes.NewReader(b)
	zr, err := gzip.NewReader(br)
	require.NoError(t, err)
	zr.Multistream(false)
	_, err = io.Copy(io.Discard, zr)
	require.NoError(t, err)
	assert.Zero(t, br.Len(), "bytes after the first profile: a second profile appended")
}

// TestBenchTurnsTrace: --turns-trace leaves an execution trace of the
// sessions suite's turns phase (go tool trace's format, which starts "go
// 1."), beside a turns profile; a path it cannot create is an error before
// any suite runs.
func TestBenchTurnsTrace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "turns.trace")
	r := runCLI(t, invocation{}, "bench", "sessions", "--sessions", "6", "--turns", "2", "--quiet", "--home", t.TempDir(), "--turns-trace", path, "--turns-profile", filepath.Join(dir, "turns.prof"))
	require.Equal(t, exitOK, r.code, r.stderr)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(b), 16)
	assert.True(t, bytes.HasPrefix(b, []byte("go 1.")), "a Go execution trace, got %q", b[:16])
	assert.NotContains(t, r.stdout, "turns trace not taken")

	// the native suite traces its last rung's turns, and as with the
	// profile, a file takes one trace: with the sessions suite before it
	// the native suite says it took none
	native := filepath.Join(dir, "native.trace")
	r = runCLI(t, invocation{}, "bench", "sessions", "native", "--sessions", "4", "--turns", "2", "--native-turns", "2", "--concurrency", "1,2", "--quiet", "--home", t.TempDir(), "--turns-trace", native)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "turns trace not taken: an earlier suite of this run took it")
	b, err = os.ReadFile(native)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("go 1.")), "a Go execution trace")
	assert.Equal(t, 1, bytes.Count(b, []byte(" trace\x00\x00\x00")), "one trace header in the file, not two")
	r = runCLI(t, invocation{}, "bench", "native", "--native-turns", "3", "--concurrency", "1", "--quiet", "--home", t.TempDir(), "--turns-trace", native+".2", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "turns trace not taken")
	assert.Contains(t, r.stdout, "3 turns per session", "--native-turns sets the native suite's turns")
	b, err = os.ReadFile(native + ".2")
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("go 1.")), "a Go execution trace of the native rung")

	r = runCLI(t, invocation{}, "bench", "sessions", "--sessions", "6", "--quiet", "--home", t.TempDir(), "--turns-trace", filepath.Join(dir, "no", "such", "turns.trace"))
	assert.NotEqual(t, exitOK, r.code)
	assert.Contains(t, r.stderr, "turns trace")
	assert.NotContains(t, r.stdout, "== sessions", "no suite ran")
}

func TestBenchUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bench", "nosuch"},
		{"bench", "sessions", "--events", "3"},
		{"bench", "--sessions", "0"},
		{"bench", "--rate", "-1"},
		{"bench", "--concurrency", "1,0"},
		{"bench", "native", "--native-turns", "0"},
		{"bench", "--bogus"},
	} {
		r := runCLI(t, invocation{}, args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
		assert.Contains(t, r.stderr, "Try: codesession bench --help", "%v", args)
	}
	r := runCLI(t, invocation{}, "bench", "--help")
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "--sessions")
}

// loseReleased acknowledges the first released event without writing it.
type loseReleased struct {
	store.Store
	done *atomic.Bool
}

func (s loseReleased) Append(ctx context.Context, sid string, evs []messages.PersistedEvent) error {
	if n := len(evs); n > 0 && evs[n-1].Event.Type == messages.EvReleased && s.done.CompareAndSwap(false, true) {
		return s.Store.Append(ctx, sid, evs[:n-1])
	}
	return s.Store.Append(ctx, sid, evs)
}

func (s loseReleased) AppendRecord(ctx context.Context, sid string, evs []messages.PersistedEvent, rec messages.SessionRecord) error {
	if n := len(evs); n > 0 && evs[n-1].Event.Type == messages.EvReleased && s.done.CompareAndSwap(false, true) {
		return s.Store.AppendRecord(ctx, sid, evs[:n-1], rec)
	}
	return s.Store.AppendRecord(ctx, sid, evs, rec)
}

// TestBenchExitsOneOnlyOnACorrectnessFailure: a store that loses an event
// makes the command exit 1 and say which check failed.
func TestBenchExitsOneOnlyOnACorrectnessFailure(t *testing.T) {
	t.Parallel()
	c, err := parseBenchFlags([]string{"sessions", "--sessions", "5", "--turns", "1", "--home", t.TempDir()})
	require.NoError(t, err)
	done := new(atomic.Bool)
	c.tune = func(o *bench.Options) {
		o.Store = func(dir string) (store.Store, error) {
			st, err := filestore.Open(dir)
			return loseReleased{Store: st, done: done}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := report(&streams{getenv: func(string) string { return "" }, stdout: &stdout, stderr: &stderr}, "bench",
		c.exec(ctx, &streams{getenv: func(string) string { return "" }, stdout: &stdout, stderr: &stderr}))
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, stdout.String(), "FAIL  sessions released")
	assert.True(t, strings.Contains(stderr.String(), "a correctness check failed"), stderr.String())
}

// TestBenchSubscribersInProcessFlag: the feed's subscribers run in a child
// process unless --subscribers-in-process is given.
func TestBenchSubscribersInProcessFlag(t *testing.T) {
	t.Parallel()
	c, err := parseBenchFlags([]string{"feed"})
	require.NoError(t, err)
	assert.False(t, c.opts.SubscribersInProcess)
	c, err = parseBenchFlags([]string{"feed", "--subscribers-in-process"})
	require.NoError(t, err)
	assert.True(t, c.opts.SubscribersInProcess)
}
