package oauth_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/authd/authd/exchangecache"
)

// Regression tests for an adversarial review of the token pipeline.

// TestRevokingRotatedRefreshTokenEndsGrant: an app refreshes, never gets the
// answer, and revokes the refresh token it holds (now rotated): the grant
// ends, the pair it never received is inactive, and a retry of the lost
// refresh is not answered with it (RFC 7009 §2.1). Same for an old access
// token.
func TestRevokingRotatedRefreshTokenEndsGrant(t *testing.T) {
	t.Parallel()
	for _, which := range []string{"refresh_token", "access_token"} {
		t.Run(which, func(t *testing.T) {
			t.Parallel()
			h, _, _ := newReplayHarness(t, nil)
			code, v := h.code(t, publicClient)
			first := h.redeem(t, code, v)
			refresh := url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient}, "refresh_token": {first.str("refresh_token")}}
			lost := h.postForm(t, "/oauth2/token", refresh, "", "")
			if lost.status != 200 {
				t.Fatalf("refresh: %d %v", lost.status, lost.body)
			}
			r := h.postForm(t, "/oauth2/revoke", url.Values{"client_id": {publicClient}, "token": {first.str(which)}, "token_type_hint": {which}}, "", "")
			if r.status != 200 {
				t.Fatalf("revoke the old %s: %d %v", which, r.status, r.body)
			}
			for _, tok := range []string{lost.str("access_token"), lost.str("refresh_token")} {
				if h.introspect(t, tok) {
					t.Fatalf("after revoking the old %s, the new pair is still active", which)
				}
			}
			if r := h.postForm(t, "/oauth2/token", refresh, "", ""); r.status == 200 {
				t.Fatalf("the lost refresh was replayed after revocation: %v", r.body)
			}
		})
	}
}

// TestWiderScopeOnRotatedRefreshToken: a retry asking for a scope never
// granted is invalid_scope, and revokes nothing, also after the token
// rotated.
func TestWiderScopeOnRotatedRefreshToken(t *testing.T) {
	t.Parallel()
	h, _, _ := newReplayHarness(t, nil)
	code, v := h.code(t, publicClient)
	rt := h.redeem(t, code, v).str("refresh_token")
	form := url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient}, "refresh_token": {rt}}
	next := h.postForm(t, "/oauth2/token", form, "", "")
	if next.status != 200 {
		t.Fatalf("refresh: %d %v", next.status, next.body)
	}
	form.Set("scope", "openid offline_access profile")
	if r := h.postForm(t, "/oauth2/token", form, "", ""); r.status != 400 || r.str("error") != "invalid_scope" {
		t.Fatalf("wider scope on a rotated token: %d %v, want invalid_scope", r.status, r.body)
	}
	if !h.introspect(t, next.str("refresh_token")) {
		t.Fatal("a wider-scope retry revoked the family")
	}
	// A narrower scope, or the same set, is the same request.
	for _, sc := range []string{"openid", "offline_access openid"} {
		form.Set("scope", sc)
		if r := h.postForm(t, "/oauth2/token", form, "", ""); r.status != 200 || r.str("refresh_token") != next.str("refresh_token") {
			t.Fatalf("retry with scope %q: %d %v, want the same pair", sc, r.status, r.body)
		}
	}
}

// flakyClaims is a replay cache whose Claim fails for refresh tokens (a
// Redis blip during a rotation).
type flakyClaims struct{ exchangecache.Cache }

func (f flakyClaims) Claim(ctx context.Context, key, fp string, ttl time.Duration) (exchangecache.Result, error) {
	if strings.HasPrefix(key, "r:") {
		return exchangecache.Result{}, context.DeadlineExceeded
	}
	return f.Cache.Claim(ctx, key, fp, ttl)
}

// TestRotationAnsweredWithoutClaimSupersedes: a rotation answered while the
// cache failed still drops the earlier responses' entries, so a replay of
// the code exchange from the cache never returns the rotated tokens.
func TestRotationAnsweredWithoutClaimSupersedes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "postgres", cache: flakyClaims{exchangecache.NewMemory()}})
	code, v := h.code(t, publicClient)
	first := h.redeem(t, code, v)
	if r := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient},
		"refresh_token": {first.str("refresh_token")}}, "", ""); r.status != 200 {
		t.Fatalf("refresh: %d %v", r.status, r.body)
	}
	if r := h.exchange(t, publicClient, code, v, publicRedirect); r.status == 200 {
		t.Fatalf("the code exchange was replayed with rotated tokens: %v", r.body)
	}
}

// TestReviewSmallRules: Basic with any client_secret member is two methods;
// admin 405s carry Allow; a Bearer attempt gets a Bearer challenge.
func TestReviewSmallRules(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	r := do(t, "POST", h.srv.URL+"/oauth2/token", "grant_type=authorization_code&code=x&client_secret=", basicAuth(confClient, confSecret))
	if r.status != 400 || !strings.Contains(r.body, "invalid_request") {
		t.Errorf("Basic and an empty client_secret: %d %s, want invalid_request", r.status, r.body)
	}
	for _, c := range []struct{ method, path, allow string }{
		{"PATCH", "/admin/clients", "GET, POST"},
		{"GET", "/admin/clients/x/secret", "POST"},
		{"PATCH", "/admin/clients/x", "GET, PUT, DELETE"},
	} {
		r := do(t, c.method, h.srv.URL+c.path, "", "Bearer "+testAdminToken)
		if r.status != 405 || r.header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d, Allow %q, want 405 with %q", c.method, c.path, r.status, r.header.Get("Allow"), c.allow)
		}
	}
	r = do(t, "POST", h.srv.URL+"/oauth2/introspect", "token=x", "Bearer wrong")
	if r.status != 401 || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer ") {
		t.Errorf("introspection with a wrong bearer token: %d, WWW-Authenticate %q", r.status, r.header.Get("WWW-Authenticate"))
	}
	r = do(t, "POST", h.srv.URL+"/admin/clients", "{}", "Bearer "+testAdminToken)
	if strings.ContainsAny(r.body, "§…") || !strings.Contains(r.body, "RFC 7591 Section 3.1") {
		t.Errorf("admin error description is not ASCII: %s", r.body)
	}
}
