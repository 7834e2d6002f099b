package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/driver"
	"github.com/codesession/codesession/messages"
)

// The delegations page links each delegation to the sessions it drove.
func TestConsoleDelegationsLinkToTheirSessions(t *testing.T) {
	chromium(t)
	home := t.TempDir()
	dm := startDaemon(t, home, "127.0.0.1:0")
	defer func() { dm.stop() }()
	var st messages.StartResult
	dm.api("POST", "/api/code-sessions", map[string]any{"brief": "A session a driver drove", "cwd": t.TempDir()}, &st)
	dm.api("POST", "/api/code-sessions/"+st.SessionID+"/stop", map[string]any{"outcome": "success"}, nil)
	// a settled delegation's record, as the driver writes it
	recs, err := driver.OpenRecords(home)
	require.NoError(t, err)
	const id = "dl_0123456789abcdef01234567"
	now := time.Now()
	require.NoError(t, recs.Put(driver.Record{ID: id, Agent: driver.DefaultPersona, Brief: "drive it", Scope: driver.ScopeOf(id),
		State: driver.StateDone, Sessions: []string{st.SessionID}, Verdicts: map[string]messages.Outcome{st.SessionID: messages.OutcomeSuccess},
		Report: "REPORT: done", CreatedAt: now, UpdatedAt: now, EndedAt: now}))

	ctx, cancel := browser(t)
	defer cancel()
	run(t, ctx, "log in", chromedp.Navigate(dm.url("/")), chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SendKeys(chromedp.CSS("#token"), testToken), chromedp.Submit(chromedp.CSS("#login-form")),
		chromedp.WaitVisible(chromedp.CSS("#nav-delegations")))
	// the page that answers the login may still be loading and render its
	// nav anew: click only once the list view has settled
	until(t, ctx, "the list loads", `window.codesession?.view === 'list' && window.codesession.ready`)
	run(t, ctx, "open the delegations", chromedp.Click(chromedp.CSS("#nav-delegations")),
		chromedp.WaitVisible(chromedp.CSS(`#delegations-body tr[data-delegation="`+id+`"] a[data-sid="`+st.SessionID+`"]`)))
	assert.Equal(t, "done", text(t, ctx, `document.querySelector('#delegations-body tr[data-delegation="`+id+`"]').dataset.state`))
	assert.Contains(t, text(t, ctx, `document.querySelector('#delegations-body').innerText`), "success")
	run(t, ctx, "follow the link to the session", chromedp.Click(chromedp.CSS(`a[data-sid="`+st.SessionID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#view")))
	require.Eventually(t, func() bool {
		return text(t, ctx, `location.hash`) == "#/s/"+st.SessionID
	}, time.Minute, 50*time.Millisecond)
}
