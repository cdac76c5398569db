package oauth_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/authd/authd/storage"
)

// TestOIDCSignInGoOIDC signs in as a relying party built on
// github.com/coreos/go-oidc/v3 and golang.org/x/oauth2 would (issue 12,
// first Done-when line): discovery, the code flow with PKCE and a nonce,
// ID token verification against the JWKS, UserInfo, a refresh whose new ID
// token verifies with the original auth_time, and a retried exchange that
// returns the identical ID token. On PostgreSQL with Redis and on memory.
func TestOIDCSignInGoOIDC(t *testing.T) {
	for _, backend := range []string{"memory", "postgres"} { // postgres: with Redis
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var h *harness
			if backend == "postgres" {
				h, _, _ = ownRedisHarness(t, nil) // PostgreSQL and a real Redis
			} else {
				h = newHarness(t, harnessOpts{backend: backend})
			}
			ctx := oidc.ClientContext(context.Background(), http.DefaultClient)
			provider, err := oidc.NewProvider(ctx, h.srv.URL)
			if err != nil {
				t.Fatalf("discovery: %v", err)
			}
			var claims struct {
				UserinfoEndpoint string `json:"userinfo_endpoint"`
				EndSession       string `json:"end_session_endpoint"`
			}
			if err := provider.Claims(&claims); err != nil {
				t.Fatal(err)
			}
			conf := h.oauthConfig(publicClient)
			conf.Endpoint = provider.Endpoint()
			conf.Endpoint.AuthStyle = oauth2.AuthStyleInParams
			conf.Scopes = []string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess, "profile"}
			verifier := provider.Verifier(&oidc.Config{ClientID: publicClient})

			pkce := oauth2.GenerateVerifier()
			nonce := "n-" + oauth2.GenerateVerifier()[:20]
			browser := newBrowser(t)
			loc := h.login(t, browser, conf.AuthCodeURL("state-oidc-1", oauth2.S256ChallengeOption(pkce), oidc.Nonce(nonce)))
			code := loc.Query().Get("code")
			if code == "" || loc.Query().Get("iss") != h.srv.URL {
				t.Fatalf("callback %s: want code and iss", loc)
			}
			tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(pkce))
			if err != nil {
				t.Fatalf("exchange: %v", err)
			}
			raw, _ := tok.Extra("id_token").(string)
			idt, err := verifier.Verify(ctx, raw)
			if err != nil {
				t.Fatalf("ID token does not verify: %v", err)
			}
			if idt.Nonce != nonce {
				t.Fatalf("nonce %q, want %q", idt.Nonce, nonce)
			}
			if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
				t.Fatalf("at_hash: %v", err)
			}
			var c struct {
				AZP      string `json:"azp"`
				AuthTime int64  `json:"auth_time"`
				SID      string `json:"sid"`
			}
			if err := idt.Claims(&c); err != nil {
				t.Fatal(err)
			}
			if c.AZP != publicClient || c.AuthTime == 0 || c.SID == "" || idt.Subject == "" {
				t.Fatalf("claims azp=%q auth_time=%d sid=%q sub=%q", c.AZP, c.AuthTime, c.SID, idt.Subject)
			}

			// UserInfo: the same sub.
			ui, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
			if err != nil {
				t.Fatalf("userinfo: %v", err)
			}
			if ui.Subject != idt.Subject {
				t.Fatalf("userinfo sub %q, ID token sub %q", ui.Subject, idt.Subject)
			}

			// A retried exchange (same code, same verifier, inside the
			// window) returns the identical ID token, byte for byte.
			again := h.exchange(t, publicClient, code, pkce, publicRedirect)
			if again.status != 200 || again.str("id_token") != raw || again.str("access_token") != tok.AccessToken {
				t.Fatalf("retried exchange: %d; identical ID token: %v", again.status, again.str("id_token") == raw)
			}

			// Refresh: a new ID token that verifies, same sub and
			// auth_time (OIDC Core §12.2), no nonce.
			refreshed, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
			if err != nil {
				t.Fatalf("refresh: %v", err)
			}
			raw2, _ := refreshed.Extra("id_token").(string)
			idt2, err := verifier.Verify(ctx, raw2)
			if err != nil {
				t.Fatalf("refreshed ID token does not verify: %v", err)
			}
			var c2 struct {
				AuthTime int64 `json:"auth_time"`
			}
			_ = idt2.Claims(&c2)
			if raw2 == raw || idt2.Subject != idt.Subject || c2.AuthTime != c.AuthTime || idt2.Nonce != "" {
				t.Fatalf("refreshed ID token: new=%v sub=%q auth_time=%d (want %d) nonce=%q", raw2 != raw, idt2.Subject, c2.AuthTime, c.AuthTime, idt2.Nonce)
			}
			// A retried refresh returns the same ID token too.
			rr := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient},
				"refresh_token": {tok.RefreshToken}}, "", "")
			if rr.status != 200 || rr.str("id_token") != raw2 {
				t.Fatalf("retried refresh: %d; identical ID token: %v", rr.status, rr.str("id_token") == raw2)
			}

			// RP-initiated logout through end_session_endpoint with the
			// ID token as hint and a registered post_logout_redirect_uri:
			// redirected with state, and the session is gone.
			registerPostLogout(t, h, publicClient, "com.example.app:/signed-out")
			if claims.EndSession == "" {
				t.Fatal("no end_session_endpoint in discovery")
			}
			lo := get(t, browser, claims.EndSession+"?"+url.Values{"id_token_hint": {raw},
				"post_logout_redirect_uri": {"com.example.app:/signed-out"}, "state": {"bye-1"}}.Encode())
			if lo.loc == nil || lo.loc.Scheme != "com.example.app" || lo.loc.Query().Get("state") != "bye-1" {
				t.Fatalf("logout: %d %v", lo.status, lo.loc)
			}
			if p := get(t, browser, conf.AuthCodeURL("state-oidc-2", oauth2.S256ChallengeOption(pkce))); !strings.Contains(p.body, `name="password"`) {
				t.Fatalf("session survived the logout: %d %v", p.status, p.loc)
			}
		})
	}
}

// TestUserinfoErrors: RFC 6750 §3 challenges.
func TestUserinfoErrors(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	do := func(method, auth, body string) *http.Response {
		req, _ := http.NewRequest(method, h.srv.URL+"/oauth2/userinfo", strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for name, resp := range map[string]*http.Response{
		"bad bearer":    do(http.MethodGet, "Bearer ory_at_nope.nope", ""),
		"bad post body": do(http.MethodPost, "", "access_token=garbage"),
	} {
		if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `Bearer`) ||
			!strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("%s: %d %q", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if resp := do(http.MethodGet, "", ""); resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if resp := do(http.MethodGet, "Basic Zm9vOmJhcg==", ""); resp.StatusCode != 400 {
		t.Errorf("Basic: %d", resp.StatusCode)
	}
}

// registerPostLogout adds a post_logout_redirect_uri to a seeded client.
func registerPostLogout(t *testing.T, h *harness, clientID, uri string) {
	t.Helper()
	fc, err := h.store.GetClient(context.Background(), clientID)
	if err != nil {
		t.Fatal(err)
	}
	c := fc.(*storage.Client).Clone()
	c.PostLogoutRedirectURIs = append(c.PostLogoutRedirectURIs, uri)
	c.UpdatedAt = time.Time{}
	if err := h.store.UpdateClient(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// TestEndSessionAsksWithoutHint: without an id_token_hint the user is
// asked (a CSRF-protected form); confirming ends the session and returns
// to the registered post_logout_redirect_uri; an unregistered one is never
// redirected to (RP-Initiated Logout 1.0 §2, §3).
func TestEndSessionAsksWithoutHint(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	registerPostLogout(t, h, publicClient, "https://app.example.com/bye")
	b := newBrowser(t)
	h.login(t, b, h.oauthConfig(publicClient).AuthCodeURL("state-xxxxxx", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))

	bad := get(t, b, h.srv.URL+"/oauth2/logout?"+url.Values{"client_id": {publicClient},
		"post_logout_redirect_uri": {"https://evil.example/bye"}}.Encode())
	if bad.loc != nil || bad.status != http.StatusBadRequest {
		t.Fatalf("unregistered post_logout_redirect_uri: %d %v", bad.status, bad.loc)
	}
	p := get(t, b, h.srv.URL+"/oauth2/logout?"+url.Values{"client_id": {publicClient},
		"post_logout_redirect_uri": {"https://app.example.com/bye"}, "state": {"s1"}}.Encode())
	if p.loc != nil || !strings.Contains(p.body, `name="csrf_token"`) {
		t.Fatalf("no confirmation form: %d %v", p.status, p.loc)
	}
	// A wrong CSRF token: refused, still signed in.
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/logout", strings.NewReader("client_id="+publicClient+"&csrf_token=forged"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", h.srv.URL)
	if resp, err := b.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("logout with a forged CSRF token: %v %v", resp.StatusCode, err)
	}
	// A relying party's POST (no csrf_token) is answered as the same
	// request by GET would be, without a redirect (issue 30: a POSTed
	// logout never becomes a URL): the confirmation form again, not a
	// sign-out.
	req, _ = http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/logout", strings.NewReader("client_id="+publicClient))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, err := b.Do(req); err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Location") != "" {
		t.Fatalf("RP POST to end_session_endpoint: %v %v", resp.StatusCode, err)
	}
	hidden := url.Values{}
	for _, m := range regexp.MustCompile(`type="hidden" name="(client_id|post_logout_redirect_uri|state)" value="([^"]*)"`).FindAllStringSubmatch(p.body, -1) {
		hidden.Set(m[1], html.UnescapeString(m[2]))
	}
	if hidden.Get("post_logout_redirect_uri") == "" || hidden.Get("state") != "s1" {
		t.Fatalf("the form does not carry the request on: %v", hidden)
	}
	done := submit(t, b, h.srv.URL, p, hidden)
	if done.loc == nil || done.loc.Host != "app.example.com" || done.loc.Query().Get("state") != "s1" {
		t.Fatalf("after confirming: %d %v", done.status, done.loc)
	}
	if p := get(t, b, h.oauthConfig(publicClient).AuthCodeURL("state-yyyyyy", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))); !strings.Contains(p.body, `name="password"`) {
		t.Fatal("session survived the confirmed logout")
	}
}

// TestRefreshIssuedBeforeOIDC: a refresh token whose stored session
// predates ID tokens (no sid, auth_time or nonce in it) keeps working; its
// refresh gets an ID token for the same sub, without auth_time rather than
// an invented one (issue 12 item 2).
func TestRefreshIssuedBeforeOIDC(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "postgres"})
	code, v := h.code(t, publicClient)
	first := h.redeem(t, code, v)
	if _, err := h.pool.Exec(context.Background(), `UPDATE refresh_tokens SET session = session - 'extra'`); err != nil {
		t.Fatal(err)
	}
	r := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient},
		"refresh_token": {first.str("refresh_token")}}, "", "")
	if r.status != 200 || r.str("id_token") == "" {
		t.Fatalf("refresh of a pre-OIDC grant: %d %v", r.status, r.body)
	}
	provider, err := oidc.NewProvider(context.Background(), h.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	idt, err := provider.Verifier(&oidc.Config{ClientID: publicClient}).Verify(context.Background(), r.str("id_token"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	_ = idt.Claims(&c)
	if c["auth_time"] != nil || c["sid"] != nil || idt.Subject == "" {
		t.Fatalf("claims %v", c)
	}
}
