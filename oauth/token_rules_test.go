package oauth_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/storage"
)

// The spec rules of the token pipeline (issue "one pipeline", item 4), over
// HTTP, on the token, revocation and introspection endpoints alike.

const (
	postClient = "post-app"
	postSecret = "post-app-secret-with-enough-entropy-0000"
)

// rawResult is one raw HTTP answer.
type rawResult struct {
	status int
	header http.Header
	body   string
}

// do sends a form POST (or method) with an optional Authorization header.
func do(t *testing.T, method, u, body, auth string) rawResult {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawResult{resp.StatusCode, resp.Header, string(b)}
}

func basicAuth(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
}

// rulesHarness is a harness with one more confidential client, registered
// for client_secret_post.
func rulesHarness(t *testing.T, cfg func(*oauth.Config)) *harness {
	t.Helper()
	h := newHarness(t, harnessOpts{backend: "memory", cfg: cfg})
	hash, _ := h.app.Hasher().Hash(context.Background(), []byte(postSecret))
	if err := h.store.CreateClient(context.Background(), &storage.Client{ID: postClient, SecretHash: hash,
		RedirectURIs: []string{"https://post.example.com/cb"}, GrantTypes: []string{"authorization_code", "refresh_token", "client_credentials"},
		ResponseTypes: []string{"code"}, Scopes: []string{"openid", "offline_access"}, TokenEndpointAuthMethod: "client_secret_post",
		CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestClientAuthenticatedFirst: an unknown, malformed or wrongly
// authenticated client gets invalid_client (401, WWW-Authenticate) whatever
// its code or token, and a client must use its registered
// token_endpoint_auth_method, on all three endpoints.
func TestClientAuthenticatedFirst(t *testing.T) {
	t.Parallel()
	h := rulesHarness(t, nil)
	code, verifier := h.code(t, publicClient)
	tok := h.redeem(t, code, verifier).str("access_token")
	grants := map[string]string{
		"valid code":    url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier}, "redirect_uri": {publicRedirect}}.Encode(),
		"forged code":   "grant_type=authorization_code&code=ory_ac_forged.forged&code_verifier=x&redirect_uri=x",
		"no code":       "grant_type=authorization_code",
		"no grant_type": "code=x",
		"unknown grant": "grant_type=password&username=a&password=b",
		"refresh":       "grant_type=refresh_token&refresh_token=ory_rt_x.y",
	}
	clients := []struct {
		name       string
		form, auth string
	}{
		{"unknown client_id", "client_id=nobody", ""},
		{"no client at all", "", ""},
		{"unknown Basic client", "", basicAuth("nobody", "x")},
		{"malformed Basic", "", "Basic !!!"},
		{"Bearer instead of client auth", "", "Bearer some-token"},
		{"wrong secret", "", basicAuth(confClient, "wrong")},
		{"basic client by post", "client_id=" + confClient + "&client_secret=" + confSecret, ""},
		{"post client by basic", "", basicAuth(postClient, postSecret)},
		{"public client with a secret", "client_id=" + publicClient + "&client_secret=x", ""},
		{"confidential client without secret", "client_id=" + confClient, ""},
		{"client assertion", "client_id=" + confClient + "&client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer&client_assertion=e30.e30.x", ""},
	}
	for _, c := range clients {
		for gname, g := range grants {
			body := strings.Trim(c.form+"&"+g, "&")
			r := do(t, "POST", h.srv.URL+"/oauth2/token", body, c.auth)
			if r.status != 401 || !strings.Contains(r.body, `"invalid_client"`) || r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("token, %s, %s: %d %s (WWW-Authenticate %q), want 401 invalid_client with a challenge", c.name, gname, r.status, r.body, r.header.Get("WWW-Authenticate"))
			}
		}
		if c.name == "Bearer instead of client auth" {
			continue // introspection takes an admin bearer token
		}
		for _, path := range []string{"/oauth2/revoke", "/oauth2/introspect"} {
			body := strings.Trim(c.form+"&token="+url.QueryEscape(tok), "&")
			r := do(t, "POST", h.srv.URL+path, body, c.auth)
			if r.status != 401 || !strings.Contains(r.body, `"invalid_client"`) || r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s, %s: %d %s, want 401 invalid_client with a challenge", path, c.name, r.status, r.body)
			}
		}
	}
	if !h.introspect(t, tok) {
		t.Fatal("a failed revocation revoked the token")
	}
	// The registered methods work.
	for _, c := range []struct{ name, body, auth string }{
		{"basic client by basic", "grant_type=client_credentials", basicAuth(confClient, confSecret)},
		{"post client by post", "grant_type=client_credentials&client_id=" + postClient + "&client_secret=" + postSecret, ""},
	} {
		r := do(t, "POST", h.srv.URL+"/oauth2/token", c.body, c.auth)
		if c.name == "basic client by basic" {
			// web-app may not use client_credentials: authenticated, then refused for the grant.
			if r.status != 400 || !strings.Contains(r.body, "unauthorized_client") {
				t.Errorf("%s: %d %s", c.name, r.status, r.body)
			}
			continue
		}
		if r.status != 200 {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
		}
	}
}

// TestChallengeAndAllowHeaders: every 401 carries WWW-Authenticate and
// every 405 carries Allow.
func TestChallengeAndAllowHeaders(t *testing.T) {
	t.Parallel()
	h := rulesHarness(t, nil)
	for _, c := range []struct{ method, path, body, auth, allow string }{
		{"GET", "/oauth2/token", "", "", "POST"},
		{"PUT", "/oauth2/token", "", "", "POST"},
		{"DELETE", "/oauth2/revoke", "", "", "POST"},
		{"GET", "/oauth2/introspect", "", "", "POST"},
		{"PATCH", "/.well-known/oauth-authorization-server", "", "", "GET, HEAD"},
		{"DELETE", "/oauth2/authorize", "", "", "GET, HEAD, POST"},
		{"PUT", "/logout", "", "", "GET, HEAD, POST"},
	} {
		r := do(t, c.method, h.srv.URL+c.path, c.body, c.auth)
		if r.status != 405 || r.header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d, Allow %q; want 405 with Allow %q", c.method, c.path, r.status, r.header.Get("Allow"), c.allow)
		}
	}
	for _, c := range []struct{ path, body, auth string }{
		{"/oauth2/token", "grant_type=client_credentials", ""},
		{"/oauth2/token", "grant_type=client_credentials&client_id=nobody", ""},
		{"/oauth2/token", "grant_type=client_credentials", basicAuth("nobody", "x")},
		{"/oauth2/revoke", "token=x", ""},
		{"/oauth2/introspect", "token=x", ""},
		{"/oauth2/introspect", "token=x", "Bearer not-the-admin-token"},
	} {
		r := do(t, "POST", h.srv.URL+c.path, c.body, c.auth)
		if r.status != 401 || r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s %q: %d, WWW-Authenticate %q; want 401 with a challenge", c.path, c.body, r.status, r.header.Get("WWW-Authenticate"))
		}
	}
}

// allowedDescription reports whether every character of d is one RFC 6749
// §5.2 allows in error_description (%x20-21 / %x23-5B / %x5D-7E).
func allowedDescription(d string) bool {
	for _, c := range []byte(d) {
		if !(c == 0x20 || c == 0x21 || (c >= 0x23 && c <= 0x5B) || (c >= 0x5D && c <= 0x7E)) {
			return false
		}
	}
	return true
}

// TestErrorDescriptionCharset: error_description only ever holds the
// characters RFC 6749 §5.2 allows, whatever the client sent, and a revoked
// refresh token is called revoked.
func TestErrorDescriptionCharset(t *testing.T) {
	t.Parallel()
	h := rulesHarness(t, nil)
	code, verifier := h.code(t, publicClient)
	first := h.redeem(t, code, verifier)
	pub := "client_id=" + publicClient + "&"
	for _, body := range []string{
		pub + "grant_type=authorization_code",
		pub + "grant_type=p%C3%A4ssword%5C%22",
		pub + "grant_type=authorization_code&code=%E2%80%8Bx%5Cy",
		pub + "grant_type=refresh_token",
		pub + "grant_type=authorization_code&grant_type=authorization_code",
		pub + "%C2%A7%5C%22=1&%C2%A7%5C%22=2",
		pub + "grant_type=refresh_token&refresh_token=" + url.QueryEscape(first.str("refresh_token")) + "&scope=%C3%BC%5C",
		"client_id=n%C3%B6body%5C&grant_type=authorization_code",
		pub + "grant_type=authorization_code&code=" + url.QueryEscape(code) + "&code_verifier=" + verifier + "&redirect_uri=" + url.QueryEscape(publicRedirect) + "x",
	} {
		for _, path := range []string{"/oauth2/token", "/oauth2/revoke", "/oauth2/introspect"} {
			r := do(t, "POST", h.srv.URL+path, body, "")
			if r.status < 400 {
				continue
			}
			var d string
			if i := strings.Index(r.body, `"error_description":"`); i >= 0 {
				d = r.body[i+len(`"error_description":"`):]
				d = d[:strings.Index(d, `"`)]
			}
			if !allowedDescription(d) || strings.Contains(d, `\u`) {
				t.Errorf("%s %q: error_description %q has characters RFC 6749 Section 5.2 forbids", path, body, d)
			}
		}
	}
	// A revoked refresh token says so.
	if r := do(t, "POST", h.srv.URL+"/oauth2/revoke", pub+"token="+url.QueryEscape(first.str("refresh_token")), ""); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	r := do(t, "POST", h.srv.URL+"/oauth2/token", pub+"grant_type=refresh_token&refresh_token="+url.QueryEscape(first.str("refresh_token")), "")
	if r.status != 400 || !strings.Contains(r.body, "invalid_grant") || !strings.Contains(r.body, "has been revoked") || strings.Contains(r.body, "already used") {
		t.Fatalf("refresh with a revoked token: %d %s, want invalid_grant saying revoked", r.status, r.body)
	}
}

// TestRateLimitChargesAuthenticatedOnly: requests that fail client
// authentication never push the client_id into 429 (they are limited per
// source address instead), and the per-client limit applies to the
// client's own authenticated requests.
func TestRateLimitChargesAuthenticatedOnly(t *testing.T) {
	t.Parallel()
	h := rulesHarness(t, func(c *oauth.Config) {
		c.TokenLimits = oauth.TokenLimits{PerSecond: 0.001, Burst: 3}
		c.AuthFailureLimits = oauth.TokenLimits{PerSecond: 0.001, Burst: 5}
	})
	cc := "grant_type=client_credentials&client_id=" + postClient
	// Five failures with the client's id but a wrong secret: 401, not 429.
	for i := range 5 {
		if r := do(t, "POST", h.srv.URL+"/oauth2/token", cc+"&client_secret=wrong", ""); r.status != 401 {
			t.Fatalf("failure %d: %d %s, want 401", i, r.status, r.body)
		}
	}
	// Further failures from the address are 429; a request that
	// authenticates, from the same address, is never refused for them.
	if r := do(t, "POST", h.srv.URL+"/oauth2/token", cc+"&client_secret=wrong", ""); r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Fatalf("sixth failure: %d %s, want 429 with Retry-After", r.status, r.body)
	}
	if r := do(t, "POST", h.srv.URL+"/oauth2/token", cc+"&client_secret="+postSecret, ""); r.status != 200 {
		t.Fatalf("the client's own request after failures from its address: %d %s, want 200", r.status, r.body)
	}
	// A public client named in requests with made-up codes is not charged.
	for i := range 10 {
		if r := do(t, "POST", h.srv.URL+"/oauth2/token", "grant_type=authorization_code&code=ory_ac_x.y&client_id="+publicClient, ""); r.status != 400 {
			t.Fatalf("made-up code %d: %d %s, want 400", i, r.status, r.body)
		}
	}
	h2 := rulesHarness(t, func(c *oauth.Config) {
		c.TokenLimits = oauth.TokenLimits{PerSecond: 0.001, Burst: 3}
	})
	for i := range 10 {
		if r := do(t, "POST", h2.srv.URL+"/oauth2/token", cc+"&client_secret=wrong", ""); r.status != 401 {
			t.Fatalf("failure %d: %d %s, want 401", i, r.status, r.body)
		}
	}
	for i := range 3 {
		if r := do(t, "POST", h2.srv.URL+"/oauth2/token", cc+"&client_secret="+postSecret, ""); r.status != 200 {
			t.Fatalf("authenticated request %d after failures by others: %d %s, want 200", i, r.status, r.body)
		}
	}
	if r := do(t, "POST", h2.srv.URL+"/oauth2/token", cc+"&client_secret="+postSecret, ""); r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Fatalf("fourth authenticated request: %d %s, want 429", r.status, r.body)
	}
}

// TestRefreshRetryScopeAsSet: a refresh retry whose scope lists the same
// scopes in another order, or omits scope, is the same request (RFC 6749
// §3.3, §6) and gets the same pair; a scope not granted is invalid_scope.
func TestRefreshRetryScopeAsSet(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})
			code, v := h.code(t, publicClient)
			rt := h.redeem(t, code, v).str("refresh_token")
			refresh := func(scope *string) tokenResult {
				f := url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient}, "refresh_token": {rt}}
				if scope != nil {
					f.Set("scope", *scope)
				}
				return h.postForm(t, "/oauth2/token", f, "", "")
			}
			s := func(x string) *string { return &x }
			if r := refresh(s("openid offline_access profile")); r.status != 400 || r.str("error") != "invalid_scope" {
				t.Fatalf("wider scope: %d %v, want invalid_scope", r.status, r.body)
			}
			first := refresh(s("offline_access openid"))
			if first.status != 200 {
				t.Fatalf("refresh: %d %v", first.status, first.body)
			}
			for _, scope := range []*string{s("openid offline_access"), nil, s("openid  offline_access openid")} {
				r := refresh(scope)
				if r.status != 200 || r.str("access_token") != first.str("access_token") || r.str("refresh_token") != first.str("refresh_token") {
					t.Fatalf("retry with scope %v: %d %v, want the first pair", scope, r.status, r.body)
				}
			}
			if !h.introspect(t, first.str("refresh_token")) {
				t.Fatal("the new refresh token is not active after the retries")
			}
		})
	}
}

// TestRevokeOtherClientsToken: revoking a token issued to another client
// is refused with an error (RFC 7009 §2.1) and the token stays active.
func TestRevokeOtherClientsToken(t *testing.T) {
	t.Parallel()
	h := rulesHarness(t, nil)
	code, v := h.code(t, publicClient)
	first := h.redeem(t, code, v)
	for _, tok := range []string{first.str("access_token"), first.str("refresh_token")} {
		r := h.postForm(t, "/oauth2/revoke", url.Values{"token": {tok}}, confClient, confSecret)
		if r.status != 400 || r.str("error") != "unauthorized_client" {
			t.Errorf("revoking another client's token: %d %v, want 400 unauthorized_client", r.status, r.body)
		}
		r = h.postForm(t, "/oauth2/revoke", url.Values{"token": {tok}, "client_id": {"other-app"}}, "", "")
		if r.status != 400 || r.str("error") != "unauthorized_client" {
			t.Errorf("revoking another public client's token: %d %v", r.status, r.body)
		}
	}
	if !h.introspect(t, first.str("access_token")) || !h.introspect(t, first.str("refresh_token")) {
		t.Fatal("a refused revocation revoked the tokens")
	}
}
