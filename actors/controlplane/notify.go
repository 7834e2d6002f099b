package controlplane

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
)

// WaitingNotice is the webhook's body when a session starts waiting on a
// human (a clarification raised): type code_session_waiting.
type WaitingNotice struct {
	Type            string          `json:"type"` // WaitingType
	SessionID       string          `json:"sessionId"`
	Turn            int             `json:"turn"`
	ClarificationID string          `json:"clarificationId"`
	ToolName        string          `json:"toolName,omitempty"`
	Input           json.RawMessage `json:"input,omitempty"`
	At              time.Time       `json:"at"`
}

// WaitingType names a WaitingNotice.
const WaitingType = "code_session_waiting"

// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the body,
// keyed by the daemon's bearer token: a receiver that knows the token
// checks the notice came from the daemon (as GitHub's webhooks sign).
const SignatureHeader = "X-Codesession-Signature"

// Sign is the SignatureHeader value of body under token.
func Sign(token string, body []byte) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// waitingNotice is the notice of a raised clarification (no decision yet),
// the one event after which a session waits on a human.
func waitingNotice(sid string, ev messages.PersistedEvent) (WaitingNotice, bool) {
	e := ev.Event
	if e.Type != messages.EvClarification || e.Decision != "" || e.ClarificationID == "" {
		return WaitingNotice{}, false
	}
	return WaitingNotice{Type: WaitingType, SessionID: sid, Turn: ev.Turn, ClarificationID: e.ClarificationID,
		ToolName: e.ToolName, Input: e.Input, At: ev.At}, true
}

// appendWaiting follows a raised clarification's code_session_event frame
// with a code_session_waiting frame (the WaitingNotice, no id of its own:
// the event's id stays the resume cursor), so a feed reader learns that the
// session waits on a human without parsing every event.
func appendWaiting(frame []byte, sid string, ev messages.PersistedEvent) []byte {
	w, ok := waitingNotice(sid, ev)
	if !ok {
		return frame
	}
	data, err := json.Marshal(w)
	if err != nil {
		return frame
	}
	frame = append(frame, "event: "+WaitingType+"\ndata: "...)
	frame = append(frame, data...)
	return append(frame, "\n\n"...)
}

// notifier posts a WaitingNotice to a webhook for each clarification a
// session raises. Listen never blocks (it is on the session's goroutine):
// notices queue (bounded: past notifyQueue one is dropped and logged) and
// one goroutine posts them in order, each bounded by notifyTimeout. A
// failed post is logged and not retried: the feed and `ls` still show the
// session waiting.
type notifier struct {
	url, token string
	log        *slog.Logger
	client     *http.Client
	ch         chan WaitingNotice
	done       chan struct{}
	closeOnce  sync.Once
}

const (
	notifyQueue   = 256
	notifyTimeout = 10 * time.Second
)

func newNotifier(url, token string, log *slog.Logger) *notifier {
	n := &notifier{url: url, token: token, log: log, client: &http.Client{Timeout: notifyTimeout},
		ch: make(chan WaitingNotice, notifyQueue), done: make(chan struct{})}
	go n.run()
	return n
}

// listen is the runtime's event seam: a raised clarification (no
// decision yet) is a notice.
func (n *notifier) listen(sid string, ev messages.PersistedEvent) {
	w, ok := waitingNotice(sid, ev)
	if !ok {
		return
	}
	select {
	case n.ch <- w:
	default:
		n.log.Warn("notify: the webhook queue is full; a waiting notice is dropped", "session", sid, "clarification", w.ClarificationID)
	}
}

func (n *notifier) run() {
	defer close(n.done)
	for w := range n.ch {
		if err := n.post(w); err != nil {
			n.log.Warn("notify: the webhook failed", "session", w.SessionID, "clarification", w.ClarificationID, "err", err)
		}
	}
}

func (n *notifier) post(w WaitingNotice) error {
	body, err := json.Marshal(w)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(n.token, body))
	res, err := n.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("the webhook answered %s", res.Status)
	}
	return nil
}

// close (after the runtime has closed: no listen after it) stops taking
// notices and waits (until ctx ends) for the queued
// ones to be posted.
func (n *notifier) close(ctx context.Context) {
	n.closeOnce.Do(func() { close(n.ch) })
	select {
	case <-n.done:
	case <-ctx.Done():
	}
}
