package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/messages"
)

// sseEvents follows a feed on dn and returns its code_session_event data.
func sseEvents(t *testing.T, ctx context.Context, dn *daemonNode, query, lastID string) <-chan controlplane.EventData {
	t.Helper()
	return sseEventsAs(t, ctx, dn, testToken, query, lastID)
}

// sseEventsAs is sseEvents under token.
func sseEventsAs(t *testing.T, ctx context.Context, dn *daemonNode, token, query, lastID string) <-chan controlplane.EventData {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, dn.srv.URL+"/api/events?"+query, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		t.Fatalf("feed: %d %s", resp.StatusCode, b.String())
	}
	feed := make(chan controlplane.EventData, 1024)
	go func() {
		defer resp.Body.Close()
		defer close(feed)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == controlplane.TopicEvent:
				var d controlplane.EventData
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d) == nil {
					feed <- d
				}
			}
		}
	}()
	return feed
}

// takeUntil reads the feed until an event with seq upTo.
func takeUntil(t *testing.T, feed <-chan controlplane.EventData, upTo uint64) []uint64 {
	t.Helper()
	var seqs []uint64
	timeout := time.After(deadline)
	for {
		select {
		case d, ok := <-feed:
			require.True(t, ok, "the feed ended; saw %v", seqs)
			seqs = append(seqs, d.Seq)
			if d.Seq >= upTo {
				return seqs
			}
		case <-timeout:
			t.Fatalf("the feed never reached seq %d; saw %v", upTo, seqs)
		}
	}
}

func gapless(t *testing.T, seqs []uint64, from uint64) {
	t.Helper()
	for i, s := range seqs {
		require.Equal(t, from+uint64(i), s, "gapless and without repeats from %d: %v", from, seqs)
	}
}

// TestRemoteFeedReplaysAndFillsGaps: the feed of a session on c, followed
// on a. From afterSeq=0 it replays the whole log; a feed message the wire
// loses is filled from c (the old feed had no cursor for another node's
// session, and a lost message was a permanent gap); a reconnect with
// Last-Event-ID goes on from the event after it, without repeats.
func TestRemoteFeedReplaysAndFillsGaps(t *testing.T) {
	base := t.TempDir()
	ra, rc := filepath.Join(base, "a"), filepath.Join(base, "c")
	require.NoError(t, mkdir(ra))
	require.NoError(t, mkdir(rc))
	a := startDaemonNode(t, "a", ra, "")
	c := startDaemonNode(t, "c", rc, a.node.cfg.ListenAddr)
	converged(t, a.node, c.node)

	var placed Placed
	require.Nil(t, a.api(t, "POST", "/api/code-sessions", map[string]any{"brief": "feed me", "cwd": rc}, &placed))
	require.Equal(t, "c", placed.Node)
	sid := placed.SessionID
	var tr messages.TurnResult
	require.Nil(t, a.api(t, "POST", "/api/code-sessions/"+sid+"/read-turn", map[string]any{"timeoutMs": 60000}, &tr))
	var v sessionView
	require.Nil(t, a.api(t, "GET", "/api/code-sessions/"+sid, nil, &v))
	first := v.LastSeq
	require.Greater(t, first, uint64(2))

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	feed := sseEvents(t, ctx, a, "sessionId="+sid+"&afterSeq=0", "")
	gapless(t, takeUntil(t, feed, first), 1)

	// the wire loses the next live feed message of the session
	var mu sync.Mutex
	var lost []uint64
	a.node.mu.Lock()
	a.node.dropFeed = func(f *Feed) bool {
		mu.Lock()
		defer mu.Unlock()
		if f.SessionID == sid && len(lost) == 0 {
			lost = append(lost, f.Event.Seq)
			return true
		}
		return false
	}
	a.node.mu.Unlock()
	require.Nil(t, a.api(t, "POST", "/api/code-sessions/"+sid+"/guidance", map[string]any{"text": "again"}, nil))
	require.Nil(t, a.api(t, "POST", "/api/code-sessions/"+sid+"/read-turn", map[string]any{"timeoutMs": 60000}, &tr))
	require.Nil(t, a.api(t, "GET", "/api/code-sessions/"+sid, nil, &v))
	second := v.LastSeq
	seqs := takeUntil(t, feed, second)
	gapless(t, seqs, first+1)
	mu.Lock()
	require.Len(t, lost, 1, "a feed message was dropped")
	assert.Contains(t, seqs, lost[0], "the lost event was filled from the owner")
	mu.Unlock()
	cancel()

	// reconnect from an id in the middle
	ctx2, cancel2 := context.WithTimeout(context.Background(), deadline)
	defer cancel2()
	mid := first - 1
	again := sseEvents(t, ctx2, a, "sessionId="+sid, controlplane.EventID(sid, mid))
	gapless(t, takeUntil(t, again, second), mid+1)
}
