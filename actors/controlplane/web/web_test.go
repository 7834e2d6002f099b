package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const tok = "0123456789abcdef-token"

// login posts the token and returns the response.
func login(t *testing.T, c *Console, token string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest("POST", "http://127.0.0.1:7777/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	if err := c.Login(w, req); err != nil {
		w.WriteHeader(http.StatusUnauthorized)
	}
	return w.Result()
}

func sessionCookie(t *testing.T, res *http.Response) *http.Cookie {
	t.Helper()
	for _, ck := range res.Cookies() {
		if ck.Name == CookieName {
			return ck
		}
	}
	t.Fatalf("no %s cookie in %v", CookieName, res.Header)
	return nil
}

func TestLoginSetsAStrictHttpOnlyCookie(t *testing.T) {
	c := New(Options{Token: tok})
	res := login(t, c, tok, "Origin", "http://127.0.0.1:7777")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	ck := sessionCookie(t, res)
	assert.True(t, ck.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	assert.Equal(t, "/", ck.Path)
	assert.NotContains(t, ck.Value, tok, "the cookie never carries the token")
	assert.False(t, ck.Secure, "no TLS here")

	bad := login(t, c, "wrong")
	assert.Equal(t, http.StatusUnauthorized, bad.StatusCode)
	assert.Empty(t, bad.Cookies())
	body, _ := io.ReadAll(bad.Body)
	assert.Contains(t, string(body), `id="login-form"`)

	cross := login(t, c, tok, "Origin", "https://evil.example")
	assert.Equal(t, http.StatusUnauthorized, cross.StatusCode, "a cross-origin login is refused")
	assert.Empty(t, cross.Cookies())
}

func TestAuthorizedWantsAValidCookieAndCSRFForWrites(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c := New(Options{Token: tok, Now: func() time.Time { return now }})
	ck := sessionCookie(t, login(t, c, tok))
	nonce, ok := c.session(&http.Request{Header: http.Header{"Cookie": {ck.String()}}})
	require.True(t, ok)
	csrf := c.csrfToken(nonce)

	req := func(method string, cookie string, hdr ...string) *http.Request {
		r := httptest.NewRequest(method, "http://127.0.0.1:7777/api/code-sessions", nil)
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return r
	}
	assert.True(t, c.Authorized(req("GET", ck.Value)))
	assert.False(t, c.Authorized(req("GET", "")), "no cookie")
	// the mac's last character changed (to one it is not: a fixed "0" left
	// one cookie in sixteen untouched)
	last := ck.Value[len(ck.Value)-1]
	tampered := ck.Value[:len(ck.Value)-1] + map[bool]string{true: "1", false: "0"}[last == '0']
	assert.False(t, c.Authorized(req("GET", tampered)), "a tampered mac")
	parts := strings.SplitN(ck.Value, ".", 3)
	assert.False(t, c.Authorized(req("GET", "99999999999."+parts[1]+"."+parts[2])), "an extended expiry breaks the mac")

	assert.False(t, c.Authorized(req("POST", ck.Value)), "a write without the CSRF header")
	assert.False(t, c.Authorized(req("POST", ck.Value, CSRFHeader, "nope")))
	assert.True(t, c.Authorized(req("POST", ck.Value, CSRFHeader, csrf)))
	assert.True(t, c.Authorized(req("POST", ck.Value, CSRFHeader, csrf, "Origin", "http://127.0.0.1:7777")))
	assert.False(t, c.Authorized(req("POST", ck.Value, CSRFHeader, csrf, "Origin", "http://127.0.0.1:8888")), "another origin")

	other := New(Options{Token: "another-token", Now: func() time.Time { return now }})
	assert.False(t, other.Authorized(req("GET", ck.Value)), "a new token revokes every cookie")

	now = now.Add(CookieTTL + time.Second)
	assert.False(t, c.Authorized(req("GET", ck.Value)), "expired")
}

func TestPageIsTheLoginWithoutACookie(t *testing.T) {
	c := New(Options{Token: tok})
	w := httptest.NewRecorder()
	require.NoError(t, c.Page(w, httptest.NewRequest("GET", "/", nil)))
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.Contains(t, w.Body.String(), `id="login-form"`)
	assert.NotContains(t, w.Body.String(), "app.js")
	assert.Contains(t, w.Header().Get("Content-Security-Policy"), "script-src 'self'")

	ck := sessionCookie(t, login(t, c, tok))
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(ck)
	w = httptest.NewRecorder()
	require.NoError(t, c.Page(w, r))
	assert.Equal(t, http.StatusOK, w.Code)
	nonce, _ := c.session(r)
	assert.Contains(t, w.Body.String(), `<meta name="csrf-token" content="`+c.csrfToken(nonce)+`">`)
	assert.Contains(t, w.Body.String(), "/ui/app.js")
}

func TestAssetsAreEmbeddedAndConfined(t *testing.T) {
	c := New(Options{Token: tok})
	get := func(name string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/ui/"+name, nil)
		r.SetPathValue("file", name)
		w := httptest.NewRecorder()
		if err := c.Asset(w, r); err != nil {
			w.WriteHeader(http.StatusNotFound)
		}
		return w
	}
	for _, name := range []string{"app.js", "api.js", "sse.js", "feed.js", "diff.js", "dom.js", "style.css"} {
		w := get(name)
		require.Equal(t, http.StatusOK, w.Code, name)
		assert.NotEmpty(t, w.Body.String(), name)
	}
	assert.Equal(t, "text/javascript; charset=utf-8", get("app.js").Header().Get("Content-Type"))
	etag := get("app.js").Header().Get("ETag")
	require.NotEmpty(t, etag)
	r := httptest.NewRequest("GET", "/ui/app.js", nil)
	r.SetPathValue("file", "app.js")
	r.Header.Set("If-None-Match", etag)
	w := httptest.NewRecorder()
	require.NoError(t, c.Asset(w, r))
	assert.Equal(t, http.StatusNotModified, w.Code, "an unchanged asset is revalidated, not sent again")
	assert.Equal(t, http.StatusNotFound, get("../web.go").Code)
	assert.Equal(t, http.StatusNotFound, get("nope.js").Code)
}

func TestNoTokenMeansNoAuth(t *testing.T) {
	c := New(Options{})
	assert.True(t, c.Authorized(httptest.NewRequest("POST", "/api/code-sessions", nil)))
	w := httptest.NewRecorder()
	require.NoError(t, c.Page(w, httptest.NewRequest("GET", "/", nil)))
	assert.Equal(t, http.StatusOK, w.Code)
}

// FuzzSessionCookie: whatever a browser (or an attacker) puts in the
// cookie, the check never panics and accepts only the cookie it issued.
func FuzzSessionCookie(f *testing.F) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c := New(Options{Token: tok, Now: func() time.Time { return now }})
	// a fixed nonce: the fuzzing workers are other processes, and each
	// must know the one cookie it may accept
	valid := c.cookieValue("0123456789abcdef0123456789abcdef")
	parts := strings.SplitN(valid, ".", 3)
	for _, seed := range []string{valid, "", ".", "..", valid + ".", parts[0] + "." + parts[1], "1." + parts[1] + "." + parts[2],
		parts[0] + "." + strings.ToUpper(parts[1]) + "." + parts[2], "-1.x.y", "99999999999999999999.a.b"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Cookie", CookieName+"="+v)
		_, ok := c.session(r)
		if ok && v != valid {
			t.Fatalf("accepted a cookie it did not issue: %q", v)
		}
	})
}
