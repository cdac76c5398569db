package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/authd/authd/oauth"
)

// TestFullLogin drives a complete login with golang.org/x/oauth2 and its
// PKCE helpers: authorize → login form → consent → code → token →
// introspect (active) → refresh → revoke → introspect (inactive).
func TestFullLogin(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})
			ctx := t.Context()
			conf := h.oauthConfig(confClient) // confidential client: shows consent
			verifier := oauth2.GenerateVerifier()
			b := newBrowser(t)

			authURL := conf.AuthCodeURL("state-ü-✓", oauth2.S256ChallengeOption(verifier))
			p := get(t, b, authURL)
			if p.status != 200 || !strings.Contains(p.body, `name="username"`) {
				t.Fatalf("login page: %d %s", p.status, p.body)
			}
			// A wrong password shows the form again, without saying which
			// field was wrong.
			p = submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "username": {testUser}, "password": {"nope"}})
			if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "Wrong username or password") {
				t.Fatalf("wrong password: %d %s", p.status, p.body)
			}
			p = submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "username": {testUser}, "password": {testPassword}})
			if !strings.Contains(p.body, `value="allow"`) || !strings.Contains(p.body, "Example Web") || !strings.Contains(p.body, "offline_access") {
				t.Fatalf("consent page: %d %s", p.status, p.body)
			}
			p = submit(t, b, h.srv.URL, p, url.Values{"step": {"consent"}, "decision": {"allow"}})
			if p.status != http.StatusSeeOther || p.loc == nil {
				t.Fatalf("after consent: %d %s", p.status, p.body)
			}
			q := p.loc.Query()
			if got := p.loc.Scheme + "://" + p.loc.Host + p.loc.Path; got != confRedirect {
				t.Fatalf("redirected to %s", got)
			}
			if q.Get("state") != "state-ü-✓" {
				t.Errorf("state = %q", q.Get("state"))
			}
			if q.Get("iss") != h.srv.URL { // RFC 9207
				t.Errorf("iss = %q, want %q", q.Get("iss"), h.srv.URL)
			}

			tok, err := conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
			if err != nil {
				t.Fatalf("exchange: %v", err)
			}
			if tok.AccessToken == "" || tok.RefreshToken == "" {
				t.Fatalf("token: %+v", tok)
			}
			if !h.introspect(t, tok.AccessToken) {
				t.Fatal("access token inactive after exchange")
			}

			// Refresh: rotation gives a new pair; the old refresh token dies.
			expired := *tok
			expired.Expiry = time.Now().Add(-time.Minute)
			tok2, err := conf.TokenSource(ctx, &expired).Token()
			if err != nil {
				t.Fatalf("refresh: %v", err)
			}
			if tok2.AccessToken == tok.AccessToken || tok2.RefreshToken == tok.RefreshToken || tok2.RefreshToken == "" {
				t.Fatal("refresh did not rotate the tokens")
			}
			if !h.introspect(t, tok2.AccessToken) {
				t.Fatal("refreshed access token inactive")
			}
			if h.introspect(t, tok.RefreshToken) {
				t.Fatal("rotated refresh token still active")
			}

			// Revoke the refresh token (RFC 7009): its access token goes too.
			res := h.postForm(t, "/oauth2/revoke", url.Values{"token": {tok2.RefreshToken}, "token_type_hint": {"refresh_token"}}, confClient, confSecret)
			if res.status != 200 {
				t.Fatalf("revoke: %d %v", res.status, res.body)
			}
			if h.introspect(t, tok2.RefreshToken) || h.introspect(t, tok2.AccessToken) {
				t.Fatal("tokens still active after revocation")
			}

			// A second authorization in the same browser skips the password.
			v2 := oauth2.GenerateVerifier()
			p = get(t, b, conf.AuthCodeURL("state-again", oauth2.S256ChallengeOption(v2)))
			if strings.Contains(p.body, `name="password"`) {
				t.Fatal("second authorization asked for the password again")
			}
		})
	}
}

// TestDuplicateExchangeWithoutReplayCache: with the replay cache disabled,
// a second exchange of one code gets invalid_grant and the first tokens are
// revoked (RFC 6749 §4.1.2) — the behaviour authd improves on.
func TestDuplicateExchangeWithoutReplayCache(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend, cfg: func(c *oauth.Config) { c.DisableReplay = true }})
			code, v := h.code(t, publicClient)
			first := h.redeem(t, code, v)
			second := h.exchange(t, publicClient, code, v, publicRedirect)
			if second.status != 400 || second.str("error") != "invalid_grant" {
				t.Fatalf("second: %d %v", second.status, second.body)
			}
			if h.introspect(t, first.str("access_token")) {
				t.Fatal("tokens of a reused code must be revoked")
			}
		})
	}
}

// TestWrongVerifierDoesNotConsumeCode: a token request with a wrong
// code_verifier fails with invalid_grant and the right verifier still
// redeems the code afterwards.
func TestWrongVerifierDoesNotConsumeCode(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})
			code, v := h.code(t, publicClient)
			for _, bad := range []string{oauth2.GenerateVerifier(), "short", ""} {
				res := h.exchange(t, publicClient, code, bad, publicRedirect)
				if res.status != 400 || (res.str("error") != "invalid_grant" && res.str("error") != "invalid_request") {
					t.Fatalf("verifier %q: %d %v", bad, res.status, res.body)
				}
			}
			res := h.exchange(t, publicClient, code, v, publicRedirect)
			if res.status != 200 || res.str("access_token") == "" {
				t.Fatalf("right verifier after wrong ones: %d %v", res.status, res.body)
			}
		})
	}
}

// TestPKCERequiredAtAuthorize: an authorization request without
// code_challenge is refused at the redirect with invalid_request
// (RFC 9700 §2.1.1), as is plain.
func TestPKCERequiredAtAuthorize(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	conf := h.oauthConfig(publicClient)
	for name, opts := range map[string][]oauth2.AuthCodeOption{
		"missing": nil,
		"plain":   {oauth2.SetAuthURLParam("code_challenge", strings.Repeat("a", 43)), oauth2.SetAuthURLParam("code_challenge_method", "plain")},
		"short":   {oauth2.SetAuthURLParam("code_challenge", "abc"), oauth2.SetAuthURLParam("code_challenge_method", "S256")},
	} {
		t.Run(name, func(t *testing.T) {
			p := get(t, newBrowser(t), conf.AuthCodeURL("state-5678", opts...))
			if p.loc == nil || p.loc.Query().Get("error") != "invalid_request" {
				t.Fatalf("got %d loc=%v body=%s", p.status, p.loc, p.body)
			}
			if p.loc.Query().Get("iss") != h.srv.URL || p.loc.Query().Get("state") != "state-5678" {
				t.Fatalf("error redirect lacks iss/state: %v", p.loc)
			}
		})
	}
}

// TestConcurrentRedemption races 32 goroutines on one code with the replay
// cache disabled: exactly one 200, one token pair in the database, the rest
// invalid_grant, never a 500.
func TestConcurrentRedemption(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend, cfg: func(c *oauth.Config) { c.DisableReplay = true }})
			code, v := h.code(t, publicClient)
			results := h.raceExchange(t, 32, code, v)
			ok := 0
			for _, r := range results {
				switch {
				case r.status == 200:
					ok++
				case r.status == 400 && r.str("error") == "invalid_grant":
				default:
					t.Errorf("unexpected answer %d %v", r.status, r.body)
				}
			}
			if ok != 1 {
				t.Fatalf("%d goroutines got tokens, want exactly 1", ok)
			}
			if h.pool != nil {
				if access, refresh := countTokens(t, h); access != 1 || refresh != 1 {
					t.Fatalf("database holds %d access and %d refresh tokens, want one pair", access, refresh)
				}
			}
		})
	}
}
