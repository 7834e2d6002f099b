package web_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// TestSessionPageFollowsTheFeedAndNamesTheModel (issue 37's web console
// items without a test until now): the session page shows the concrete
// model the backend reported at its start, and a reader at the bottom of
// the feed stays there as events arrive, while one who scrolled up is not
// pulled down.
func TestSessionPageFollowsTheFeedAndNamesTheModel(t *testing.T) {
	chromium(t)
	dm := startDaemon(t, t.TempDir(), "127.0.0.1:0")
	defer dm.stop()
	ctx, cancel := browser(t)
	defer cancel()
	// a short window, so the feed (70% of it) overflows within one turn
	run(t, ctx, "a short window", chromedp.EmulateViewport(1280, 420))
	run(t, ctx, "log in", chromedp.Navigate(dm.url("/")), chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SendKeys(chromedp.CSS("#token"), testToken), chromedp.Submit(chromedp.CSS("#login-form")),
		chromedp.WaitVisible(chromedp.CSS("#nav-new")))
	until(t, ctx, "the list loads", `window.codesession?.view === 'list' && window.codesession.ready`)

	var st messages.StartResult
	dm.api("POST", "/api/code-sessions", map[string]any{"brief": "Add a greet package", "cwd": gitRepo(t), "agentModel": "frontier"}, &st)
	run(t, ctx, "open the session", chromedp.Navigate(dm.url("/#/s/"+st.SessionID)))
	until(t, ctx, "the session view settles", `window.codesession.view === 'session' && window.codesession.ready`)

	// the concrete model, as the backend's started event reported it; the
	// start's answer does not wait for that event, so on a loaded machine
	// it may not be in the log yet (the deadline only stops a hang)
	var model string
	require.Eventually(t, func() bool {
		for _, pe := range dm.events(st.SessionID) {
			if pe.Event.Type == messages.EvStarted {
				model = pe.Event.Model
				return true
			}
		}
		return false
	}, 2*time.Minute, 50*time.Millisecond, "no started event in the log")
	require.NotEmpty(t, model, "the scripted backend reports its model at start")
	until(t, ctx, "the page names the concrete model", `document.querySelector('#session-model')?.innerText.startsWith(`+strconv.Quote(model)+`)`)

	click(t, ctx, "allow the question", `#pending .pending button[data-decision="allow_once"]`)
	until(t, ctx, "turn 1 ends", `!!document.querySelector('#feed .turn-end')`)
	until(t, ctx, "the feed overflows and stays at its bottom", `(() => { const f = document.querySelector('#feed');
		return f.scrollHeight > f.clientHeight + 100 && f.scrollHeight - f.scrollTop - f.clientHeight < 60; })()`)

	// scrolled up, the reader stays where they are while turn 2 streams in
	before := len(readFeed(t, ctx).Received)
	run(t, ctx, "scroll the feed to its top", chromedp.Evaluate[chromedp.Void](`document.querySelector('#feed').scrollTop = 0`))
	dm.api("POST", "/api/code-sessions/"+st.SessionID+"/guidance", map[string]any{"text": "now add a test", "mode": "queue"}, nil)
	until(t, ctx, "turn 2's events arrive", `window.codesession.stats.received.length > `+strconv.Itoa(before+3))
	assert.Equal(t, "0", text(t, ctx, `String(document.querySelector('#feed').scrollTop)`), "a reader who scrolled up is not pulled down")
	screenshot(t, ctx, "session-follow.png")
}
