package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// TestAuthorizeErrors: an unknown client or unregistered redirect_uri gets
// an error page, never a redirect (RFC 6749 §4.1.2.1); other errors go to
// the redirect_uri with state and iss (RFC 9207).
func TestAuthorizeErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	challenge := oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())
	base := url.Values{
		"response_type": {"code"}, "client_id": {publicClient}, "redirect_uri": {publicRedirect},
		"scope": {"openid"}, "state": {"state-123456"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
	}
	with := func(kv ...string) string {
		v := url.Values{}
		for k, vs := range base {
			v[k] = vs
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				v.Del(kv[i])
			} else {
				v.Set(kv[i], kv[i+1])
			}
		}
		return h.srv.URL + "/oauth2/authorize?" + v.Encode()
	}
	pages := []struct{ name, url string }{
		{"unknown client", with("client_id", "nobody")},
		{"missing client", with("client_id", "")},
		{"unregistered redirect_uri", with("redirect_uri", "com.evil.app:/cb")},
		{"redirect_uri other path", with("redirect_uri", publicRedirect+"/x")},
		{"redirect_uri case", with("redirect_uri", strings.ToUpper(publicRedirect))},
		{"redirect_uri with fragment", with("redirect_uri", publicRedirect+"#f")},
		{"loopback other path", with("redirect_uri", "http://127.0.0.1:9999/evil")},
		{"loopback as localhost", with("redirect_uri", "http://localhost/callback")},
		{"state too long", with("state", strings.Repeat("s", 4000))},
	}
	for _, tt := range pages {
		t.Run(tt.name, func(t *testing.T) {
			p := get(t, newBrowser(t), tt.url)
			if p.status != http.StatusBadRequest || p.loc != nil || !strings.Contains(p.body, "not valid") {
				t.Fatalf("want an error page without redirect, got %d loc=%v %s", p.status, p.loc, p.body)
			}
		})
	}
	redirects := []struct{ name, url, wantErr string }{
		{"response_type token", with("response_type", "token"), "unsupported_response_type"},
		{"scope not allowed", with("scope", "openid admin"), "invalid_scope"},
		{"missing state", with("state", ""), "invalid_request"},
		{"short state", with("state", "abc"), "invalid_request"},
		{"missing code_challenge", with("code_challenge", ""), "invalid_request"},
		{"plain method", with("code_challenge_method", "plain"), "invalid_request"},
		{"fragment response_mode", with("response_mode", "fragment"), "invalid_request"},
	}
	for _, tt := range redirects {
		t.Run(tt.name, func(t *testing.T) {
			p := get(t, newBrowser(t), tt.url)
			if p.status != http.StatusSeeOther || p.loc == nil {
				t.Fatalf("want a redirect, got %d %s", p.status, p.body)
			}
			q := p.loc.Query()
			if !strings.HasPrefix(p.loc.String(), publicRedirect) || q.Get("error") != tt.wantErr || q.Get("iss") != h.srv.URL {
				t.Fatalf("redirect %s, want error=%s and iss", p.loc, tt.wantErr)
			}
			if st := base.Get("state"); tt.name != "missing state" && tt.name != "short state" && q.Get("state") != st {
				t.Fatalf("state not passed back: %s", p.loc)
			}
		})
	}
	t.Run("loopback any port", func(t *testing.T) {
		p := get(t, newBrowser(t), with("redirect_uri", "http://127.0.0.1:51004/callback"))
		if p.status != http.StatusOK || !strings.Contains(p.body, `name="password"`) {
			t.Fatalf("loopback redirect with a port refused: %d %s", p.status, p.body)
		}
	})
	t.Run("non-ASCII state verbatim", func(t *testing.T) {
		st := "Zürich-東京-" + strings.Repeat("x", 100)
		loc := h.login(t, newBrowser(t), with("state", st))
		if loc.Query().Get("state") != st {
			t.Fatalf("state %q came back as %q", st, loc.Query().Get("state"))
		}
	})
}

// TestPagesSecurity: every HTML page has the security headers, forms carry
// a CSRF token, and a cross-site form post is refused while a same-origin
// one under Referrer-Policy: no-referrer (Origin: null, Sec-Fetch-Site:
// same-origin) goes through.
func TestPagesSecurity(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	conf := h.oauthConfig(publicClient)
	authURL := conf.AuthCodeURL("state-security", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
	b := newBrowser(t)
	resp, err := b.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	p := readPage(t, resp)
	for k, want := range map[string]string{
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "no-referrer",
		"Content-Security-Policy": "frame-ancestors 'none'",
		"Cache-Control":           "no-store",
	} {
		if !strings.Contains(resp.Header.Get(k), want) {
			t.Errorf("%s = %q, want %q", k, resp.Header.Get(k), want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q allows inline content", csp)
	}
	if strings.Contains(p.body, "<script") || strings.Contains(p.body, "style=") {
		t.Error("page has inline script or style")
	}
	for _, c := range resp.Cookies() {
		if !c.HttpOnly || c.SameSite == http.SameSiteNoneMode || c.SameSite == http.SameSiteDefaultMode {
			t.Errorf("cookie %s: HttpOnly=%v SameSite=%v", c.Name, c.HttpOnly, c.SameSite)
		}
	}
	csrf := csrfRe.FindStringSubmatch(p.body)[1]
	action := strings.NewReplacer("&amp;", "&", "&#43;", "+").Replace(actionRe.FindStringSubmatch(p.body)[1])
	post := func(fields url.Values, hdr map[string]string) page {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+action, strings.NewReader(fields.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return readPage(t, resp)
	}
	login := url.Values{"step": {"login"}, "username": {testUser}, "password": {testPassword}, "csrf_token": {csrf}}
	if p := post(login, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}); p.status != http.StatusForbidden {
		t.Fatalf("cross-site post: %d", p.status)
	}
	if p := post(login, map[string]string{"Origin": "https://evil.example"}); p.status != http.StatusForbidden {
		t.Fatalf("cross-origin post (no Sec-Fetch-Site): %d", p.status)
	}
	noToken := url.Values{"step": {"login"}, "username": {testUser}, "password": {testPassword}}
	if p := post(noToken, map[string]string{"Sec-Fetch-Site": "same-origin"}); p.status != http.StatusForbidden {
		t.Fatalf("post without CSRF token: %d", p.status)
	}
	forged := url.Values{"step": {"login"}, "username": {testUser}, "password": {testPassword}, "csrf_token": {"forged-token-value-000000000000000000000"}}
	if p := post(forged, map[string]string{"Sec-Fetch-Site": "same-origin"}); p.status != http.StatusForbidden {
		t.Fatalf("post with a forged CSRF token: %d", p.status)
	}
	// What a browser sends for a same-origin post under no-referrer.
	if p := post(login, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "null"}); p.status != http.StatusSeeOther {
		t.Fatalf("same-origin post with Origin: null refused: %d %s", p.status, p.body)
	}
}

// TestLogout: GET shows a confirmation form and signs nobody out; the form's
// POST ends the session, so the next authorization asks for the password.
func TestLogout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	b := newBrowser(t)
	conf := h.oauthConfig(publicClient)
	h.login(t, b, conf.AuthCodeURL("state-logout", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	p := get(t, b, h.srv.URL+"/logout")
	if p.status != 200 || !strings.Contains(p.body, "Sign out?") {
		t.Fatalf("GET /logout: %d %s", p.status, p.body)
	}
	// Still signed in: a public client with a private-use redirect gets
	// the one-tap page (RFC 8252 §8.6), not the login form.
	if again := get(t, b, conf.AuthCodeURL("state-logout", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))); !strings.Contains(again.body, "Continue as") {
		t.Fatalf("GET /logout signed the user out: %d %s", again.status, again.body)
	}
	p = get(t, b, h.srv.URL+"/logout")
	if p = submit(t, b, h.srv.URL, p, url.Values{}); p.status != 200 || !strings.Contains(p.body, "Signed out") {
		t.Fatalf("POST /logout: %d %s", p.status, p.body)
	}
	if again := get(t, b, conf.AuthCodeURL("state-logout", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))); !strings.Contains(again.body, `name="password"`) {
		t.Fatalf("still signed in after logout: %d %v", again.status, again.loc)
	}
}
