package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/cluster"
	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
)

// sseItem is one thing a followed feed said: an event (its seq and SSE
// id), a heartbeat, or why the stream ended.
type sseItem struct {
	seq       uint64
	id        string
	heartbeat bool
	err       error // the stream ended or said something unexpected
}

// followFeed opens p's feed of sid (from afterSeq=0, or after lastID when
// it is set, as a reconnecting client sends Last-Event-ID) and hands what
// it says to the channel until ctx ends.
func (p *clusterProc) followFeed(t *testing.T, ctx context.Context, sid, lastID string) <-chan sseItem {
	t.Helper()
	tok, err := os.ReadFile(controlplane.TokenPath(p.home))
	require.NoError(t, err)
	u := "http://" + p.addr + "/api/events?sessionId=" + sid
	if lastID == "" {
		u += "&afterSeq=0"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := make(chan sseItem, 1024)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		send := func(it sseItem) bool {
			select {
			case out <- it:
				return true
			case <-ctx.Done():
				return false
			}
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		id, event := "", ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == ": heartbeat":
				if !send(sseItem{heartbeat: true}) {
					return
				}
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == controlplane.TopicEvent:
				var d controlplane.EventData
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil || d.SessionID != sid {
					send(sseItem{err: fmt.Errorf("an event not of %s or malformed (%v): %s", sid, err, line)})
					return
				}
				if !send(sseItem{seq: d.Seq, id: id}) {
					return
				}
			case strings.HasPrefix(line, "data: ") && event != "":
				send(sseItem{err: fmt.Errorf("an unexpected %s on the feed: %s", event, line)})
				return
			case line == "":
				id, event = "", ""
			}
		}
		send(sseItem{err: fmt.Errorf("the feed ended: %v", sc.Err())})
	}()
	return out
}

// takeSeqs reads events from feed until seq upTo, and returns their seqs
// and SSE ids in the order they came (heartbeats are skipped).
func takeSeqs(t *testing.T, feed <-chan sseItem, upTo uint64) (seqs []uint64, ids []string) {
	t.Helper()
	for it := range feed {
		require.NoError(t, it.err, "after %v", seqs)
		if it.heartbeat {
			continue
		}
		seqs = append(seqs, it.seq)
		ids = append(ids, it.id)
		if it.seq >= upTo {
			return seqs, ids
		}
	}
	t.Fatalf("the feed closed before seq %d: %v", upTo, seqs)
	return nil, nil
}

// quietUntilHeartbeat reads feed until its next heartbeat (the remote
// stream sends one after asking the owner for anything past its cursor)
// and fails on any event before it: nothing is sent twice, nothing past
// what the owner has.
func quietUntilHeartbeat(t *testing.T, feed <-chan sseItem, after uint64) {
	t.Helper()
	for it := range feed {
		require.NoError(t, it.err)
		if it.heartbeat {
			return
		}
		t.Fatalf("seq %d came after seq %d, the owner's last", it.seq, after)
	}
	t.Fatal("the feed closed before a heartbeat")
}

func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for q := from; q <= to; q++ {
		s = append(s, q)
	}
	return s
}

var lostFeedLine = regexp.MustCompile(`lost a feed message.*seq"?[=:](\d+)`)

// lostSeqs are the seqs p's test hook (cluster.LoseFeedEnv) lost.
func (p *clusterProc) lostSeqs(t *testing.T) []uint64 {
	var out []uint64
	for _, m := range lostFeedLine.FindAllStringSubmatch(p.stderr.String(), -1) {
		s, err := strconv.ParseUint(m[1], 10, 64)
		require.NoError(t, err)
		out = append(out, s)
	}
	return out
}

// TestClusterRemoteFeedFillsALostMessage: three `serve` processes in
// network namespaces. A session runs on n1; n2 follows its feed over SSE
// and loses one of its live feed messages from n1 (cluster.LoseFeedEnv on
// n2: the second live feed message that arrives while the feed is followed, as
// hollywood's at-most-once remote may lose one). The subscriber still gets
// every event once, in order, seq 1..N: the replay from afterSeq=0, then
// live events with the lost one filled from n1. Reconnecting with the
// Last-Event-ID of the event before the lost one gets the rest once each,
// and the live events of one more turn.
func TestClusterRemoteFeedFillsALostMessage(t *testing.T) {
	skipOrFailWithoutNetns(t)
	lab := newNetnsLab(t, 3)
	bin := buildServe(t)
	scenario := writeScenario(t, opsScenario)
	roots := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	local := map[string]any{"cluster": map[string]any{"profile": "local"}}
	n1 := lab.startNode(bin, 1, roots[0], scenario, "")
	n2 := lab.startNodeWith(bin, 2, roots[1], scenario, n1.gossip, local, []string{cluster.LoseFeedEnv + "=2"})
	n3 := lab.startNode(bin, 3, roots[2], scenario, n1.gossip)
	waitAllVerified(t, n1, n2, n3)
	require.Contains(t, n2.stderr.String(), "a test hook is on", "n2 did not say its test hook is on")

	var placed cluster.Placed
	require.Nil(t, n3.api(t, "POST", "/api/code-sessions", map[string]any{"brief": "feed me across the wire", "cwd": roots[0]}, &placed))
	require.Equal(t, "n1", placed.Node)
	sid := placed.SessionID
	turn := func(text string) uint64 { // one more turn through n3; the owner's last seq after it
		t.Helper()
		if text != "" {
			require.Nil(t, n3.api(t, "POST", "/api/code-sessions/"+sid+"/guidance", map[string]any{"text": text}, nil))
		}
		var tr messages.TurnResult
		require.Nil(t, n3.api(t, "POST", "/api/code-sessions/"+sid+"/read-turn", map[string]any{"timeoutMs": 120000}, &tr))
		require.Equal(t, messages.KindTurnComplete, tr.Kind)
		var v struct {
			LastSeq uint64 `json:"lastSeq"`
		}
		require.Nil(t, n1.api(t, "GET", "/api/code-sessions/"+sid+"?limit=1", nil, &v))
		return v.LastSeq
	}
	first := turn("")
	require.Empty(t, n2.lostSeqs(t), "n2 lost a feed message of a session nobody followed")

	// the replay, then live events with one of them lost
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute) // only stops a hang
	feed := n2.followFeed(t, ctx, sid, "")
	seqs, ids := takeSeqs(t, feed, first)
	require.Equal(t, seqRange(1, first), seqs, "the replay from afterSeq=0")
	second := turn("again")
	more, moreIDs := takeSeqs(t, feed, second)
	seqs, ids = append(seqs, more...), append(ids, moreIDs...)
	lost := n2.lostSeqs(t)
	require.Len(t, lost, 1, "n2 lost one feed message")
	require.Greater(t, lost[0], first, "the lost message is a live one")
	require.LessOrEqual(t, lost[0], second)
	require.Equal(t, seqRange(1, second), seqs, "every event once, in order, the lost seq %d filled from n1", lost[0])
	t.Logf("n2 lost the feed message of seq %d (turn 1 ended at %d, turn 2 at %d); the feed filled it", lost[0], first, second)
	quietUntilHeartbeat(t, feed, second)
	for i, id := range ids {
		require.Equal(t, controlplane.EventID(sid, seqs[i]), id)
	}
	cancel()

	// a reconnect from the event before the lost one, then a live turn
	ctx2, cancel2 := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel2()
	again := n2.followFeed(t, ctx2, sid, ids[lost[0]-2])
	got, _ := takeSeqs(t, again, second)
	require.Equal(t, seqRange(lost[0], second), got, "the feed after Last-Event-ID %s", ids[lost[0]-2])
	third := turn("once more")
	got, _ = takeSeqs(t, again, third)
	require.Equal(t, seqRange(second+1, third), got, "live events after the reconnect")
	quietUntilHeartbeat(t, again, third)
	require.Len(t, n2.lostSeqs(t), 1, "n2 lost a second feed message")
}

// TestLoseFeedEnvRefusesABadValue: serve refuses a test hook value that is
// not a positive integer, before it joins anything.
func TestLoseFeedEnvRefusesABadValue(t *testing.T) {
	for _, v := range []string{"0", "-1", "two"} {
		_, _, err := startClusterNode(config.Config{}, nil, &publisher{}, v)
		require.Error(t, err, v)
		require.Contains(t, err.Error(), cluster.LoseFeedEnv)
	}
}
