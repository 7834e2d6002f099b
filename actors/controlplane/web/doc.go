// Package web is the daemon's browser console: the session list, a
// session's live page and the start form, served by `codesession serve` at
// "/" from static files embedded in the binary (plain ES modules, no build
// step), and the browser side of the control plane's authentication.
//
// # Pages and assets
//
// GET / is the one page (the views are client-side: "#/" the list,
// "#/s/<id>" a session, "#/new" the start form); GET /ui/<file> are its
// scripts and styles. The page talks to the control plane's own /api
// routes and follows the SSE feed (/api/events) with its own fetch-based
// reader, so every reconnect carries Last-Event-ID; it drops an event id
// it has already shown and counts that (window.codesession.stats), so the
// browser tests can tell a duplicate the server sent from one it showed.
//
// # Authentication
//
// A browser cannot put a bearer token on an EventSource or a link, so the
// token is exchanged once, at POST /ui/login, for a session cookie
// (HttpOnly, SameSite=Strict, Secure over TLS, Path=/). The cookie is
// stateless: "<expiry>.<nonce>.<mac>", an HMAC-SHA256 keyed by the bearer
// token, so it survives a daemon restart and dies with the token (delete
// the token file to revoke every cookie). Console.Authorized accepts a
// request carrying a valid cookie; for a method other than GET and HEAD it
// also wants the X-CSRF-Token header (an HMAC of the cookie's nonce, put
// in the page by the server; a cross-site page can read neither) and, when
// the browser sends Origin, one that names this host. The API's own
// requirement of application/json bodies adds a CORS preflight on top.
// Without a valid cookie GET / answers 401 with the login form, never
// data. An empty token disables authentication, as it does for the API.
//
// Every page response carries a strict Content-Security-Policy (scripts and
// styles from this origin only, no inline script), frame-ancestors 'none'
// and nosniff; the scripts build the DOM with textContent, never HTML
// strings from the daemon.
//
// # Concurrency
//
// A Console is immutable after New and safe for concurrent use.
//
// # Testing
//
// The unit tests drive the login, the cookie and the CSRF checks over
// httptest. The browser tests (browser_test.go) run headless Chromium via
// github.com/chromedp/chromedp against a real daemon (file store, scripted
// backend, a real HTTP listener that is restarted on the same port): the
// list, a live feed, answering a permission question, guidance, a diff,
// a restart with no duplicate, and the login for an unauthenticated
// browser; they save screenshots as test artifacts
// ($CODESESSION_WEB_ARTIFACTS, else the test's temp dir). Chromium is
// found as $CODESESSION_CHROMIUM, else chromium or chromium-browser on
// PATH; without it the browser tests skip, except under CI=true, where
// they fail.
package web
