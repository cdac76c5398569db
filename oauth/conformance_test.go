package oauth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/storage"
)

// conformance is one relying party's view of a harness for the OpenID
// Foundation basic certification plan's modules (issue 12 item 9).
type conformance struct {
	h        *harness
	provider *oidc.Provider
	sub      string
}

const secretPostClient, secretPostSecret = "post-app", "post-app-secret-with-enough-entropy-0000"

func newConformance(t *testing.T, cfg func(*oauth.Config)) *conformance {
	t.Helper()
	h := newHarness(t, harnessOpts{backend: "postgres", cfg: cfg})
	ctx := context.Background()
	u, err := h.store.GetUser(ctx, testUser)
	if err != nil {
		t.Fatal(err)
	}
	u.Email, u.EmailVerified, u.Name = "alice@example.com", true, "Alice Example"
	if err := h.store.UpdateUserProfile(ctx, u); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{publicClient, confClient} {
		fc, _ := h.store.GetClient(ctx, id)
		c := fc.(*storage.Client).Clone()
		c.Scopes = []string{"openid", "offline_access", "profile", "email"}
		c.UpdatedAt = time.Time{}
		if err := h.store.UpdateClient(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	hash, _ := h.app.Hasher().Hash(ctx, []byte(secretPostSecret))
	if err := h.store.CreateClient(ctx, &storage.Client{ID: secretPostClient, SecretHash: hash, Name: "Post",
		RedirectURIs: []string{confRedirect}, GrantTypes: []string{"authorization_code", "refresh_token"},
		ResponseTypes: []string{"code"}, Scopes: []string{"openid", "offline_access"},
		TokenEndpointAuthMethod: "client_secret_post", SkipConsent: true}); err != nil {
		t.Fatal(err)
	}
	p, err := oidc.NewProvider(ctx, h.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return &conformance{h: h, provider: p, sub: u.Subject}
}

// authURL is an authorization request of clientID with PKCE S256 and
// extra parameters.
func (c *conformance) authURL(clientID, scope string, extra url.Values) (string, string) {
	v := oauth2.GenerateVerifier()
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "scope": {scope},
		"state": {"conformance-state"}, "code_challenge": {oauth2.S256ChallengeFromVerifier(v)},
		"code_challenge_method": {"S256"}}
	switch clientID {
	case publicClient:
		q.Set("redirect_uri", publicRedirect)
	default:
		q.Set("redirect_uri", confRedirect)
	}
	for k, vs := range extra {
		q[k] = vs
	}
	return c.h.srv.URL + "/oauth2/authorize?" + q.Encode(), v
}

// tokens exchanges code as clientID (its own client authentication).
func (c *conformance) tokens(t *testing.T, clientID, code, verifier string) tokenResult {
	t.Helper()
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier}}
	switch clientID {
	case publicClient:
		form.Set("client_id", publicClient)
		form.Set("redirect_uri", publicRedirect)
		return c.h.postForm(t, "/oauth2/token", form, "", "")
	case secretPostClient:
		form.Set("client_id", secretPostClient)
		form.Set("client_secret", secretPostSecret)
		form.Set("redirect_uri", confRedirect)
		return c.h.postForm(t, "/oauth2/token", form, "", "")
	default:
		form.Set("redirect_uri", confRedirect)
		return c.h.postForm(t, "/oauth2/token", form, confClient, confSecret)
	}
}

// signIn runs a whole sign-in of clientID and returns the token response.
func (c *conformance) signIn(t *testing.T, b *http.Client, clientID, scope string, extra url.Values) tokenResult {
	t.Helper()
	u, v := c.authURL(clientID, scope, extra)
	loc := c.h.login(t, b, u)
	if loc.Query().Get("error") != "" || loc.Query().Get("state") != "conformance-state" {
		t.Fatalf("authorization response %s", loc)
	}
	res := c.tokens(t, clientID, loc.Query().Get("code"), v)
	if res.status != 200 {
		t.Fatalf("token: %d %v", res.status, res.body)
	}
	return res
}

// verify checks the ID token as the modules do (signature with the JWKS,
// iss, aud, exp, iat; go-oidc) and returns its claims.
func (c *conformance) verify(t *testing.T, clientID string, res tokenResult) map[string]any {
	t.Helper()
	raw := res.str("id_token")
	idt, err := c.provider.Verifier(&oidc.Config{ClientID: clientID}).Verify(context.Background(), raw)
	if err != nil {
		t.Fatalf("ID token: %v", err)
	}
	if err := idt.VerifyAccessToken(res.str("access_token")); err != nil {
		t.Fatalf("at_hash: %v", err)
	}
	var claims map[string]any
	_ = idt.Claims(&claims)
	for _, k := range []string{"iss", "sub", "aud", "exp", "iat", "auth_time"} {
		if claims[k] == nil {
			t.Fatalf("ID token lacks %s: %v", k, claims)
		}
	}
	if claims["sub"] != c.sub {
		t.Fatalf("sub %v, want %s", claims["sub"], c.sub)
	}
	return claims
}

// userinfo calls the UserInfo endpoint one of the three ways.
func (c *conformance) userinfo(t *testing.T, how, token string) map[string]any {
	t.Helper()
	var req *http.Request
	switch how {
	case "get":
		req, _ = http.NewRequest(http.MethodGet, c.h.srv.URL+"/oauth2/userinfo", nil)
		req.Header.Set("Authorization", "Bearer "+token)
	case "post-header":
		req, _ = http.NewRequest(http.MethodPost, c.h.srv.URL+"/oauth2/userinfo", nil)
		req.Header.Set("Authorization", "Bearer "+token)
	case "post-body":
		req, _ = http.NewRequest(http.MethodPost, c.h.srv.URL+"/oauth2/userinfo", strings.NewReader(url.Values{"access_token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("userinfo %s: %d %s", how, resp.StatusCode, body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if m["sub"] != c.sub {
		t.Fatalf("userinfo sub %v, want %s", m["sub"], c.sub)
	}
	return m
}

// redirectError follows an authorization request that must be answered
// with an error redirect (never a page) and returns the error code.
func (c *conformance) redirectError(t *testing.T, b *http.Client, u string) string {
	t.Helper()
	p := get(t, b, u)
	if p.loc == nil || p.status != http.StatusSeeOther {
		t.Fatalf("want a redirect to the client, got %d (a page)", p.status)
	}
	if p.loc.Query().Get("state") != "conformance-state" || p.loc.Query().Get("code") != "" {
		t.Fatalf("error redirect %s", p.loc)
	}
	return p.loc.Query().Get("error")
}

func authTime(claims map[string]any) int64 { f, _ := claims["auth_time"].(float64); return int64(f) }

// TestConformanceBasicPlan is the OpenID Foundation's basic OP
// certification plan (oidcc-basic-certification-test-plan, code flow),
// one row per module, each checking what the module checks, with PKCE
// added to every authorization request (authd requires it, RFC 9700
// §2.1.1). Where authd deliberately differs, the row says so.
func TestConformanceBasicPlan(t *testing.T) {
	c := newConformance(t, nil)
	const scope = "openid"
	rows := []struct {
		module string
		run    func(t *testing.T)
	}{
		{"oidcc-server", func(t *testing.T) {
			res := c.signIn(t, newBrowser(t), publicClient, scope, nil)
			claims := c.verify(t, publicClient, res)
			if res.str("token_type") != "bearer" && res.str("token_type") != "Bearer" {
				t.Fatalf("token_type %q", res.str("token_type"))
			}
			if claims["azp"] != publicClient {
				t.Fatalf("azp %v", claims["azp"])
			}
		}},
		{"oidcc-userinfo-get", func(t *testing.T) {
			c.userinfo(t, "get", c.signIn(t, newBrowser(t), publicClient, scope, nil).str("access_token"))
		}},
		{"oidcc-userinfo-post-header", func(t *testing.T) {
			c.userinfo(t, "post-header", c.signIn(t, newBrowser(t), publicClient, scope, nil).str("access_token"))
		}},
		{"oidcc-userinfo-post-body", func(t *testing.T) {
			c.userinfo(t, "post-body", c.signIn(t, newBrowser(t), publicClient, scope, nil).str("access_token"))
		}},
		{"oidcc-ensure-request-without-nonce-succeeds-for-code-flow", func(t *testing.T) {
			claims := c.verify(t, publicClient, c.signIn(t, newBrowser(t), publicClient, scope, nil))
			if _, ok := claims["nonce"]; ok {
				t.Fatal("a nonce appeared without one being sent")
			}
		}},
		{"oidcc-scope-profile", func(t *testing.T) {
			m := c.userinfo(t, "get", c.signIn(t, newBrowser(t), publicClient, "openid profile", nil).str("access_token"))
			if m["name"] != "Alice Example" || m["email"] != nil {
				t.Fatalf("profile scope: %v", m)
			}
		}},
		{"oidcc-scope-email", func(t *testing.T) {
			res := c.signIn(t, newBrowser(t), publicClient, "openid email", nil)
			m := c.userinfo(t, "get", res.str("access_token"))
			if m["email"] != "alice@example.com" || m["email_verified"] != true || m["name"] != nil {
				t.Fatalf("email scope: %v", m)
			}
			if cl := c.verify(t, publicClient, res); cl["email"] != "alice@example.com" {
				t.Fatalf("ID token email %v", cl["email"])
			}
		}},
		{"oidcc-prompt-login", func(t *testing.T) {
			b := newBrowser(t)
			first := c.verify(t, confClient, c.signIn(t, b, confClient, scope, nil))
			time.Sleep(1100 * time.Millisecond) // auth_time has second resolution
			u, _ := c.authURL(confClient, scope, url.Values{"prompt": {"login"}})
			if p := get(t, b, u); !strings.Contains(p.body, `name="password"`) {
				t.Fatalf("prompt=login: no login page (%d)", p.status)
			}
			second := c.verify(t, confClient, c.signIn(t, b, confClient, scope, url.Values{"prompt": {"login"}}))
			if authTime(second) <= authTime(first) {
				t.Fatalf("auth_time %d not after %d", authTime(second), authTime(first))
			}
		}},
		{"oidcc-prompt-none-not-logged-in", func(t *testing.T) {
			u, _ := c.authURL(confClient, scope, url.Values{"prompt": {"none"}})
			if e := c.redirectError(t, newBrowser(t), u); e != "login_required" {
				t.Fatalf("error %q, want login_required", e)
			}
		}},
		{"oidcc-prompt-none-logged-in", func(t *testing.T) {
			b := newBrowser(t)
			first := c.verify(t, confClient, c.signIn(t, b, confClient, scope, nil))
			u, v := c.authURL(confClient, scope, url.Values{"prompt": {"none"}})
			p := get(t, b, u)
			if p.loc == nil || p.loc.Query().Get("code") == "" {
				t.Fatalf("prompt=none while signed in: %d %v", p.status, p.loc)
			}
			second := c.verify(t, confClient, c.tokens(t, confClient, p.loc.Query().Get("code"), v))
			if authTime(second) != authTime(first) {
				t.Fatal("auth_time changed without a sign-in")
			}
			// A public client with a private-use scheme needs the RFC 8252
			// §8.6 tap: prompt=none cannot show it.
			pu, _ := c.authURL(publicClient, scope, url.Values{"prompt": {"none"}})
			if e := c.redirectError(t, b, pu); e != "interaction_required" {
				t.Fatalf("public client, prompt=none: %q, want interaction_required", e)
			}
		}},
		{"oidcc-max-age-1", func(t *testing.T) {
			b := newBrowser(t)
			first := c.verify(t, confClient, c.signIn(t, b, confClient, scope, nil))
			time.Sleep(2100 * time.Millisecond)
			u, _ := c.authURL(confClient, scope, url.Values{"max_age": {"1"}})
			if p := get(t, b, u); !strings.Contains(p.body, `name="password"`) {
				t.Fatalf("max_age=1 after 2 s: no login page (%d)", p.status)
			}
			second := c.verify(t, confClient, c.signIn(t, b, confClient, scope, url.Values{"max_age": {"1"}}))
			if authTime(second) <= authTime(first) {
				t.Fatalf("auth_time %d not after %d", authTime(second), authTime(first))
			}
		}},
		{"oidcc-max-age-10000", func(t *testing.T) {
			b := newBrowser(t)
			first := c.verify(t, confClient, c.signIn(t, b, confClient, scope, nil))
			u, v := c.authURL(confClient, scope, url.Values{"max_age": {"10000"}})
			p := get(t, b, u)
			if p.loc == nil || p.loc.Query().Get("code") == "" {
				t.Fatalf("max_age=10000: a page instead of a code (%d)", p.status)
			}
			second := c.verify(t, confClient, c.tokens(t, confClient, p.loc.Query().Get("code"), v))
			if authTime(second) != authTime(first) {
				t.Fatal("auth_time changed")
			}
		}},
		{"oidcc-id-token-hint", func(t *testing.T) {
			b := newBrowser(t)
			res := c.signIn(t, b, confClient, scope, nil)
			u, v := c.authURL(confClient, scope, url.Values{"prompt": {"none"}, "id_token_hint": {res.str("id_token")}})
			p := get(t, b, u)
			if p.loc == nil || p.loc.Query().Get("code") == "" {
				t.Fatalf("id_token_hint with prompt=none: %d %v", p.status, p.loc)
			}
			c.verify(t, confClient, c.tokens(t, confClient, p.loc.Query().Get("code"), v))
			bad, _ := c.authURL(confClient, scope, url.Values{"prompt": {"none"}, "id_token_hint": {"eyJhbGciOiJub25lIn0.e30."}})
			if e := c.redirectError(t, b, bad); e != "invalid_request" {
				t.Fatalf("forged hint: %q", e)
			}
		}},
		{"oidcc-login-hint", func(t *testing.T) {
			u, _ := c.authURL(publicClient, scope, url.Values{"login_hint": {testUser}})
			if p := get(t, newBrowser(t), u); !strings.Contains(p.body, `value="`+testUser+`"`) {
				t.Fatalf("login_hint did not prefill the username: %s", p.body)
			}
		}},
		{"oidcc-ensure-request-with-unknown-parameter-succeeds", func(t *testing.T) {
			c.verify(t, publicClient, c.signIn(t, newBrowser(t), publicClient, scope, url.Values{"extra": {"foobar"}, "ui_locales": {"se fr-CA"}}))
		}},
		{"oidcc-codereuse", func(t *testing.T) {
			// authd differs deliberately: a duplicate with the same
			// code_verifier inside the replay window gets the original
			// response (docs/architecture.md). A reuse the module makes
			// without the verifier fails as it expects: invalid_grant,
			// and the tokens issued from the code are revoked (RFC 6749
			// §4.1.2).
			u, v := c.authURL(publicClient, scope, nil)
			code := c.h.login(t, newBrowser(t), u).Query().Get("code")
			first := c.tokens(t, publicClient, code, v)
			if again := c.tokens(t, publicClient, code, v); again.status != 200 || again.str("id_token") != first.str("id_token") {
				t.Fatalf("same-verifier retry: %d", again.status)
			}
			reuse := c.h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
				"client_id": {publicClient}, "redirect_uri": {publicRedirect}}, "", "")
			if reuse.status != 400 || reuse.str("error") != "invalid_grant" {
				t.Fatalf("reuse without verifier: %d %v", reuse.status, reuse.body)
			}
			if c.h.introspect(t, first.str("access_token")) {
				t.Fatal("the access token survived the code's reuse")
			}
			other := c.tokens(t, publicClient, code, oauth2.GenerateVerifier())
			if other.status != 400 || other.str("error") != "invalid_grant" {
				t.Fatalf("reuse with another verifier: %d %v", other.status, other.body)
			}
		}},
		{"oidcc-ensure-registered-redirect-uri", func(t *testing.T) {
			u, _ := c.authURL(publicClient, scope, url.Values{"redirect_uri": {"https://attacker.example/cb"}})
			p := get(t, newBrowser(t), u)
			if p.loc != nil || p.status != http.StatusBadRequest {
				t.Fatalf("unregistered redirect_uri: %d %v (must be an error page, never a redirect)", p.status, p.loc)
			}
		}},
		{"oidcc-ensure-post-request-succeeds", func(t *testing.T) {
			u, v := c.authURL(publicClient, scope, nil)
			parsed, _ := url.Parse(u)
			b := newBrowser(t)
			req, _ := http.NewRequest(http.MethodPost, c.h.srv.URL+"/oauth2/authorize", strings.NewReader(parsed.RawQuery))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := b.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			loc, _ := resp.Location()
			if resp.StatusCode != http.StatusSeeOther || loc == nil {
				t.Fatalf("POST authorization request: %d", resp.StatusCode)
			}
			cb := c.h.login(t, b, loc.String())
			c.verify(t, publicClient, c.tokens(t, publicClient, cb.Query().Get("code"), v))
		}},
		{"oidcc-server-client-secret-post", func(t *testing.T) {
			c.verify(t, secretPostClient, c.signIn(t, newBrowser(t), secretPostClient, scope, nil))
		}},
		{"oidcc-refresh-token", func(t *testing.T) {
			res := c.signIn(t, newBrowser(t), confClient, "openid offline_access", nil)
			first := c.verify(t, confClient, res)
			r := c.h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"},
				"refresh_token": {res.str("refresh_token")}}, confClient, confSecret)
			if r.status != 200 || r.str("id_token") == "" {
				t.Fatalf("refresh: %d %v", r.status, r.body)
			}
			second := c.verify(t, confClient, r)
			if second["iss"] != first["iss"] || second["sub"] != first["sub"] || authTime(second) != authTime(first) {
				t.Fatalf("refreshed ID token %v, first %v (OIDC Core §12.2)", second, first)
			}
			// The module's refresh with another client fails.
			other := c.h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient},
				"refresh_token": {r.str("refresh_token")}}, "", "")
			if other.status == 200 {
				t.Fatal("a refresh token redeemed by another client")
			}
		}},
		{"oidcc-ensure-request-with-valid-pkce-succeeds", func(t *testing.T) {
			c.verify(t, publicClient, c.signIn(t, newBrowser(t), publicClient, scope, nil))
			// And without PKCE authd refuses (its deliberate difference).
			q := url.Values{"response_type": {"code"}, "client_id": {publicClient}, "scope": {scope},
				"state": {"conformance-state"}, "redirect_uri": {publicRedirect}}
			if e := c.redirectError(t, newBrowser(t), c.h.srv.URL+"/oauth2/authorize?"+q.Encode()); e != "invalid_request" {
				t.Fatalf("no PKCE: %q", e)
			}
		}},
	}
	for _, row := range rows {
		t.Run(row.module, row.run)
	}
}

// TestConformanceCodeReuse30Seconds is oidcc-codereuse-30seconds with the
// replay window shortened to 1 s: after the window, even the same
// verifier's retry is reuse (invalid_grant) and revokes the tokens.
func TestConformanceCodeReuse30Seconds(t *testing.T) {
	c := newConformance(t, func(cfg *oauth.Config) { cfg.ReplayWindow = time.Second })
	u, v := c.authURL(publicClient, "openid", nil)
	code := c.h.login(t, newBrowser(t), u).Query().Get("code")
	first := c.tokens(t, publicClient, code, v)
	c.verify(t, publicClient, first)
	time.Sleep(1500 * time.Millisecond)
	if again := c.tokens(t, publicClient, code, v); again.status != 400 || again.str("error") != "invalid_grant" {
		t.Fatalf("reuse after the window: %d %v", again.status, again.body)
	}
	if c.h.introspect(t, first.str("access_token")) {
		t.Fatal("the access token survived the late reuse")
	}
}

// TestIDTokenSignedResponseAlg: a client registered with
// id_token_signed_response_alg ES256 gets ES256 ID tokens (kid in the
// header) that verify with the JWKS; others get RS256 (OIDC Core §15.1).
func TestIDTokenSignedResponseAlg(t *testing.T) {
	c := newConformance(t, nil)
	ctx := context.Background()
	fc, _ := c.h.store.GetClient(ctx, confClient)
	cl := fc.(*storage.Client).Clone()
	cl.IDTokenSignedResponseAlg = "ES256"
	cl.UpdatedAt = time.Time{}
	if err := c.h.store.UpdateClient(ctx, cl); err != nil {
		t.Fatal(err)
	}
	for client, want := range map[string]string{confClient: "ES256", publicClient: "RS256"} {
		res := c.signIn(t, newBrowser(t), client, "openid", nil)
		c.verify(t, client, res)
		var hdr struct{ Alg, Kid string }
		seg, _ := base64URLDecode(strings.Split(res.str("id_token"), ".")[0])
		_ = json.Unmarshal(seg, &hdr)
		if hdr.Alg != want || hdr.Kid == "" {
			t.Errorf("%s: header %+v, want alg %s with a kid", client, hdr, want)
		}
	}
}

func base64URLDecode(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
