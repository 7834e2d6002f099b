package controlplane

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSSEStreamIsCloseDelimitedOnHTTP11 reads /api/events off the socket:
// on HTTP/1.1 the body is the frames themselves up to the connection's
// close (no chunk headers for the server to format and each client to
// parse), the response says Connection: close, and a Go client, which
// reads such a body until EOF, still receives the stream's events and
// its end.
func TestSSEStreamIsCloseDelimitedOnHTTP11(t *testing.T) {
	f := newFixture(t)
	conn, br := rawSubscribe(t, f)
	defer conn.Close()
	status, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 200 OK\r\n", status)
	hdr := map[string]string{}
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if line == "\r\n" {
			break
		}
		k, v, _ := strings.Cut(strings.TrimRight(line, "\r\n"), ": ")
		hdr[http.CanonicalHeaderKey(k)] = v
	}
	assert.Equal(t, "text/event-stream", hdr["Content-Type"])
	assert.Empty(t, hdr["Transfer-Encoding"], "no chunked framing")
	assert.Equal(t, "close", hdr["Connection"], "the body ends with the connection")
	first, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "retry: 1000\n", first, "the body starts with the first frame, not a chunk header")

	// a Go client: events arrive, and the daemon's shutdown ends the
	// stream with a reconnect event, then EOF
	c := f.sse("topics="+TopicEvent, "")
	require.Equal(t, http.StatusOK, c.status)
	st := f.start("STREAM it")
	ev, ok := c.next(hang)
	require.True(t, ok, "an event of the started session")
	assert.Equal(t, st.SessionID, ev.eventData(t).SessionID)
	go f.d.Shutdown(t.Context())
	for {
		ev, ok = c.next(hang)
		require.True(t, ok, "the stream ended without a reconnect event")
		if ev.event == ReconnectEvent {
			break
		}
	}
	select {
	case <-c.done:
	case <-time.After(hang):
		t.Fatal("the stream did not end after its reconnect event")
	}
}

// TestSSEStreamOfAClientThatLeftEnds: a stream whose client closes its
// connection ends, and its subscription with it, while nothing is sent to
// it (the heartbeat is an hour away, no session runs). On HTTP/1.1 the
// stream takes its connection over from net/http, which then no longer
// watches it: without the stream's own read of the connection this stream
// would live until its next write.
func TestSSEStreamOfAClientThatLeftEnds(t *testing.T) {
	f := newFixture(t, func(o *DaemonOptions) { o.Server.Heartbeat = time.Hour })
	subs := func() int {
		f.d.bridge.mu.Lock()
		defer f.d.bridge.mu.Unlock()
		return len(f.d.bridge.subs)
	}
	conn, br := rawSubscribe(t, f)
	defer conn.Close()
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if line == "retry: 1000\n" {
			break // live: the subscription is registered before this line
		}
	}
	require.Equal(t, 1, subs())
	require.NoError(t, conn.Close())
	// the bound only stops a hang
	require.Eventually(t, func() bool { return subs() == 0 }, time.Minute, 10*time.Millisecond,
		"the stream of a client that closed its connection is still subscribed")
}

// unwrapOnly wraps a ResponseWriter without offering Hijack: a stream
// behind it keeps net/http's connection (and its writes go through it).
type unwrapOnly struct{ http.ResponseWriter }

func (u unwrapOnly) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// TestSSEStreamBehindAWrapperEndsWhenTheClientLeaves: a stream that kept
// net/http's connection (a wrapper without Hijack) ends, with its
// subscription, when its client goes away while nothing is sent to it:
// the request's end wakes the stream through the heartbeat's channel, the
// only one it waits on beside its queue.
func TestSSEStreamBehindAWrapperEndsWhenTheClientLeaves(t *testing.T) {
	f := newFixture(t, func(o *DaemonOptions) { o.Server.Heartbeat = time.Hour })
	subs := func() int {
		f.d.bridge.mu.Lock()
		defer f.d.bridge.mu.Unlock()
		return len(f.d.bridge.subs)
	}
	h := f.d.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(unwrapOnly{w}, r)
	}))
	defer func() {
		_ = f.d.Shutdown(context.Background()) // ends a stream still running first
		srv.Close()
	}()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/events?topics="+TopicEvent, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+f.token)
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "retry: 1000\n", line)
	require.Equal(t, 1, subs())
	cancel()
	// the bound only stops a hang
	require.Eventually(t, func() bool { return subs() == 0 }, time.Minute, 10*time.Millisecond,
		"the stream of a client that went away is still subscribed")
}

// rawSubscribe subscribes to the event topic over a raw HTTP/1.1
// connection (30 s deadline: it only stops a hang) and returns it with a
// reader at the response's first byte.
func rawSubscribe(t *testing.T, f *fixture) (net.Conn, *bufio.Reader) {
	t.Helper()
	u, err := url.Parse(f.srv.URL)
	require.NoError(t, err)
	conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, conn.SetDeadline(time.Now().Add(hang)))
	_, err = io.WriteString(conn, "GET /api/events?topics="+TopicEvent+" HTTP/1.1\r\nHost: "+u.Host+
		"\r\nAuthorization: Bearer "+f.token+"\r\nAccept: text/event-stream\r\n\r\n")
	require.NoError(t, err)
	return conn, bufio.NewReader(conn)
}
