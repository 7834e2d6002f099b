package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/curation"
)

// The approvals page lists a deferred executable capability's request and
// approves it: the ledger says approved afterwards.
func TestConsoleApprovesACapability(t *testing.T) {
	chromium(t)
	home := t.TempDir()
	e, ok := curation.Builtin().Lookup("playwright")
	require.True(t, ok)
	l := curation.NewLedger(home, nil)
	_, err := l.Check(e, t.TempDir(), "cs_web")
	require.NoError(t, err)
	id := curation.ApprovalID(e)
	dm := startDaemon(t, home, "127.0.0.1:0")
	defer func() { dm.stop() }()

	ctx, cancel := browser(t)
	defer cancel()
	run(t, ctx, "log in", chromedp.Navigate(dm.url("/")), chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SendKeys(chromedp.CSS("#token"), testToken), chromedp.Submit(chromedp.CSS("#login-form")),
		chromedp.WaitVisible(chromedp.CSS("#approvals-link")))
	until(t, ctx, "the list loads", `window.codesession?.view === 'list' && window.codesession.ready`)
	row := `#approvals-body tr[data-id="` + id + `"]`
	run(t, ctx, "open the approvals", chromedp.Click(chromedp.CSS("#approvals-link")),
		chromedp.WaitVisible(chromedp.CSS(row+`[data-status="pending"] button.approve`)))
	assert.Contains(t, text(t, ctx, `document.querySelector('`+row+`').innerText`), "@playwright/mcp@")
	run(t, ctx, "approve it", chromedp.Click(chromedp.CSS(row+` button.approve`)),
		chromedp.WaitVisible(chromedp.CSS(row+`[data-status="approved"]`)))
	assert.Contains(t, text(t, ctx, `document.querySelector('#approvals-notice').innerText`), "approved")
	list, err := l.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "approved", string(list[0].Status))
}
