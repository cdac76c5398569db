package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/authd/authd/oauth"
)

// TestValidateRedirectURI: redirect URIs accepted and refused at
// registration, per RFC 6749 §3.1.2, RFC 8252 §7-8 and RFC 9700 §2.1.
func TestValidateRedirectURI(t *testing.T) {
	tests := []struct {
		uri string
		ok  bool
		why string
	}{
		// Accepted.
		{"https://app.example.com/callback", true, "https with host"},
		{"https://app.example.com:8443/cb?tenant=a", true, "port and query are fine (RFC 6749 §3.1.2)"},
		{"https://127.0.0.1/cb", true, "https on an IP literal"},
		{"com.example.app:/oauth2redirect", true, "private-use reverse-domain scheme (RFC 8252 §7.1)"},
		{"com.example.app:/oauth2redirect/example-provider", true, "the RFC 8252 §7.1 example"},
		{"com.googleusercontent.apps.1234-abcd:/cb", true, "multi-label reverse domain"},
		{"http://127.0.0.1/callback", true, "loopback IPv4 without port (RFC 8252 §7.3)"},
		{"http://127.0.0.1:8080/callback", true, "loopback IPv4 with port"},
		{"http://[::1]/callback", true, "loopback IPv6 (RFC 8252 §7.3)"},
		{"http://[::1]:51004/cb", true, "loopback IPv6 with port"},
		{"https://app.example.com/cb%20space", true, "percent-encoding"},
		// Refused.
		{"", false, "empty"},
		{"/callback", false, "relative (RFC 6749 §3.1.2)"},
		{"app.example.com/cb", false, "no scheme"},
		{"https://app.example.com/cb#frag", false, "fragment (RFC 6749 §3.1.2)"},
		{"https://app.example.com/cb#", false, "empty fragment"},
		{"https://*.example.com/cb", false, "wildcard host (RFC 9700 §2.1)"},
		{"https://app.example.com/*", false, "wildcard path (RFC 9700 §2.1)"},
		{"http://app.example.com/cb", false, "cleartext http off the loopback (RFC 9700 §4.1)"},
		{"http://localhost/cb", false, "localhost (RFC 8252 §8.3)"},
		{"http://localhost:8080/cb", false, "localhost with port (RFC 8252 §8.3)"},
		{"http://127.0.0.2/cb", false, "other loopback address"},
		{"http://127.0.0.1.nip.io/cb", false, "a name that resolves to loopback"},
		{"http://[0:0:0:0:0:0:0:1]/cb", false, "non-canonical IPv6 loopback"},
		{"https://user:pass@app.example.com/cb", false, "user information"},
		{"https:///cb", false, "https without host"},
		{"https://app.example.com/a/../cb", false, "dot-segment"},
		{"https://app.example.com:99999/cb", false, "port out of range"},
		{"https://app.example.com/c b", false, "raw space"},
		{"https://app.example.com/cb\n", false, "control character"},
		{`https://app.example.com\@evil.example/cb`, false, "backslash"},
		{"https://app.example.com/ü", false, "raw non-ASCII"},
		{"myapp:/callback", false, "private-use scheme that is not a reverse domain (RFC 8252 §7.1)"},
		{"com.example.app://callback", false, "private-use scheme with an authority (RFC 8252 §7.1)"},
		{"com.example.app:callback", false, "opaque private-use URI"},
		{"com.example.app:", false, "private-use scheme without path"},
		{"com..app:/cb", false, "empty domain label"},
		{"javascript:alert(1)", false, "javascript"},
		{"data:text/html,hi", false, "data"},
		{"file:///etc/passwd", false, "file"},
		{"https://app.example.com/" + strings.Repeat("a", 2048), false, "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.why, func(t *testing.T) {
			err := oauth.ValidateRedirectURI(tt.uri)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidateRedirectURI(%q) = %v, want ok=%v", tt.uri, err, tt.ok)
			}
			if err != nil {
				re, isReg := err.(*oauth.RegistrationError)
				if !isReg || re.Code != "invalid_redirect_uri" || re.Description == "" {
					t.Fatalf("error %#v, want *RegistrationError invalid_redirect_uri", err)
				}
			}
		})
	}
}

// TestLoopbackRedirectAnyPort: a native app registered (through the admin
// API) with port-less loopback redirect URIs is redirected to whatever port
// it asks for at authorization time (RFC 8252 §7.3), for IPv4 and IPv6, and
// redeems the code with that URI; another path is refused.
func TestLoopbackRedirectAnyPort(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	res := h.admin(t, adminReq{method: "POST", path: "/admin/clients", body: `{"client_name":"Desktop",` +
		`"redirect_uris":["http://127.0.0.1/callback","http://[::1]/callback"],"token_endpoint_auth_method":"none","skip_consent":true}`})
	wantStatus(t, "register", res, http.StatusCreated, "")
	id := res.str("client_id")
	for _, redirect := range []string{"http://127.0.0.1:49152/callback", "http://127.0.0.1:8080/callback", "http://[::1]:50123/callback", "http://127.0.0.1/callback"} {
		t.Run(redirect, func(t *testing.T) {
			want, _ := url.Parse(redirect)
			v := oauth2.GenerateVerifier()
			conf := &oauth2.Config{ClientID: id, RedirectURL: redirect, Scopes: []string{"openid"},
				Endpoint: oauth2.Endpoint{AuthURL: h.srv.URL + "/oauth2/authorize", TokenURL: h.srv.URL + "/oauth2/token"}}
			loc := h.login(t, newBrowser(t), conf.AuthCodeURL("state-loop", oauth2.S256ChallengeOption(v)))
			if loc.Scheme != "http" || loc.Host != want.Host || loc.Path != want.Path || loc.Query().Get("code") == "" {
				t.Fatalf("redirected to %s, want %s with a code", loc, redirect)
			}
			tr := h.exchange(t, id, loc.Query().Get("code"), v, redirect)
			if tr.status != http.StatusOK || tr.str("access_token") == "" {
				t.Fatalf("exchange: %d %v", tr.status, tr.body)
			}
		})
	}
	// Port-agnostic, not path-agnostic: another path is not redirected to.
	conf := &oauth2.Config{ClientID: id, RedirectURL: "http://127.0.0.1:49152/other",
		Endpoint: oauth2.Endpoint{AuthURL: h.srv.URL + "/oauth2/authorize"}}
	p := get(t, newBrowser(t), conf.AuthCodeURL("state-loop", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	if p.loc != nil || p.status != http.StatusBadRequest {
		t.Fatalf("unregistered loopback path: %d, redirect %v", p.status, p.loc)
	}
}

// TestLoopbackRedirectBadPort: a loopback redirect whose port is not a
// canonical TCP port (zero, out of range, a leading zero, empty) is no
// registered redirect: an error page, never a redirect.
func TestLoopbackRedirectBadPort(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	res := h.admin(t, adminReq{method: "POST", path: "/admin/clients", body: `{"client_name":"Desktop",` +
		`"redirect_uris":["http://127.0.0.1/callback","http://[::1]/callback"],"token_endpoint_auth_method":"none","skip_consent":true}`})
	wantStatus(t, "register", res, http.StatusCreated, "")
	id := res.str("client_id")
	for _, redirect := range []string{"http://127.0.0.1:0/callback", "http://127.0.0.1:99999/callback",
		"http://127.0.0.1:05000/callback", "http://127.0.0.1:/callback", "http://[::1]:0/callback", "http://[::1]:65536/callback",
		"http://127.0.0.1:+80/callback"} {
		conf := &oauth2.Config{ClientID: id, RedirectURL: redirect, Endpoint: oauth2.Endpoint{AuthURL: h.srv.URL + "/oauth2/authorize"}}
		p := get(t, newBrowser(t), conf.AuthCodeURL("state-port", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
		if p.loc != nil || p.status != http.StatusBadRequest {
			t.Errorf("%s: %d, redirect %v; want 400 and no redirect", redirect, p.status, p.loc)
		}
	}
}
