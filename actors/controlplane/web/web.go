package web

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
)

// Cookie and header names, and the cookie's lifetime.
const (
	CookieName = "codesession_session"
	CSRFHeader = "X-CSRF-Token"
	// CookieTTL is how long a login lasts.
	CookieTTL = 7 * 24 * time.Hour
	// maxLoginBody bounds the login form.
	maxLoginBody = 8 << 10
)

//go:embed static
var staticFS embed.FS

//go:embed templates
var templateFS embed.FS

var pages = template.Must(template.ParseFS(templateFS, "templates/*.html"))

// Options configure a Console.
type Options struct {
	// Token is the control plane's bearer token; empty disables
	// authentication (tests only), as it does for the API.
	Token string
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Console serves the browser console and decides whether a browser request
// is authenticated.
type Console struct {
	token  []byte
	now    func() time.Time
	static fs.FS
}

// New builds a Console.
func New(o Options) *Console {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return &Console{token: []byte(o.Token), now: now, static: sub}
}

func (c *Console) open() bool { return len(c.token) == 0 }

// mac is HMAC-SHA256 keyed by the bearer token over the parts, hex.
func (c *Console) mac(parts ...string) string {
	m := hmac.New(sha256.New, c.token)
	m.Write([]byte(strings.Join(parts, "|")))
	return hex.EncodeToString(m.Sum(nil))
}

// newCookieValue is "<expiry unix>.<nonce>.<mac>".
func (c *Console) newCookieValue() string {
	var n [16]byte
	_, _ = rand.Read(n[:])
	return c.cookieValue(hex.EncodeToString(n[:]))
}

// cookieValue is the signed cookie of the session with this nonce,
// expiring CookieTTL from now.
func (c *Console) cookieValue(nonce string) string {
	exp := strconv.FormatInt(c.now().Add(CookieTTL).Unix(), 10)
	return exp + "." + nonce + "." + c.mac("session", exp, nonce)
}

// session returns the nonce of r's valid, unexpired session cookie.
func (c *Console) session(r *http.Request) (nonce string, ok bool) {
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return "", false
	}
	exp, rest, ok1 := strings.Cut(ck.Value, ".")
	nonce, sum, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || len(nonce) != 32 {
		return "", false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || c.now().Unix() >= unix {
		return "", false
	}
	if subtle.ConstantTimeCompare([]byte(sum), []byte(c.mac("session", exp, nonce))) != 1 {
		return "", false
	}
	return nonce, true
}

// csrfToken is what a page of the session with this nonce sends in
// X-CSRF-Token.
func (c *Console) csrfToken(nonce string) string { return c.mac("csrf", nonce) }

// Authorized reports whether r is an authenticated browser request: a
// valid session cookie, and for an unsafe method the CSRF header of that
// session and a same-origin Origin (when the browser sends one). The
// control plane asks this only after the bearer token failed.
func (c *Console) Authorized(r *http.Request) bool {
	if c.open() {
		return true
	}
	nonce, ok := c.session(r)
	if !ok {
		return false
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	if !sameOrigin(r) {
		return false
	}
	got := r.Header.Get(CSRFHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(c.csrfToken(nonce))) == 1
}

// sameOrigin is true when r has no Origin (not a browser's cross-site
// form or fetch) or one whose host is r's own.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// setSecurityHeaders sets what every console response carries.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // no-referrer would make Chrome send "Origin: null" on the login form
}

// Page serves the console at GET /: the app to an authenticated browser,
// the login form (401) to anyone else.
func (c *Console) Page(w http.ResponseWriter, r *http.Request) error {
	if c.open() {
		return c.render(w, http.StatusOK, "app.html", map[string]string{"CSRF": "", "Auth": "off"})
	}
	nonce, ok := c.session(r)
	if !ok {
		return c.render(w, http.StatusUnauthorized, "login.html", map[string]string{})
	}
	return c.render(w, http.StatusOK, "app.html", map[string]string{"CSRF": c.csrfToken(nonce), "Auth": "cookie"})
}

func (c *Console) render(w http.ResponseWriter, status int, name string, data any) error {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		return messages.Wrap(messages.CodeInternal, "web", err, "cannot render the page")
	}
	h := w.Header()
	setSecurityHeaders(h)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
	return nil
}

// Asset serves GET /ui/{file...}: the embedded scripts and styles. They
// hold no data, so they need no login (the login page uses the styles).
func (c *Console) Asset(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("file")
	if name == "" || !fs.ValidPath(name) {
		return messages.Errorf(messages.CodeNotFound, "web", "no such file")
	}
	b, err := fs.ReadFile(c.static, name)
	if err != nil {
		return messages.Errorf(messages.CodeNotFound, "web", "no such file %q", name)
	}
	h := w.Header()
	setSecurityHeaders(h)
	ct := mime.TypeByExtension(path.Ext(name))
	if path.Ext(name) == ".js" {
		ct = "text/javascript; charset=utf-8" // the host's mime table may lack it
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	// no-cache, not no-store: revalidated on every load (a 304 by the
	// content's hash), so a new binary's assets never mix with an old page's
	h.Set("Cache-Control", "no-cache")
	sum := sha256.Sum256(b)
	h.Set("ETag", `"`+hex.EncodeToString(sum[:8])+`"`)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	return nil
}

// Login serves POST /ui/login (a form with "token"): the right token sets
// the session cookie and redirects to "/"; a wrong one gets the form again
// (401). A cross-origin post is refused (login CSRF).
func (c *Console) Login(w http.ResponseWriter, r *http.Request) error {
	if !sameOrigin(r) {
		return messages.Errorf(messages.CodeUnauthorized, "login", "cross-origin login refused")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		return messages.Errorf(messages.CodeInvalid, "login", "malformed login form")
	}
	got := strings.TrimSpace(r.PostForm.Get("token"))
	if c.open() {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return nil
	}
	if got == "" || subtle.ConstantTimeCompare([]byte(got), c.token) != 1 {
		return c.render(w, http.StatusUnauthorized, "login.html", map[string]string{"Error": "That is not the daemon's token."})
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: c.newCookieValue(), Path: "/",
		MaxAge: int(CookieTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	setSecurityHeaders(w.Header())
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}

// Logout serves POST /ui/logout: it clears the cookie. The cookie is
// stateless, so a copy taken before stays valid until it expires; rotate
// the token to revoke every login.
func (c *Console) Logout(w http.ResponseWriter, r *http.Request) error {
	if !sameOrigin(r) {
		return messages.Errorf(messages.CodeUnauthorized, "logout", "cross-origin logout refused")
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}
