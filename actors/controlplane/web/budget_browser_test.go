package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// TestStartFormTakesABudget: the start form's budget reaches the session
// (maxCostUsd), and the detail and the list show the spend against it.
// The demo scenario's first turn costs $0.0123, over a $0.01 budget: the
// turn ends max_budget and both views say the budget was reached.
func TestStartFormTakesABudget(t *testing.T) {
	chromium(t)
	dm := startDaemon(t, t.TempDir(), "127.0.0.1:0")
	defer dm.stop()
	cwd := gitRepo(t)
	ctx, cancel := browser(t)
	defer cancel()
	run(t, ctx, "log in", chromedp.Navigate(dm.url("/")), chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SendKeys(chromedp.CSS("#token"), testToken), chromedp.Submit(chromedp.CSS("#login-form")),
		chromedp.WaitVisible(chromedp.CSS("#nav-new")))
	until(t, ctx, "the list loads", `window.codesession?.view === 'list' && window.codesession.ready`)
	click(t, ctx, "open the start form", "#nav-new")
	until(t, ctx, "the backends load", `window.codesession.view === 'new' && window.codesession.ready && !!document.querySelector('#new-max-cost')`)
	run(t, ctx, "fill the form with a budget",
		chromedp.SendKeys(chromedp.CSS("#new-brief"), "Add a greet package"),
		chromedp.SendKeys(chromedp.CSS("#new-cwd"), cwd),
		chromedp.SendKeys(chromedp.CSS("#new-max-cost"), "0.01"))
	click(t, ctx, "start", "#new-submit")
	until(t, ctx, "the session view settles", `window.codesession.view === 'session' && window.codesession.ready && !!document.querySelector('#session-id')`)
	sid := text(t, ctx, `document.querySelector('#session-id').textContent`)
	require.True(t, messages.ValidSessionID(sid), sid)
	var d struct {
		Record messages.SessionRecord `json:"record"`
	}
	dm.api("GET", "/api/code-sessions/"+sid, nil, &d)
	assert.Equal(t, 0.01, d.Record.MaxCostUSD, "the form's budget is the session's maxCostUsd")

	until(t, ctx, "the detail shows the budget before any spend", `document.querySelector('#session-cost')?.innerText.includes('$0 / $0.01')`)
	click(t, ctx, "allow the question", `#pending .pending button[data-decision="allow_once"]`)
	until(t, ctx, "the detail shows the spend against the budget, reached",
		`document.querySelector('#session-cost')?.innerText.includes('$0.01 / $0.01') && !!document.querySelector('#budget-reached')`)
	dm.api("GET", "/api/code-sessions/"+sid, nil, &d)
	assert.InDelta(t, 0.0123, d.Record.CostUSD, 1e-9, "the scripted turn's cost")

	run(t, ctx, "back to the list", chromedp.Navigate(dm.url("/#/")))
	until(t, ctx, "the list shows the spend against the budget",
		`(() => { const td = document.querySelector('#sessions-body tr[data-sid="`+sid+`"] td.spend');
			return !!td && td.innerText.includes('$0.01 / $0.01') && td.dataset.over === 'yes'; })()`)
	screenshot(t, ctx, "budget-list.png")
}
