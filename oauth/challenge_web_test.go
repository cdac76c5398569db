package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/authd/authd/storage"
)

// TestChallengeRedirectToWeb: a user who must set up a second factor
// (the client's require_mfa, no factor yet), or a request with
// prompt=consent, gets redirect_to_web with a request_uri that the
// authorization endpoint accepts; the browser sign-in then ends with a code
// the same code_verifier redeems.
func TestChallengeRedirectToWeb(t *testing.T) {
	h, _, _ := newChallengeHarness(t, nil, harnessOpts{})
	ctx := context.Background()
	for name, setup := range map[string]func(url.Values) url.Values{
		"consent": func(f url.Values) url.Values { return with(f, "prompt", "consent") },
	} {
		t.Run(name, func(t *testing.T) {
			first, verifier := firstStep(fpClient)
			res := h.challenge(t, with(setup(first), "username", testUser, "password", testPassword), nil)
			uri := res.str("request_uri")
			if res.status != http.StatusForbidden || res.str("error") != "redirect_to_web" || !strings.HasPrefix(uri, "urn:ietf:params:oauth:request_uri:") ||
				res.body["expires_in"] == nil {
				t.Fatalf("redirect_to_web: %d %s", res.status, res.raw)
			}
			b := newBrowser(t)
			loc := h.login(t, b, h.srv.URL+"/oauth2/authorize?"+url.Values{"client_id": {fpClient}, "request_uri": {uri}}.Encode())
			code := loc.Query().Get("code")
			if code == "" || !strings.HasPrefix(loc.String(), publicRedirect) {
				t.Fatalf("browser sign-in ended at %s", loc)
			}
			tok := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {fpClient},
				"code": {code}, "code_verifier": {verifier}, "redirect_uri": {publicRedirect}}, "", "")
			if tok.status != 200 {
				t.Fatalf("token: %d %v", tok.status, tok.body)
			}
			// The auth_session ended with the redirect.
			next := url.Values{"client_id": {fpClient}, "auth_session": {res.str("auth_session")}, "otp": {"123456"}}
			if res.str("auth_session") != "" {
				if r := h.challenge(t, next, nil); r.str("error") != "invalid_session" {
					t.Fatalf("after redirect_to_web: %d %s", r.status, r.raw)
				}
			}
		})
	}
	// A factor to set up: require_mfa on the client, none set up.
	cl, _ := h.store.GetClient(ctx, fpClient)
	sc := *(cl.(*storage.Client))
	sc.RequireMFA = true
	if err := h.store.UpdateClient(ctx, &sc); err != nil {
		t.Fatal(err)
	}
	first, _ := firstStep(fpClient)
	res := h.challenge(t, with(first, "username", testUser, "password", testPassword), nil)
	if res.status != http.StatusForbidden || res.str("error") != "redirect_to_web" || res.str("request_uri") == "" {
		t.Fatalf("factor to set up: %d %s", res.status, res.raw)
	}
	b := newBrowser(t)
	p := get(t, b, h.srv.URL+"/oauth2/authorize?"+url.Values{"client_id": {fpClient}, "request_uri": {res.str("request_uri")}}.Encode())
	if p.status != http.StatusOK || !strings.Contains(p.body, `name="password"`) {
		t.Fatalf("authorization endpoint with the request_uri: %d %s", p.status, p.body)
	}
}

// TestChallengeRedirectToWebSeveralRedirectURIs: a client with several
// redirect URIs that named none on the first request cannot have its
// request pushed (RFC 6749 §3.1.2.3): redirect_to_web without a
// request_uri (the app starts its own authorization request), not a 400
// after the password was accepted; with a redirect_uri, the request_uri.
func TestChallengeRedirectToWebSeveralRedirectURIs(t *testing.T) {
	h, _, _ := newChallengeHarness(t, nil, harnessOpts{})
	c := &storage.Client{ID: "multi", Name: "Multi", RedirectURIs: []string{publicRedirect, "com.example.app:/cb"},
		GrantTypes: []string{"authorization_code"}, ResponseTypes: []string{"code"},
		Scopes: []string{"openid"}, TokenEndpointAuthMethod: "none", FirstParty: true,
		CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
	if err := h.store.CreateClient(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	first, _ := firstStep("multi")
	first = with(first, "scope", "openid", "prompt", "consent", "username", testUser, "password", testPassword)
	r := h.challenge(t, first, nil)
	if r.status != http.StatusForbidden || r.str("error") != "redirect_to_web" || r.str("request_uri") != "" || r.str("auth_session") != "" {
		t.Fatalf("no redirect_uri: %d %s", r.status, r.raw)
	}
	first, _ = firstStep("multi")
	first = with(first, "scope", "openid", "prompt", "consent", "redirect_uri", "com.example.app:/cb",
		"username", testUser, "password", testPassword)
	r = h.challenge(t, first, nil)
	if r.status != http.StatusForbidden || r.str("error") != "redirect_to_web" || r.str("request_uri") == "" {
		t.Fatalf("with redirect_uri: %d %s", r.status, r.raw)
	}
}
