package oauth_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"golang.org/x/oauth2"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/storage/memory"
)

// TestAuthorizeRequestRules: the authorization endpoint rules of issue 11
// item 6: a parameter sent twice is an error, never a code (RFC 6749 §3.1);
// response_mode=query is accepted and anything else refused; redirect_uri
// is compared exactly (RFC 9700 §2.1) except a loopback port (RFC 8252
// §7.3); the error page names the problem.
func TestAuthorizeRequestRules(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	// A signed-in browser: nothing below may yield a code without a form.
	b := newBrowser(t)
	h.login(t, b, h.authURL(confClient, confRedirect))

	challenge := oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())
	base := func(client, redirect string) string {
		q := url.Values{"response_type": {"code"}, "client_id": {client}, "scope": {"openid"},
			"state": {"state-rules"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
		if redirect != "" {
			q.Set("redirect_uri", redirect)
		}
		return q.Encode()
	}
	const (
		page    = "page"    // 400 error page naming the problem
		redir   = "redir"   // error redirect to the client, no code
		code    = "code"    // a code (silent: confidential client, consent given)
		oneTap  = "one-tap" // the one-tap page (public client)
		unknown = "The app that sent you here is not registered with this server."
		unreg   = "The app asked to return to an address that is not registered for it."
	)
	tests := []struct {
		name  string
		query string
		want  string
		text  string // on the page, or the error in the redirect
	}{
		{"valid", base(confClient, confRedirect), code, ""},
		{"response_mode=query accepted", base(confClient, confRedirect) + "&response_mode=query", code, ""},
		{"response_mode=fragment refused", base(confClient, confRedirect) + "&response_mode=fragment", redir, "invalid_request"},
		{"response_mode=form_post refused", base(confClient, confRedirect) + "&response_mode=form_post", redir, "invalid_request"},
		{"response_mode=bogus refused", base(confClient, confRedirect) + "&response_mode=bogus", page, "response mode this server does not support"},
		{"duplicate client_id", base(confClient, confRedirect) + "&client_id=" + confClient, page, "parameter client_id more than once"},
		{"duplicate scope", base(confClient, confRedirect) + "&scope=openid", page, "parameter scope more than once"},
		{"duplicate state", base(confClient, confRedirect) + "&state=other-state", page, "parameter state more than once"},
		{"duplicate redirect_uri", base(confClient, confRedirect) + "&redirect_uri=" + url.QueryEscape(confRedirect), page, "more than once"},
		{"duplicate key percent-encoded", base(confClient, confRedirect) + "&c%6Cient_id=" + confClient, page, "more than once"},
		{"duplicate empty value", base(confClient, confRedirect) + "&code_challenge_method=", page, "more than once"},
		{"missing client_id", strings.Replace(base(confClient, confRedirect), "client_id="+confClient, "", 1), page, "The client_id parameter is missing."},
		{"unknown client", base("no-such-client", confRedirect), page, unknown},
		{"redirect host case-folded", base(confClient, "https://APP.example.com/callback"), page, unreg},
		{"redirect scheme case-folded", base(confClient, "HTTPS://app.example.com/callback"), page, unreg},
		{"redirect path percent-encoded", base(confClient, "https://app.example.com/%63allback"), page, unreg},
		{"redirect trailing slash", base(confClient, confRedirect+"/"), page, unreg},
		{"redirect extra query", base(confClient, confRedirect+"?x=1"), page, unreg},
		{"redirect explicit default port", base(confClient, "https://app.example.com:443/callback"), page, unreg},
		{"redirect with userinfo", base(confClient, "https://user@app.example.com/callback"), page, unreg},
		{"redirect omitted, one registered", strings.Replace(base(confClient, ""), "scope=openid", "scope=offline_access", 1), code, ""},
		{"redirect omitted with openid", base(confClient, ""), page, "The redirect_uri parameter is missing (it is required with the openid scope)."},
		{"redirect omitted, several registered", base(publicClient, ""), page, "The redirect_uri parameter is missing."},
		{"private-use exact", base(publicClient, publicRedirect), oneTap, ""},
		{"private-use case-folded scheme", base(publicClient, "COM.example.app:/oauth2redirect"), page, unreg},
		{"loopback registered port-less, any port", base(publicClient, "http://127.0.0.1:49152/callback"), oneTap, ""},
		{"loopback without port", base(publicClient, "http://127.0.0.1/callback"), oneTap, ""},
		{"loopback other path", base(publicClient, "http://127.0.0.1:49152/Callback"), page, unreg},
		{"loopback encoded path", base(publicClient, "http://127.0.0.1:49152/%63allback"), page, unreg},
		{"loopback userinfo", base(publicClient, "http://evil@127.0.0.1:49152/callback"), page, unreg},
		{"loopback query added", base(publicClient, "http://127.0.0.1:49152/callback?x=1"), page, unreg},
		{"loopback other address", base(publicClient, "http://[::1]:49152/callback"), page, unreg},
		{"loopback non-numeric port", base(publicClient, "http://127.0.0.1:abc/callback"), page, unreg},
		{"loopback localhost", base(publicClient, "http://localhost:49152/callback"), page, unreg},
		{"state too long", strings.Replace(base(confClient, confRedirect), "state=state-rules", "state="+strings.Repeat("s", 3000), 1), page, "state parameter is too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := get(t, b, h.srv.URL+"/oauth2/authorize?"+tt.query)
			switch tt.want {
			case page:
				if p.status != http.StatusBadRequest || p.loc != nil || !strings.Contains(p.body, tt.text) {
					t.Errorf("want a 400 page saying %q, got %d %v: %s", tt.text, p.status, p.loc, p.body)
				}
			case redir:
				if p.loc == nil || p.loc.Query().Get("code") != "" || p.loc.Query().Get("error") != tt.text {
					t.Errorf("want an error redirect %q, got %d %v", tt.text, p.status, p.loc)
				}
			case code:
				if p.loc == nil || p.loc.Query().Get("code") == "" {
					t.Errorf("want a code, got %d %v: %s", p.status, p.loc, p.body)
				}
			case oneTap:
				if p.loc != nil || !strings.Contains(p.body, "Continue as") {
					t.Errorf("want the one-tap page, got %d %v: %s", p.status, p.loc, p.body)
				}
			}
		})
	}
}

// TestRegistrationRefusesEncodedDotSegments: "%2e%2e" is refused as ".."
// is.
func TestRegistrationRefusesEncodedDotSegments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		uri string
		ok  bool
	}{
		{"https://app.example.com/a/%2e%2e/cb", false},
		{"https://app.example.com/a/%2E%2E/cb", false},
		{"https://app.example.com/a/.%2e/cb", false},
		{"https://app.example.com/a/%2e/cb", false},
		{"com.example.app:/a/%2e%2e/cb", false},
		{"http://127.0.0.1/%2e%2e/cb", false},
		{"https://app.example.com/a/%2e%2ex/cb", true},
		{"https://app.example.com/a.b/cb", true},
	}
	for _, tt := range tests {
		err := oauth.ValidateRedirectURI(tt.uri)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateRedirectURI(%q) = %v, want ok %v", tt.uri, err, tt.ok)
		}
	}
}

// TestAuthorizeRefusalIsLogged: the log line of a refused authorization
// request gives the reason (and never the query).
func TestAuthorizeRefusalIsLogged(t *testing.T) {
	t.Parallel()
	var buf syncLogBuffer
	srv := httptest.NewUnstartedServer(nil)
	app, err := newServer(oauth.Config{Issuer: "http://" + srv.Listener.Addr().String(), Secret: []byte(testSecret)},
		oauth.Deps{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = app
	srv.Start()
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ query, reason string }{
		{"client_id=a&scope=openid&scope=secret-scope-value", `reason="duplicate parameter scope"`},
		{"client_id=nobody&state=abcdefgh", `reason="unknown client_id"`},
		{"state=abcdefgh", `reason="missing client_id"`},
	} {
		resp, err := http.Get(srv.URL + "/oauth2/authorize?" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d", tc.query, resp.StatusCode)
		}
		if !strings.Contains(buf.String(), tc.reason) {
			t.Errorf("%s: log lacks %s:\n%s", tc.query, tc.reason, buf.String())
		}
	}
	if strings.Contains(buf.String(), "secret-scope-value") {
		t.Error("the query string reached the log")
	}
}

type syncLogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncLogBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLogBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
