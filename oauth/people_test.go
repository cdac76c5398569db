package oauth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/storage"
)

// people returns an identity service on the harness's store (what the
// "authd users" commands use).
func (h *harness) people() *identity.Service {
	return identity.New(h.store, identity.Options{Passwords: testPasswords})
}

// introspectSub asks, as admin, about token: active, and its sub.
func (h *harness) introspectSub(t testing.TB, token string) (bool, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Active bool   `json:"active"`
		Sub    string `json:"sub"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Active, out.Sub
}

// authURL is an authorization URL for client at redirect with scopes.
func (h *harness) authURL(clientID, redirect string, scopes ...string) string {
	conf := h.oauthConfig(clientID)
	conf.RedirectURL = redirect
	if len(scopes) > 0 {
		conf.Scopes = scopes
	}
	return conf.AuthCodeURL("state-people", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
}

// signInAs completes a login form on p as user/password.
func (h *harness) signInAs(t testing.TB, b *http.Client, p page, user, password string) page {
	t.Helper()
	if !strings.Contains(p.body, `name="password"`) {
		t.Fatalf("expected the login form, got %d: %s", p.status, p.body)
	}
	return submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "username": {user}, "password": {password}})
}

// tokensFor runs a full login for the public client with browser b (which
// may already be signed in) and returns the token response.
func (h *harness) tokensFor(t testing.TB, b *http.Client, user, password string) tokenResult {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	conf := h.oauthConfig(publicClient)
	p := get(t, b, conf.AuthCodeURL("state-people", oauth2.S256ChallengeOption(verifier)))
	if strings.Contains(p.body, `name="password"`) {
		p = h.signInAs(t, b, p, user, password)
	}
	if strings.Contains(p.body, `value="continue"`) {
		p = submit(t, b, h.srv.URL, p, url.Values{"step": {"continue"}})
	}
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		t.Fatalf("no code: %d %s", p.status, p.body)
	}
	return h.redeem(t, p.loc.Query().Get("code"), verifier)
}

// TestSubjectStableAcrossRename: sub is an opaque value, the same before
// and after a rename, and the token issued before the rename still
// introspects with it.
func TestSubjectStableAcrossRename(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})
			before := h.tokensFor(t, newBrowser(t), testUser, testPassword)
			active, sub := h.introspectSub(t, before.str("access_token"))
			if !active || sub == "" || sub == testUser {
				t.Fatalf("introspect before rename: active %v, sub %q (want an opaque sub, not the username)", active, sub)
			}
			if _, err := h.people().Rename(t.Context(), testUser, "alicia"); err != nil {
				t.Fatal(err)
			}
			after := h.tokensFor(t, newBrowser(t), "alicia", testPassword)
			if _, sub2 := h.introspectSub(t, after.str("access_token")); sub2 != sub {
				t.Errorf("sub after rename = %q, want %q", sub2, sub)
			}
			if active, sub3 := h.introspectSub(t, before.str("access_token")); !active || sub3 != sub {
				t.Errorf("old token after rename: active %v sub %q", active, sub3)
			}
			// The old name no longer signs in.
			ob := newBrowser(t)
			p := h.signInAs(t, ob, get(t, ob, h.authURL(publicClient, publicRedirect)), testUser, testPassword)
			if p.status != http.StatusUnauthorized {
				t.Errorf("old username signed in: %d", p.status)
			}
		})
	}
}

// TestUsernamePRECIS: "Alice" signs in as alice (RFC 8265 §3.3).
func TestUsernamePRECIS(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	want, err := h.people().Get(t.Context(), testUser)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Alice", "ALICE", "ａｌｉｃｅ"} {
		res := h.tokensFor(t, newBrowser(t), name, testPassword)
		if _, sub := h.introspectSub(t, res.str("access_token")); sub != want.Subject {
			t.Errorf("%q signed in as sub %q, want alice's %q", name, sub, want.Subject)
		}
	}
	zb := newBrowser(t)
	p := h.signInAs(t, zb, get(t, zb, h.authURL(publicClient, publicRedirect)), "ali\u200dce", testPassword)
	if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "Wrong username or password.") {
		t.Errorf("zero-width username: %d", p.status)
	}
}

// TestDeleteAndRecreate: a user deleted and added again under the same
// username has a new sub and none of the old grants.
func TestDeleteAndRecreate(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})
			ctx := t.Context()
			svc := h.people()
			old := h.tokensFor(t, newBrowser(t), testUser, testPassword)
			_, oldSub := h.introspectSub(t, old.str("access_token"))
			// A remembered consent for the confidential client.
			b := newBrowser(t)
			h.login(t, b, h.authURL(confClient, confRedirect))
			if _, err := svc.Delete(ctx, testUser); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Add(ctx, identity.NewUser{Username: testUser, Password: testPassword}); err != nil {
				t.Fatal(err)
			}
			if active, _ := h.introspectSub(t, old.str("access_token")); active {
				t.Error("old access token still active after delete + re-add")
			}
			if res := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient},
				"refresh_token": {old.str("refresh_token")}}, "", ""); res.status == 200 {
				t.Error("old refresh token still works after delete + re-add")
			}
			fresh := h.tokensFor(t, newBrowser(t), testUser, testPassword)
			if _, sub := h.introspectSub(t, fresh.str("access_token")); sub == oldSub || sub == "" {
				t.Errorf("re-created user's sub = %q, old %q: want a new one", sub, oldSub)
			}
			// The old consent is not inherited: the consent page shows.
			b2 := newBrowser(t)
			p := h.signInAs(t, b2, get(t, b2, h.authURL(confClient, confRedirect)), testUser, testPassword)
			if !strings.Contains(p.body, `value="allow"`) {
				t.Errorf("re-created user skipped consent: %d %v", p.status, p.loc)
			}
			if cs, _ := svc.Consents(ctx, testUser); len(cs) != 0 {
				t.Errorf("re-created user has consents %v", cs)
			}
		})
	}
}

// TestSignOutKillsCopiedCookie: a session cookie copied before sign-out
// gets the login form afterwards.
func TestSignOutKillsCopiedCookie(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})
			b := newBrowser(t)
			h.login(t, b, h.authURL(confClient, confRedirect))
			u, _ := url.Parse(h.srv.URL)
			copied := newBrowser(t)
			copied.Jar.SetCookies(u, b.Jar.Cookies(u)) // the attacker's copy
			// The copy works before sign-out (a confidential client with a
			// remembered consent: silent).
			if p := get(t, copied, h.authURL(confClient, confRedirect)); p.loc == nil {
				t.Fatalf("copied cookie before sign-out: %d %s", p.status, p.body)
			}
			p := get(t, b, h.srv.URL+"/logout")
			if p = submit(t, b, h.srv.URL, p, url.Values{}); !strings.Contains(p.body, "Signed out") {
				t.Fatalf("sign-out: %d %s", p.status, p.body)
			}
			if p := get(t, copied, h.authURL(confClient, confRedirect)); !strings.Contains(p.body, `name="password"`) {
				t.Errorf("copied cookie after sign-out: %d %v, want the login form", p.status, p.loc)
			}
			// Nothing to sign out of any more.
			if p := get(t, b, h.srv.URL+"/logout"); !strings.Contains(p.body, "nothing to sign out of") {
				t.Errorf("GET /logout without a session: %s", p.body)
			}
		})
	}
}

// TestLifecycleRevokes: disable, delete and set-password each make the
// user's access tokens introspect inactive, refresh fail, pending codes
// fail, and end their sessions.
func TestLifecycleRevokes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		op   func(ctx context.Context, svc *identity.Service) error
	}{
		{"disable", func(ctx context.Context, svc *identity.Service) error {
			_, err := svc.Disable(ctx, testUser)
			return err
		}},
		{"delete", func(ctx context.Context, svc *identity.Service) error {
			_, err := svc.Delete(ctx, testUser)
			return err
		}},
		{"set-password", func(ctx context.Context, svc *identity.Service) error {
			_, err := svc.SetPassword(ctx, testUser, "a brand new passphrase")
			return err
		}},
	}
	for _, backend := range backends {
		for _, tt := range tests {
			t.Run(backend+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, harnessOpts{backend: backend})
				b := newBrowser(t)
				tokens := h.tokensFor(t, b, testUser, testPassword)
				// A pending code, minted with the same browser session.
				pendingCode, pendingVerifier := func() (string, string) {
					v := oauth2.GenerateVerifier()
					conf := h.oauthConfig(publicClient)
					p := get(t, b, conf.AuthCodeURL("state-pending", oauth2.S256ChallengeOption(v)))
					p = submit(t, b, h.srv.URL, p, url.Values{"step": {"continue"}})
					if p.loc == nil {
						t.Fatalf("pending code: %d %s", p.status, p.body)
					}
					return p.loc.Query().Get("code"), v
				}()
				if err := tt.op(t.Context(), h.people()); err != nil {
					t.Fatal(err)
				}
				if active, _ := h.introspectSub(t, tokens.str("access_token")); active {
					t.Error("access token still active")
				}
				if res := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient},
					"refresh_token": {tokens.str("refresh_token")}}, "", ""); res.status == 200 {
					t.Error("refresh still works")
				}
				if res := h.exchange(t, publicClient, pendingCode, pendingVerifier, publicRedirect); res.status == 200 {
					t.Error("pending code still redeems")
				}
				if p := get(t, b, h.authURL(publicClient, publicRedirect)); !strings.Contains(p.body, `name="password"`) {
					t.Errorf("session survived: %d %s", p.status, p.body)
				}
			})
		}
	}
}

// TestDisabledUserSameMessage: a disabled user cannot sign in and sees the
// wrong-password message.
func TestDisabledUserSameMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	if _, err := h.people().Disable(t.Context(), testUser); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	p := h.signInAs(t, b, get(t, b, h.authURL(publicClient, publicRedirect)), testUser, testPassword)
	if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "Wrong username or password.") {
		t.Errorf("disabled user: %d %s", p.status, p.body)
	}
}

// TestSilentAuthorizationRFC8252: with an existing session, a skip_consent
// public client with a private-use (or loopback) redirect gets the one-tap
// page and no code without a click; the same client with an https redirect,
// and a confidential client, get a code silently (RFC 8252 §8.6).
func TestSilentAuthorizationRFC8252(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})
			ctx := t.Context()
			if err := h.store.CreateClient(ctx, &storage.Client{ID: "https-app", Name: "Web App", RedirectURIs: []string{"https://app.example.com/native"},
				GrantTypes: []string{"authorization_code"}, ResponseTypes: []string{"code"}, Scopes: []string{"openid"},
				TokenEndpointAuthMethod: "none", SkipConsent: true, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			b := newBrowser(t)
			h.login(t, b, h.authURL(confClient, confRedirect)) // sign in and consent once
			tests := []struct {
				name, client, redirect string
				silent                 bool
			}{
				{"public private-use scheme", publicClient, publicRedirect, false},
				{"public loopback", publicClient, "http://127.0.0.1:49152/callback", false},
				{"public https", "https-app", "https://app.example.com/native", true},
				{"confidential", confClient, confRedirect, true},
			}
			for _, tt := range tests {
				p := get(t, b, h.authURL(tt.client, tt.redirect, "openid"))
				if tt.silent {
					if p.loc == nil || p.loc.Query().Get("code") == "" {
						t.Errorf("%s: want a code silently, got %d %s", tt.name, p.status, p.body)
					}
					continue
				}
				if p.loc != nil || !strings.Contains(p.body, "Continue as alice") || !strings.Contains(p.body, "Use another account") {
					t.Errorf("%s: want the one-tap page, got %d %v", tt.name, p.status, p.loc)
					continue
				}
				// The tap gives the code.
				if p = submit(t, b, h.srv.URL, p, url.Values{"step": {"continue"}}); p.loc == nil || p.loc.Query().Get("code") == "" {
					t.Errorf("%s: continue gave %d %s", tt.name, p.status, p.body)
				}
			}
			// A forged continue without the page's session field gets no code.
			p := get(t, b, h.authURL(publicClient, publicRedirect))
			if p = submit(t, b, h.srv.URL, p, url.Values{"step": {"continue"}, "session": {"forged"}}); p.loc != nil {
				t.Errorf("continue with a wrong session field gave a redirect: %v", p.loc)
			}
			// Switch account: the session ends and the login form shows.
			p = get(t, b, h.authURL(publicClient, publicRedirect))
			sw := page{status: p.status, body: p.body[strings.LastIndex(p.body, `<form method="post"`):]}
			if p = submit(t, b, h.srv.URL, sw, url.Values{"step": {"switch"}}); !strings.Contains(p.body, `name="password"`) {
				t.Errorf("switch account: %d %s", p.status, p.body)
			}
			if p = get(t, b, h.authURL(confClient, confRedirect)); p.loc != nil {
				t.Errorf("still signed in after switching account: %v", p.loc)
			}
		})
	}
}

// TestSilentSSONever: with SilentSSO "never" even a confidential client
// gets the one-tap page.
func TestSilentSSONever(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) { c.SilentSSO = oauth.SilentSSONever }})
	b := newBrowser(t)
	h.login(t, b, h.authURL(confClient, confRedirect))
	if p := get(t, b, h.authURL(confClient, confRedirect)); p.loc != nil || !strings.Contains(p.body, "Continue as") {
		t.Errorf("confidential client under SilentSSO=never: %d %v", p.status, p.loc)
	}
}

// TestRememberedConsent: a remembered consent skips the page; a wider scope
// shows it again (naming scopes in words); withdrawing it revokes tokens.
func TestRememberedConsent(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend, cfg: func(c *oauth.Config) {
				c.ScopeDescriptions = map[string]string{"profile": "See your public profile"}
			}})
			b := newBrowser(t)
			p := h.signInAs(t, b, get(t, b, h.authURL(confClient, confRedirect, "openid", "offline_access")), testUser, testPassword)
			for _, words := range []string{"Confirm who you are", "Stay signed in"} {
				if !strings.Contains(p.body, words) {
					t.Errorf("consent page lacks %q: %s", words, p.body)
				}
			}
			p = submit(t, b, h.srv.URL, p, url.Values{"step": {"consent"}, "decision": {"allow"}})
			if p.loc == nil {
				t.Fatalf("consent: %d %s", p.status, p.body)
			}
			// Same scopes and a narrower set: no page.
			for _, scopes := range [][]string{{"openid", "offline_access"}, {"openid"}} {
				if p := get(t, b, h.authURL(confClient, confRedirect, scopes...)); p.loc == nil {
					t.Errorf("scopes %v: consent asked again: %d", scopes, p.status)
				}
			}
			// Wider: the page again, with the configured words.
			p = get(t, b, h.authURL(confClient, confRedirect, "openid", "profile"))
			if p.loc != nil || !strings.Contains(p.body, "See your public profile") {
				t.Fatalf("wider scope: want the consent page, got %d %v", p.status, p.loc)
			}
			// Tokens under the consent, then withdraw it.
			tok := h.confTokens(t, b)
			if active, _ := h.introspectSub(t, tok.str("access_token")); !active {
				t.Fatal("token not active before withdrawal")
			}
			if err := h.people().RevokeConsent(t.Context(), testUser, confClient); err != nil {
				t.Fatal(err)
			}
			if active, _ := h.introspectSub(t, tok.str("access_token")); active {
				t.Error("token still active after the consent was withdrawn")
			}
			if res := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.str("refresh_token")}},
				confClient, confSecret); res.status == 200 {
				t.Error("refresh still works after the consent was withdrawn")
			}
			if p := get(t, b, h.authURL(confClient, confRedirect, "openid")); !strings.Contains(p.body, `value="allow"`) {
				t.Errorf("after withdrawal: want the consent page, got %d %v", p.status, p.loc)
			}
		})
	}
}

// confTokens gets tokens for the confidential client with signed-in b
// (consent already given).
func (h *harness) confTokens(t testing.TB, b *http.Client) tokenResult {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	conf := h.oauthConfig(confClient)
	p := get(t, b, conf.AuthCodeURL("state-conf", oauth2.S256ChallengeOption(verifier)))
	if p.loc == nil {
		t.Fatalf("confidential client: no silent code: %d %s", p.status, p.body)
	}
	res := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"authorization_code"}, "code": {p.loc.Query().Get("code")},
		"code_verifier": {verifier}, "redirect_uri": {confRedirect}}, confClient, confSecret)
	if res.status != 200 {
		t.Fatalf("confidential exchange: %d %v", res.status, res.body)
	}
	return res
}

// TestBackOffWording: after the free failures the login page says "Try
// again in 1 second" (singular), with Retry-After, and keeps the focus on
// the password field.
func TestBackOffWording(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	b := newBrowser(t)
	p := get(t, b, h.authURL(publicClient, publicRedirect))
	for i := 0; i < 10 && p.status != http.StatusTooManyRequests; i++ {
		p = submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "username": {testUser}, "password": {"wrong password"}})
	}
	if p.status != http.StatusTooManyRequests || !strings.Contains(p.body, "Try again in 1 second.") {
		t.Fatalf("back-off page: %d %s", p.status, p.body)
	}
}

// TestUserWithdrawsConsent: the signed-in user withdraws a consent on
// /account; the tokens issued under it stop working and the app asks again.
func TestUserWithdrawsConsent(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})
			b := newBrowser(t)
			if p := get(t, b, h.srv.URL+"/account"); !strings.Contains(p.body, "Not signed in") {
				t.Errorf("/account without a session: %s", p.body)
			}
			h.login(t, b, h.authURL(confClient, confRedirect))
			tok := h.confTokens(t, b)
			p := get(t, b, h.srv.URL+"/account")
			if !strings.Contains(p.body, "Example Web") || !strings.Contains(p.body, "Stay signed in") {
				t.Fatalf("/account: %s", p.body)
			}
			p = submit(t, b, h.srv.URL, p, url.Values{"client_id": {confClient}})
			if !strings.Contains(p.body, "Access withdrawn for Example Web.") {
				t.Fatalf("withdraw: %d %s", p.status, p.body)
			}
			if active, _ := h.introspectSub(t, tok.str("access_token")); active {
				t.Error("token still active after the user withdrew consent")
			}
			if p := get(t, b, h.authURL(confClient, confRedirect)); !strings.Contains(p.body, `value="allow"`) {
				t.Errorf("after withdrawal: %d %v", p.status, p.loc)
			}
			// A cross-site post without the CSRF token withdraws nothing.
			req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/account", strings.NewReader("client_id="+confClient))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if resp, err := b.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
				t.Errorf("post without CSRF token: %v %v", resp.StatusCode, err)
			}
		})
	}
}

// TestDisableDuringAuthorization: an authorization that runs while a
// disable is in flight (PostgreSQL: the disable's transaction holds the
// user and session rows) waits for it and gets no code.
func TestDisableDuringAuthorization(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "postgres"})
	ctx := t.Context()
	b := newBrowser(t)
	h.login(t, b, h.authURL(confClient, confRedirect))
	u, err := h.people().Get(ctx, testUser)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := h.store.BeginTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.SetUserDisabled(tx, u.Subject, true); err != nil {
		t.Fatal(err)
	}
	if err := h.store.RevokeSubject(tx, u.Subject); err != nil {
		t.Fatal(err)
	}
	done := make(chan page, 1)
	go func() { done <- get(t, b, h.authURL(confClient, confRedirect)) }()
	time.Sleep(150 * time.Millisecond)
	if err := h.store.Commit(tx); err != nil {
		t.Fatal(err)
	}
	if p := <-done; p.loc != nil && p.loc.Query().Get("code") != "" {
		t.Fatalf("a code was issued across a concurrent disable: %v", p.loc)
	}
}
