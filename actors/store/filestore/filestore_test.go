package filestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/actors/store/storetest"
	"github.com/codesession/codesession/messages"
)

func TestConformance(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return open(t, t.TempDir()) })
	})
	// The caller's contract under every injected fault, on disk.
	t.Run("faults", func(t *testing.T) {
		storetest.RunFaults(t, func(t *testing.T) store.Store { return open(t, t.TempDir()) })
	})
	// Two handles for fifty concurrent sessions: every append may evict.
	t.Run("maxOpen=2", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return open(t, t.TempDir(), filestore.WithMaxOpen(2)) })
	})
}

// logBuf collects a store's log lines.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuf) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// open opens a store on home, closed when the test ends, logging to the test.
func open(t testing.TB, home string, opts ...filestore.Option) *filestore.Store {
	t.Helper()
	st, err := filestore.Open(home, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, st.Close()) })
	return st
}

// fastTempDir returns a temporary directory on tmpfs when the machine has
// one: tests whose subject is not the disk (ten thousand session directories,
// fuzzing) run there in a fraction of the time directory operations take on
// a journaled filesystem.
func fastTempDir(t testing.TB) string {
	t.Helper()
	const shm = "/dev/shm"
	if fi, err := os.Stat(shm); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp(shm, "filestore-test-*"); err == nil {
			t.Cleanup(func() { assert.NoError(t, os.RemoveAll(dir)) })
			return dir
		}
	}
	return t.TempDir()
}

func logPath(home, sid string) string  { return filepath.Join(home, "sessions", sid, "events.jsonl") }
func metaPath(home, sid string) string { return filepath.Join(home, "sessions", sid, "meta.json") }

func encodeLine(t testing.TB, ev messages.PersistedEvent) []byte {
	t.Helper()
	b, err := json.Marshal(ev)
	require.NoError(t, err)
	return append(b, '\n')
}

func appendFile(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// seed writes a record and n events in a store that is then closed, and
// returns the session id.
func seed(t testing.TB, home string, n int) string {
	t.Helper()
	ctx := context.Background()
	st, err := filestore.Open(home)
	require.NoError(t, err)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	if n > 0 {
		require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(1, n)))
	}
	require.NoError(t, st.Close())
	return rec.SessionID
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st, err := filestore.Open(home)
	require.NoError(t, err)
	var recs []messages.SessionRecord
	for i := range 3 {
		rec := storetest.NewRecord(time.Now().Add(time.Duration(i) * time.Minute))
		require.NoError(t, st.Create(ctx, rec))
		require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(1, 5*i)))
		recs = append(recs, rec)
	}
	recs[1].Status = messages.StatusEnded
	require.NoError(t, st.PutMeta(ctx, recs[1]))
	require.NoError(t, st.Close())

	st = open(t, home)
	listed, err := st.List(ctx)
	require.NoError(t, err)
	require.Len(t, listed, 3)
	for i, rec := range recs {
		assert.Equal(t, storetest.NormalizeRecord(rec), storetest.NormalizeRecord(listed[2-i]))
		got, err := st.GetMeta(ctx, rec.SessionID)
		require.NoError(t, err)
		assert.Equal(t, storetest.NormalizeRecord(rec), storetest.NormalizeRecord(got))
		last, err := st.LastSeq(ctx, rec.SessionID)
		require.NoError(t, err)
		assert.Equal(t, uint64(5*i), last)
		evs, err := st.ReadEvents(ctx, rec.SessionID, 0, 0)
		require.NoError(t, err)
		assert.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, 5*i)), storetest.NormalizeEvents(evs))
		require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(uint64(5*i)+1, 2)), "appends continue")
	}
	assert.Empty(t, st.Repairs())
}

// TestOnDiskFormat pins the layout and the line schema other tools read.
func TestOnDiskFormat(t *testing.T) {
	home := t.TempDir()
	sid := seed(t, home, 3)

	var rec messages.SessionRecord
	data, err := os.ReadFile(metaPath(home, sid))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &rec))
	assert.Equal(t, sid, rec.SessionID)

	data, err = os.ReadFile(logPath(home, sid))
	require.NoError(t, err)
	require.True(t, bytes.HasSuffix(data, []byte("\n")))
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	require.Len(t, lines, 3)
	for i, line := range lines {
		var fields map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(line, &fields))
		assert.ElementsMatch(t, []string{"seq", "at", "turn", "event"}, slices.Collect(maps.Keys(fields)))
		assert.Equal(t, fmt.Sprint(i+1), string(fields["seq"]))
	}
	entries, err := os.ReadDir(filepath.Join(home, "sessions", sid))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"events.jsonl", "meta.json"}, names, "no temp file is left behind")
}

func TestTornTail(t *testing.T) {
	ctx := context.Background()
	next := encodeLine(t, storetest.NewEvents(4, 1)[0])
	tails := []struct {
		name string
		tail []byte
	}{
		{"half a line", next[:len(next)/2]},
		{"a whole line without its newline", next[:len(next)-1]},
		{"garbage line", []byte("this is not json\n")},
		{"zeros", make([]byte, 4096)},
		{"zeros with newline", append(make([]byte, 100), '\n')},
		{"empty line", []byte("\n")},
		{"empty object", []byte("{}\n")},
		{"null", []byte("null\n")},
		{"seq far ahead", []byte(`{"seq":99}` + "\n")},
		{"seq repeated", []byte(`{"seq":3}` + "\n")},
		{"bad field type", []byte(`{"seq":4,"at":"yesterday"}` + "\n")},
		{"several bad lines", []byte("garbage\n\n{\"seq\":\nmore\n{\"seq\":4,")},
	}
	entries := []struct {
		name  string
		touch func(st store.Store, sid string) error
	}{
		{"LastSeq", func(st store.Store, sid string) error { _, err := st.LastSeq(ctx, sid); return err }},
		{"ReadEvents", func(st store.Store, sid string) error { _, err := st.ReadEvents(ctx, sid, 0, 0); return err }},
		{"Append", func(st store.Store, sid string) error { return st.Append(ctx, sid, storetest.NewEvents(4, 1)) }},
	}
	for _, tc := range tails {
		for _, entry := range entries {
			t.Run(tc.name+"/"+entry.name, func(t *testing.T) {
				home := t.TempDir()
				sid := seed(t, home, 3)
				good := fileSize(t, logPath(home, sid))
				appendFile(t, logPath(home, sid), tc.tail)

				var logs logBuf
				st := open(t, home, filestore.WithLogger(logs.logger()))
				require.NoError(t, entry.touch(st, sid))
				require.Equal(t, []store.Repair{{SessionID: sid, Offset: good, Bytes: int64(len(tc.tail))}}, st.Repairs())
				assert.Contains(t, logs.String(), "torn tail")
				assert.Contains(t, logs.String(), sid)

				want := storetest.NewEvents(1, 3)
				if entry.name == "Append" {
					want = storetest.NewEvents(1, 4)
				} else {
					require.Equal(t, good, fileSize(t, logPath(home, sid)), "the tail is cut on disk")
					require.NoError(t, st.Append(ctx, sid, storetest.NewEvents(4, 1)), "appends continue at seq 4")
					want = storetest.NewEvents(1, 4)
				}
				evs, err := st.ReadEvents(ctx, sid, 0, 0)
				require.NoError(t, err)
				require.Equal(t, storetest.NormalizeEvents(want), storetest.NormalizeEvents(evs))
				last, err := st.LastSeq(ctx, sid)
				require.NoError(t, err)
				require.Equal(t, uint64(4), last)
				require.Len(t, st.Repairs(), 1, "a log is repaired once")
			})
		}
	}
}

// TestTornTailWholeLog: a log with no good line at all is cut to nothing.
func TestTornTailWholeLog(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	sid := seed(t, home, 0)
	tail := []byte(`{"seq":2}` + "\n" + `{"seq":4}` + "\n" + `{"seq":5`)
	appendFile(t, logPath(home, sid), tail)

	st := open(t, home, filestore.WithLogger(slog.New(slog.DiscardHandler)))
	last, err := st.LastSeq(ctx, sid)
	require.NoError(t, err)
	require.Zero(t, last)
	require.Equal(t, []store.Repair{{SessionID: sid, Offset: 0, Bytes: int64(len(tail))}}, st.Repairs())
	require.NoError(t, st.Append(ctx, sid, storetest.NewEvents(1, 1)))
}

func TestCorruptMiddleLine(t *testing.T) {
	ctx := context.Background()
	evs := storetest.NewEvents(1, 5)
	cases := []struct {
		name  string
		line3 []byte
	}{
		{"garbage", []byte("garbage\n")},
		{"wrong seq", encodeLine(t, storetest.NewEvents(7, 1)[0])},
		{"empty", []byte("\n")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			sid := seed(t, home, 0)
			var data []byte
			for i, ev := range evs {
				if i == 2 {
					data = append(data, tc.line3...)
					continue
				}
				data = append(data, encodeLine(t, ev)...)
			}
			appendFile(t, logPath(home, sid), data)

			st := open(t, home)
			_, err := st.LastSeq(ctx, sid)
			storetest.RequireCode(t, err, messages.CodeCorrupt, "a corrupt middle line is reported, not skipped")
			require.Empty(t, st.Repairs(), "the middle of a log is never cut")

			_, err = st.ReadEvents(ctx, sid, 0, 0)
			storetest.RequireCode(t, err, messages.CodeCorrupt)
			assert.Contains(t, err.Error(), sid)
			assert.Contains(t, err.Error(), "line 3")
			storetest.RequireCode(t, st.Append(ctx, sid, storetest.NewEvents(6, 1)), messages.CodeCorrupt,
				"a corrupt log is never appended to")
			got, err := st.ReadEvents(ctx, sid, 0, 2)
			require.NoError(t, err, "the lines before the bad one read")
			require.Equal(t, storetest.NormalizeEvents(evs[:2]), storetest.NormalizeEvents(got))
			require.Equal(t, int64(len(data)), fileSize(t, logPath(home, sid)), "nothing was cut")
		})
	}
}

func TestBadRecord(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	good := seed(t, home, 1)
	bad := seed(t, home, 1)
	other := seed(t, home, 0)
	require.NoError(t, os.WriteFile(metaPath(home, bad), []byte(`{"sessionId": "cs_`), 0o600))
	// A record copied into the wrong directory is bad too.
	data, err := os.ReadFile(metaPath(home, good))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(metaPath(home, other), data, 0o600))

	var logs logBuf
	st := open(t, home, filestore.WithLogger(logs.logger()))
	for _, sid := range []string{bad, other} {
		_, err = st.GetMeta(ctx, sid)
		storetest.RequireCode(t, err, messages.CodeCorrupt)
		assert.Contains(t, err.Error(), sid)
	}
	recs, err := st.List(ctx)
	require.NoError(t, err, "one bad record does not fail List")
	require.Len(t, recs, 1)
	assert.Equal(t, good, recs[0].SessionID)
	assert.Contains(t, logs.String(), bad)
	assert.Contains(t, logs.String(), other)

	last, err := st.LastSeq(ctx, bad)
	require.NoError(t, err, "the log of a session with a bad record still reads")
	assert.Equal(t, uint64(1), last)
}

func TestLeftoversIgnored(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	sid := seed(t, home, 2)
	sessions := filepath.Join(home, "sessions")
	// A temp file from a crash in the middle of a record replace.
	require.NoError(t, os.WriteFile(filepath.Join(sessions, sid, "meta.json.tmp-123"), []byte(`{"sessionId":`), 0o600))
	// A crash in the middle of Create: a directory with only a temp file.
	orphan := messages.NewSessionID()
	require.NoError(t, os.Mkdir(filepath.Join(sessions, orphan), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(sessions, orphan, "meta.json.tmp-456"), []byte(`{`), 0o600))
	// Things that are not sessions.
	require.NoError(t, os.WriteFile(filepath.Join(sessions, "README"), []byte("hi"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(sessions, "lost+found"), 0o700))

	st := open(t, home, filestore.WithLogger(slog.New(slog.DiscardHandler)))
	recs, err := st.List(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, sid, recs[0].SessionID)
	_, err = st.GetMeta(ctx, sid)
	require.NoError(t, err)
	_, err = st.GetMeta(ctx, orphan)
	storetest.RequireCode(t, err, messages.CodeNotFound)
	_, err = st.LastSeq(ctx, orphan)
	storetest.RequireCode(t, err, messages.CodeNotFound)

	rec := storetest.NewRecord(time.Now())
	rec.SessionID = orphan
	require.NoError(t, st.Create(ctx, rec), "a crashed Create can be redone")
	rec.Status = messages.StatusIdle
	require.NoError(t, st.PutMeta(ctx, rec))
	recs, err = st.List(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 2)
}

// TestInvalidIDsTouchNothing checks that no malformed id reaches the disk.
func TestInvalidIDsTouchNothing(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	home := filepath.Join(root, "home")
	st := open(t, home)
	for _, id := range []string{"..", "../x", "../../escape", "cs_/../../y", "/tmp/abs"} {
		rec := storetest.NewRecord(time.Now())
		rec.SessionID = id
		storetest.RequireCode(t, st.Create(ctx, rec), messages.CodeInvalid)
		storetest.RequireCode(t, st.Append(ctx, id, storetest.NewEvents(1, 1)), messages.CodeInvalid)
	}
	var paths []string
	require.NoError(t, filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		paths = append(paths, strings.TrimPrefix(p, root))
		return err
	}))
	// log.next: the next checkpoint's log, made ahead (zeros)
	assert.Equal(t, []string{"", "/home", "/home/sessions", "/home/wal", "/home/wal/log", "/home/wal/log.next"}, paths)
}

// TestManySessions appends to ten thousand sessions from 32 goroutines with
// the least default handle bound (MinMaxOpen), round-robin so handles are
// evicted and reopened all the time, and checks the bound and every log.
func TestManySessions(t *testing.T) {
	if testing.Short() {
		t.Skip("ten thousand sessions")
	}
	const sessions, rounds, workers = 10_000, 2, 32
	ctx := context.Background()
	home := fastTempDir(t)
	st, err := filestore.Open(home, filestore.WithoutSync(), filestore.WithMaxOpen(filestore.MinMaxOpen))
	require.NoError(t, err)
	ids := make([]string, sessions)
	for i := range ids {
		rec := storetest.NewRecord(time.Now())
		require.NoError(t, st.Create(ctx, rec))
		ids[i] = rec.SessionID
	}

	var wg sync.WaitGroup
	var peakMu sync.Mutex
	peak := 0
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				for i := w; i < sessions; i += workers {
					if !assert.NoError(t, st.Append(ctx, ids[i], storetest.NewEvents(uint64(r)+1, 1))) {
						return
					}
					if i%97 == 0 {
						n := st.OpenHandles()
						peakMu.Lock()
						peak = max(peak, n)
						peakMu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, peak, filestore.MinMaxOpen+workers, "handles open at once (bound plus one per running append)")
	assert.LessOrEqual(t, st.OpenHandles(), filestore.MinMaxOpen, "handles open when idle")
	for i := 0; i < sessions; i += 101 {
		evs, err := st.ReadEvents(ctx, ids[i], 0, 0)
		require.NoError(t, err)
		require.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, rounds)), storetest.NormalizeEvents(evs))
	}
	require.NoError(t, st.Close())
	assert.Zero(t, st.OpenHandles(), "Close closes every handle")

	// Every log is whole after a reopen.
	st = open(t, home, filestore.WithoutSync())
	for _, sid := range ids {
		last, err := st.LastSeq(ctx, sid)
		require.NoError(t, err)
		require.Equal(t, uint64(rounds), last)
	}
	assert.Empty(t, st.Repairs())
}

// TestDefaultMaxOpenFollowsNOFILE: the handle bound is half the soft
// RLIMIT_NOFILE, never below the old fixed 256 nor above CapMaxOpen; a
// store opened without WithMaxOpen takes it, and keeps a handle per
// session it writes (up to it) instead of reopening logs past 256.
func TestDefaultMaxOpenFollowsNOFILE(t *testing.T) {
	for _, c := range []struct {
		soft uint64
		ok   bool
		want int
	}{
		{0, false, 256}, // no RLIMIT_NOFILE (or Getrlimit failed)
		{0, true, 256},
		{256, true, 256},
		{1024, true, 512},
		{20_000, true, 10_000},
		{524_288, true, 1 << 16},   // systemd's hard limit, raised to by Go
		{1<<64 - 1, true, 1 << 16}, // RLIM_INFINITY
	} {
		assert.Equal(t, c.want, filestore.MaxOpenFor(c.soft, c.ok), "soft %d, ok %v", c.soft, c.ok)
	}
	soft, ok := filestore.NOFILE()
	want := filestore.MaxOpenFor(soft, ok)
	assert.Equal(t, want, filestore.DefaultMaxOpen())

	st := open(t, fastTempDir(t), filestore.WithoutSync())
	assert.Equal(t, want, st.MaxOpen())
	assert.Equal(t, 7, open(t, t.TempDir(), filestore.WithMaxOpen(7)).MaxOpen(), "WithMaxOpen wins")
	if want < 1000 {
		t.Skipf("soft RLIMIT_NOFILE %d (known: %v): no room for 1,000 open handles", soft, ok)
	}
	ctx := context.Background()
	ids := make([]string, 1000)
	for i := range ids {
		rec := storetest.NewRecord(time.Now())
		require.NoError(t, st.Create(ctx, rec))
		ids[i] = rec.SessionID
	}
	for round := range uint64(2) {
		for _, id := range ids {
			require.NoError(t, st.Append(ctx, id, storetest.NewEvents(round+1, 1)))
		}
	}
	for _, id := range ids {
		// a read writes the lines the session holds back (writeLines)
		_, err := st.ReadEvents(ctx, id, 0, 0)
		require.NoError(t, err)
	}
	assert.Equal(t, len(ids), st.OpenHandles(), "one handle per session written, none evicted at 256")
}
