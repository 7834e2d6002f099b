package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/actors/controlplane/client"
	"github.com/codesession/codesession/messages"
)

// tailCmd prints a session's events after a cursor; with -f it follows the
// live feed (SSE) and survives the daemon restarting: it reconnects with
// the last event id it printed, so nothing is missed or printed twice.
type tailCmd struct {
	client clientFlags
	sid    string
	follow bool
	after  uint64
	topics string
	json   bool
	// backoff bounds the wait between reconnects.
	backoffMin, backoffMax time.Duration
}

func (c *tailCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("tail")
	fs.BoolVarP(&c.follow, "follow", "f", false, "follow the live feed, reconnecting (from the last event printed) when the connection or the daemon goes away")
	fs.Uint64Var(&c.after, "after", 0, "start after this seq (default: the beginning of the session's log)")
	fs.StringVar(&c.topics, "topics", controlplane.TopicEvent, "with -f: "+controlplane.TopicEvent+" and/or "+controlplane.TopicChanged+", comma-separated")
	fs.BoolVar(&c.json, "json", false, `print one JSON object per line: {"event", "id", "data"}`)
	c.client.add(fs)
	return fs
}

func tailCommand() command {
	return command{
		name:    "tail",
		summary: "print a session's events; -f follows the live feed of one session (or of all)",
		usage:   "tail [-f] [flags] [SESSION]",
		flags:   func() *pflag.FlagSet { return (&tailCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseTailFlags(args) },
	}
}

func parseTailFlags(args []string) (*tailCmd, error) {
	const cmd = "tail"
	c := &tailCmd{backoffMin: 250 * time.Millisecond, backoffMax: 5 * time.Second}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	switch fs.NArg() {
	case 0:
		if !c.follow {
			return nil, usagef(cmd, "name a SESSION (only -f follows every session)")
		}
		if fs.Changed("after") {
			return nil, usagef(cmd, "--after needs a SESSION")
		}
	case 1:
		var err error
		if c.sid, err = sessionArg(cmd, fs.Arg(0)); err != nil {
			return nil, err
		}
	default:
		return nil, usagef(cmd, "want at most one SESSION, got %d arguments", fs.NArg())
	}
	for _, t := range strings.Split(c.topics, ",") {
		if t != controlplane.TopicEvent && t != controlplane.TopicChanged {
			return nil, usagef(cmd, "--topics: unknown topic %q", t)
		}
	}
	return c, nil
}

func (c *tailCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "tail"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	if c.sid != "" && !messages.ValidSessionID(c.sid) {
		// a prefix: the whole id is the feed's cursor across reconnects
		d, err := getSession(ctx, dc, c.sid, 0, 1)
		if err != nil {
			return remoteErr(cmd, "get", err)
		}
		c.sid = d.Record.SessionID
	}
	if !c.follow {
		return c.printLog(ctx, dc, s)
	}
	return c.followFeed(ctx, dc, s)
}

// errReleased ends a one-session follow: nothing comes after a final
// `released`. A released{shutdown} is not final (the daemon stopped with the
// session live; it resumes after a restart), so the follow goes on.
var errReleased = errors.New("the session was released")

// printLog prints the stored events after the cursor and returns.
func (c *tailCmd) printLog(ctx context.Context, dc *daemonClient, s *streams) error {
	after := c.after
	for {
		d, err := getSession(ctx, dc, c.sid, after, 1000)
		if err != nil {
			return remoteErr("tail", "get", err)
		}
		for _, ev := range d.Events {
			if err := c.print(s, sseMessage{event: controlplane.TopicEvent, id: controlplane.EventID(c.sid, ev.Seq)}, c.sid, &ev, nil); err != nil {
				return err
			}
			after = ev.Seq
		}
		if len(d.Events) == 0 || after >= d.LastSeq {
			return nil
		}
	}
}

// followFeed reads the SSE feed until ctx ends, reconnecting with
// Last-Event-ID after every disconnect.
func (c *tailCmd) followFeed(ctx context.Context, dc *daemonClient, s *streams) error {
	lastID, lastWhy := "", ""
	wait := c.backoffMin
	for {
		connected, err := c.stream(ctx, dc, s, &lastID)
		if ctx.Err() != nil || errors.Is(err, errReleased) {
			return nil
		}
		var e *messages.Error
		if errors.As(err, &e) && (e.Code == messages.CodeInvalid || e.Code == messages.CodeNotFound || e.Code == messages.CodeUnauthorized) {
			return remoteErr("tail", "events", err) // reconnecting would not help
		}
		if connected {
			wait, lastWhy = c.backoffMin, ""
		}
		from := "the start"
		if lastID != "" {
			from = lastID
		}
		why := "the stream ended"
		var ur *client.UnreachableError
		switch {
		case errors.As(err, &ur):
			why = "the daemon at " + dc.base + " is unreachable"
		case err != nil:
			why = err.Error()
		}
		if why != lastWhy { // say it once, not at every retry
			fmt.Fprintf(s.stderr, "codesession tail: %s; reconnecting (from %s)\n", why, from)
			lastWhy = why
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		wait = min(2*wait, c.backoffMax)
	}
}

// stream runs one connection. It reports whether the daemon accepted it.
func (c *tailCmd) stream(ctx context.Context, dc *daemonClient, s *streams, lastID *string) (bool, error) {
	q := url.Values{}
	q.Set("topics", c.topics)
	if c.sid != "" {
		q.Set("sessionId", c.sid)
		if *lastID == "" {
			q.Set("afterSeq", fmt.Sprint(c.after))
		}
	}
	req, err := http.NewRequestWithContext(ctx, "GET", dc.base+"/api/events?"+q.Encode(), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+dc.token)
	req.Header.Set("Accept", "text/event-stream")
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	res, err := dc.hc.Do(req)
	if err != nil {
		return false, &client.UnreachableError{Base: dc.base, Err: err}
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		var env struct {
			Error *messages.Error `json:"error"`
		}
		if json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&env) == nil && env.Error != nil {
			return false, env.Error
		}
		return false, fmt.Errorf("the daemon answered %s", res.Status)
	}
	if *lastID != "" && c.sid == "" {
		fmt.Fprintln(s.stderr, "codesession tail: reconnected; events of the gap are replayed only when following one SESSION")
	}
	err = readSSE(res.Body, func(m sseMessage) error {
		switch m.event {
		case controlplane.ReconnectEvent:
			var d controlplane.ReconnectData
			_ = json.Unmarshal([]byte(m.data), &d)
			return fmt.Errorf("the daemon ended the stream (%s)", d.Reason)
		case controlplane.TopicEvent:
			var d controlplane.EventData
			if err := json.Unmarshal([]byte(m.data), &d); err != nil {
				return fmt.Errorf("a malformed event: %w", err)
			}
			if err := c.print(s, m, d.SessionID, &d.PersistedEvent, nil); err != nil {
				return err
			}
			if c.sid != "" && d.Event.Type == messages.EvReleased && d.Event.ReleaseReason != messages.ReleaseShutdown {
				*lastID = m.id
				return errReleased
			}
		case controlplane.TopicChanged:
			var d controlplane.ChangedData
			if err := json.Unmarshal([]byte(m.data), &d); err != nil {
				return fmt.Errorf("a malformed record: %w", err)
			}
			if err := c.print(s, m, d.SessionID, nil, &d.Record); err != nil {
				return err
			}
		}
		if m.id != "" {
			*lastID = m.id
		}
		return nil
	})
	return true, err
}

func (c *tailCmd) print(s *streams, m sseMessage, sid string, ev *messages.PersistedEvent, rec *messages.SessionRecord) error {
	if c.json {
		var data any = controlplane.EventData{SessionID: sid, PersistedEvent: derefEvent(ev)}
		if rec != nil {
			data = controlplane.ChangedData{SessionID: sid, Record: *rec}
		}
		return writeJSON(s.stdout, map[string]any{"event": m.event, "id": m.id, "data": data})
	}
	prefix := ""
	if c.sid == "" {
		prefix = shortID(sid) + " "
	}
	if rec != nil {
		_, err := fmt.Fprintf(s.stdout, "%s== %s: rounds %d, cost %s, posture %s\n", prefix, rec.Status, rec.RoundsElapsed, cost(rec.CostUSD), rec.Posture)
		return err
	}
	_, err := fmt.Fprintf(s.stdout, "%s%s\n", prefix, eventLine(*ev))
	return err
}

func derefEvent(ev *messages.PersistedEvent) messages.PersistedEvent {
	if ev == nil {
		return messages.PersistedEvent{}
	}
	return *ev
}

// shortID is a session id cut for a column; `ls` shows it whole.
func shortID(sid string) string {
	if len(sid) > 15 {
		return sid[:15] + "…"
	}
	return sid
}

// sseMessage is one server-sent event.
type sseMessage struct {
	id, event, data string
}

// readSSE parses an event stream, calling fn for each event, until EOF or
// fn's error.
func readSSE(r io.Reader, fn func(sseMessage) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var m sseMessage
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if m.event != "" || len(data) > 0 {
				m.data = strings.Join(data, "\n")
				if err := fn(m); err != nil {
					return err
				}
			}
			m, data = sseMessage{}, nil
		case field == "":
			// a comment (heartbeat)
		case field == "id":
			m.id = value
		case field == "event":
			m.event = value
		case field == "data":
			data = append(data, value)
		}
	}
}

// eventLine renders one event on one line: seq, turn, type and the gist.
func eventLine(pe messages.PersistedEvent) string {
	ev := pe.Event
	var gist string
	switch ev.Type {
	case messages.EvText, messages.EvThinking:
		gist = oneLine(ev.Text, 120)
		if ev.Delta {
			gist = "(delta) " + gist
		}
	case messages.EvToolUse:
		gist = ev.ToolName + " " + compactJSON(ev.Input, 100)
	case messages.EvToolResult:
		gist = "ok"
		if ev.IsError {
			gist = "error"
		}
		if ev.Output != "" {
			gist += ": " + oneLine(ev.Output, 100)
		}
	case messages.EvTurnEnd:
		gist = string(ev.State)
		if ev.CostUSD > 0 {
			gist += " cost " + cost(ev.CostUSD)
		}
	case messages.EvStarted:
		gist = strings.TrimSpace("backend session " + orDash(ev.ExternalSessionID) + " " + ev.Model)
	case messages.EvGuidance:
		gist = fmt.Sprintf("%s/%s: %s", ev.Source, ev.Mode, oneLine(ev.Text, 100))
	case messages.EvPosture:
		gist = string(ev.Posture)
	case messages.EvClarification:
		gist = ev.ToolName + " " + ev.ClarificationID
		if ev.Decision != "" {
			gist += " -> " + string(ev.Decision)
		}
	case messages.EvTurnDiff:
		if ev.Diff != nil {
			gist = oneLine(ev.Diff.Summary, 120)
		}
	case messages.EvReleased:
		gist = fmt.Sprintf("%s, outcome %s", ev.ReleaseReason, orDash(string(ev.Outcome)))
		if ev.Note != "" {
			gist += ": " + oneLine(ev.Note, 80)
		}
	default:
		gist = oneLine(ev.Text, 120)
	}
	return strings.TrimRight(fmt.Sprintf("#%-4d t%-2d %-13s %s", pe.Seq, pe.Turn, ev.Type, gist), " ")
}
