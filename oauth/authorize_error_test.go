package oauth_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/authd/authd/oauth"
)

// rfc6749AuthorizeErrors are the codes an authorization error response
// may carry (RFC 6749 §4.1.2.1, OpenID Connect Core §3.1.2.6).
var rfc6749AuthorizeErrors = map[string]bool{
	"invalid_request": true, "unauthorized_client": true, "access_denied": true,
	"unsupported_response_type": true, "invalid_scope": true, "server_error": true,
	"temporarily_unavailable": true, "login_required": true, "consent_required": true, "interaction_required": true,
	// OpenID Connect Core §3.1.2.6, for request objects.
	"request_not_supported": true, "request_uri_not_supported": true,
}

var pageDetailRe = regexp.MustCompile(`(?s)<p class="detail">(.*?)</p>`)

// checkAuthorizeAnswer asserts that an answer of the authorization
// endpoint says its error within RFC 6749 §5.2's charset, bounded: in the
// redirect's error_description (and every other parameter authd adds), or
// in the error page's detail. It returns the redirect's error code, or ""
// for a page.
func checkAuthorizeAnswer(t *testing.T, p page) string {
	t.Helper()
	if p.loc != nil {
		q := p.loc.Query()
		if !rfc6749AuthorizeErrors[q.Get("error")] {
			t.Fatalf("redirect %s: error %q is not an authorization error code", p.loc, q.Get("error"))
		}
		for k, vs := range q {
			if k == "state" || k == "iss" {
				continue
			}
			for _, v := range vs {
				if !allowedDescription(v) || len(v) > 1024 {
					t.Fatalf("redirect parameter %s=%q (%d bytes) is outside RFC 6749 Section 5.2's charset or over 1 KiB", k, v, len(v))
				}
			}
		}
		if q.Get("error_description") == "" {
			t.Errorf("redirect %s has no error_description", p.loc)
		}
		return q.Get("error")
	}
	if p.status < 400 {
		t.Fatalf("want an error redirect or page, got %d: %s", p.status, p.body)
	}
	if m := pageDetailRe.FindStringSubmatch(p.body); m != nil {
		d := html.UnescapeString(m[1])
		if !allowedDescription(d) || len(d) > 1024 {
			t.Fatalf("error page detail %q is outside RFC 6749 Section 5.2's charset or over 1 KiB", d)
		}
	}
	return ""
}

// TestAuthorizeErrorDescriptions walks every error path of the
// authorization endpoint, with hostile values where the request's own text
// can be echoed, and checks each answer's description (item 8 of issue 23:
// fosite's descriptions carry "§").
func TestAuthorizeErrorDescriptions(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	h := newHarness(t, harnessOpts{backend: "memory", now: now})
	parH := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) { c.RequirePAR = true }})
	challenge := oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())
	base := url.Values{
		"response_type": {"code"}, "client_id": {publicClient}, "redirect_uri": {publicRedirect},
		"scope": {"openid"}, "state": {"state-123456"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
	}
	with := func(h *harness, kv ...string) string {
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
	hostile := "\u00a7\"\\\u2026\u00e4<x>"

	// A browser signed in for the first-party public client (whose
	// private-use redirect needs one tap) and none other.
	signedIn := newBrowser(t)
	h.login(t, signedIn, with(h))

	pushed := func(h *harness) string {
		return h.push(t, publicClient, "", publicRedirect, oauth2.GenerateVerifier(), nil).str("request_uri")
	}
	expiredURI := pushed(h)
	usedURI := pushed(h)
	h.login(t, newBrowser(t), h.parAuthURL(publicClient, usedURI))

	for _, tc := range []struct {
		name string
		run  func(t *testing.T) page
		want string // the redirect's error code; "" for a page
	}{
		// Pages: the client or the redirect_uri cannot be trusted.
		{"malformed query", getURL(h.srv.URL + "/oauth2/authorize?client_id=%zz"), ""},
		{"duplicate parameter", getURL(with(h) + "&" + url.QueryEscape(hostile) + "=1&" + url.QueryEscape(hostile) + "=2"), ""},
		{"oversized state", getURL(with(h, "state", strings.Repeat("s", 4000))), ""},
		{"missing client_id", getURL(with(h, "client_id", "")), ""},
		{"unknown client", getURL(with(h, "client_id", "nobody"+hostile)), ""},
		{"unregistered redirect_uri", getURL(with(h, "redirect_uri", "com.evil.app:/cb"+hostile)), ""},
		{"missing redirect_uri with openid", getURL(with(h, "client_id", confClient, "redirect_uri", "")), ""},
		{"missing redirect_uri, several registered", getURL(with(h, "redirect_uri", "", "scope", "offline_access")), ""},
		// Redirects to the client.
		{"missing response_type", getURL(with(h, "response_type", "")), "unsupported_response_type"},
		{"response_type token", getURL(with(h, "response_type", "token")), "unsupported_response_type"},
		{"response_type hostile", getURL(with(h, "response_type", hostile)), "unsupported_response_type"},
		{"response_mode fragment", getURL(with(h, "response_mode", "fragment")), "invalid_request"},
		{"response_mode form_post", getURL(with(h, "response_mode", "form_post")), "invalid_request"},
		{"scope not allowed", getURL(with(h, "scope", "openid admin"+hostile)), "invalid_scope"},
		{"scope oversized", getURL(with(h, "scope", "openid "+strings.Repeat("x", 5000))), "invalid_scope"},
		{"missing state", getURL(with(h, "state", "")), "invalid_request"},
		{"PKCE missing", getURL(with(h, "code_challenge", "")), "invalid_request"},
		{"PKCE plain", getURL(with(h, "code_challenge_method", "plain")), "invalid_request"},
		{"PKCE unknown method", getURL(with(h, "code_challenge_method", hostile)), "invalid_request"},
		{"PKCE bad challenge", getURL(with(h, "code_challenge", "short"+hostile)), "invalid_request"},
		{"prompt unknown", getURL(with(h, "prompt", "sideways"+hostile)), "invalid_request"},
		{"prompt none with login", getURL(with(h, "prompt", "none login")), "invalid_request"},
		{"max_age negative", getURL(with(h, "max_age", "-1")), "invalid_request"},
		{"id_token_hint not ours", getURL(with(h, "id_token_hint", "eyJhbGciOiJub25lIn0.e30."+hostile)), "invalid_request"},
		{"request object", getURL(with(h, "request", "eyJhbGciOiJub25lIn0.e30.")), "request_not_supported"},
		{"request_uri not from PAR", getURL(with(h, "request_uri", "https://client.example/r"+hostile)), "request_uri_not_supported"},
		{"PAR required by the server", getURL(with(parH)), "invalid_request"},
		{"request_uri unknown", getURL(h.parAuthURL(publicClient, "urn:ietf:params:oauth:request_uri:"+hostile)), ""},
		{"request_uri expired", func(t *testing.T) page {
			mu.Lock()
			clock = clock.Add(10 * time.Minute)
			mu.Unlock()
			defer func() { mu.Lock(); clock = clock.Add(-10 * time.Minute); mu.Unlock() }()
			return get(t, newBrowser(t), h.parAuthURL(publicClient, expiredURI))
		}, ""},
		{"request_uri used", getURL(h.parAuthURL(publicClient, usedURI)), ""},
		{"request_uri used at issuance", func(t *testing.T) page {
			uri := pushed(h)
			b1, b2 := newBrowser(t), newBrowser(t)
			p1, p2 := get(t, b1, h.parAuthURL(publicClient, uri)), get(t, b2, h.parAuthURL(publicClient, uri))
			login := url.Values{"step": {"login"}, "username": {testUser}, "password": {testPassword}}
			if r := submit(t, b1, h.srv.URL, p1, login); r.loc == nil || r.loc.Query().Get("code") == "" {
				t.Fatalf("first use: %d %s", r.status, r.body)
			}
			return submit(t, b2, h.srv.URL, p2, url.Values{"step": {"login"}, "username": {testUser}, "password": {testPassword}})
		}, ""},
		{"prompt=none, no session", getURL(with(h, "prompt", "none")), "login_required"},
		{"prompt=none, max_age exceeded", func(t *testing.T) page {
			return getWith(t, signedIn, with(h, "prompt", "none", "max_age", "0"))
		}, "login_required"},
		{"prompt=none, consent missing", func(t *testing.T) page {
			return getWith(t, signedIn, with(h, "prompt", "none", "client_id", confClient, "redirect_uri", confRedirect))
		}, "consent_required"},
		{"prompt=none, identity not assured", func(t *testing.T) page {
			return getWith(t, signedIn, with(h, "prompt", "none"))
		}, "interaction_required"},
		{"access_denied", func(t *testing.T) page {
			b := newBrowser(t)
			p := get(t, b, with(h, "client_id", confClient, "redirect_uri", confRedirect))
			p = submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "username": {testUser}, "password": {testPassword}})
			return submit(t, b, h.srv.URL, p, url.Values{"step": {"consent"}, "decision": {"deny"}})
		}, "access_denied"},
		{"dpop_jkt malformed", func(t *testing.T) page {
			b := newBrowser(t)
			p := get(t, b, with(h, "dpop_jkt", "not-a-thumbprint"+hostile))
			return submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "username": {testUser}, "password": {testPassword}})
		}, "invalid_request"},
		{"forged CSRF", func(t *testing.T) page {
			b := newBrowser(t)
			p := get(t, b, with(h))
			p.body = strings.Replace(p.body, `name="csrf_token" value="`, `name="csrf_token" value="x`, 1)
			return submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}})
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkAuthorizeAnswer(t, tc.run(t)); got != tc.want {
				t.Fatalf("answer %q, want %q", got, tc.want)
			}
		})
	}
}

func getURL(u string) func(t *testing.T) page {
	return func(t *testing.T) page { return get(t, newBrowser(t), u) }
}

func getWith(t *testing.T, b *http.Client, u string) page { return get(t, b, u) }

// TestOtherEndpointsErrorDescriptions: the error bodies of the token,
// revocation, introspection, PAR, UserInfo and end_session endpoints,
// with hostile input, say their errors within RFC 6749 §5.2's charset and
// bounded.
func TestOtherEndpointsErrorDescriptions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	hostile := url.QueryEscape("\u00a7\"\\\u2026\u00e4" + strings.Repeat("y", 3000))
	pub := "client_id=" + publicClient + "&"
	descRe := regexp.MustCompile(`"error_description":"((?:[^"\\]|\\.)*)"`)
	check := func(t *testing.T, where, body string) {
		t.Helper()
		m := descRe.FindStringSubmatch(body)
		if m == nil {
			return
		}
		if d := m[1]; !allowedDescription(d) || strings.Contains(d, `\u`) || len(d) > 1024 {
			t.Errorf("%s: error_description %q (%d bytes) is outside RFC 6749 Section 5.2's charset or over 1 KiB", where, d, len(d))
		}
	}
	for _, path := range []string{"/oauth2/token", "/oauth2/revoke", "/oauth2/introspect", "/oauth2/par"} {
		for _, body := range []string{
			"",
			pub + "grant_type=" + hostile,
			pub + "grant_type=authorization_code&code=" + hostile,
			pub + "grant_type=refresh_token&refresh_token=" + hostile + "&scope=" + hostile,
			pub + "token=" + hostile + "&token_type_hint=" + hostile,
			"client_id=" + hostile + "&grant_type=authorization_code",
			pub + "response_type=code&redirect_uri=" + hostile + "&scope=" + hostile + "&code_challenge=" + hostile,
			pub + "response_type=" + hostile + "&redirect_uri=" + url.QueryEscape(publicRedirect) + "&scope=openid+" + hostile,
			pub + hostile + "=1&" + hostile + "=2",
		} {
			r := do(t, "POST", h.srv.URL+path, body, "")
			if r.status < 400 {
				continue
			}
			check(t, path+" "+body[:min(len(body), 60)], r.body)
		}
	}
	// UserInfo: the challenge and the body.
	for _, auth := range []string{"", "Bearer " + hostile, "DPoP " + hostile, "Basic " + hostile} {
		req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/oauth2/userinfo", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		p := readPage(t, resp)
		check(t, "userinfo "+auth[:min(len(auth), 20)], p.body)
		if c := resp.Header.Get("WWW-Authenticate"); !allowedDescription(strings.ReplaceAll(c, `"`, "")) || len(c) > 1200 {
			t.Errorf("userinfo %q: WWW-Authenticate %q", auth[:min(len(auth), 20)], c)
		}
	}
	// end_session: pages.
	for _, q := range []string{
		"state=" + strings.Repeat("s", 5000),
		"client_id=" + hostile + "&post_logout_redirect_uri=" + hostile,
		"post_logout_redirect_uri=" + hostile,
		"id_token_hint=" + hostile,
		"client_id=" + publicClient + "&post_logout_redirect_uri=" + hostile,
		hostile + "=1&" + hostile + "=2",
	} {
		p := get(t, newBrowser(t), h.srv.URL+"/oauth2/logout?"+q)
		if p.status < 400 {
			continue
		}
		checkAuthorizeAnswer(t, p)
	}
}
