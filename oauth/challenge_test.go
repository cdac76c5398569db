package oauth_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/authd/authd/storage"
)

// The authorization challenge endpoint (draft-ietf-oauth-first-party-apps-04):
// a Go client signs in without a browser.

const (
	fpClient = "native-app"  // public, first_party
	fpConf   = "native-conf" // confidential, first_party
	fpSecret = "native-conf-secret-with-enough-entropy-0000"
)

// seedFirstParty registers the first-party clients.
func seedFirstParty(t testing.TB, h *harness) {
	t.Helper()
	ctx := context.Background()
	secretHash, _ := h.app.Hasher().Hash(ctx, []byte(fpSecret))
	for _, c := range []*storage.Client{
		{ID: fpClient, Name: "Native", RedirectURIs: []string{publicRedirect},
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
			Scopes: []string{"openid", "offline_access", "profile"}, TokenEndpointAuthMethod: "none", FirstParty: true},
		{ID: fpConf, Name: "Native confidential", SecretHash: secretHash, RedirectURIs: []string{confRedirect},
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
			Scopes: []string{"openid", "offline_access"}, TokenEndpointAuthMethod: "client_secret_basic", FirstParty: true},
	} {
		c.CreatedAt, c.UpdatedAt = time.Now().UTC(), time.Now().UTC()
		if err := h.store.CreateClient(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
}

// challengeResult is a raw answer of the endpoint.
type challengeResult struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (r challengeResult) str(k string) string { s, _ := r.body[k].(string); return s }

// challenge posts form to the endpoint; hdr (may be nil) adds headers.
func (h *harness) challenge(t testing.TB, form url.Values, hdr http.Header) challengeResult {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/challenge", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	res := challengeResult{status: resp.StatusCode, header: resp.Header, body: map[string]any{}}
	res.raw, _ = io.ReadAll(resp.Body)
	if err := json.Unmarshal(res.raw, &res.body); err != nil {
		t.Fatalf("challenge: non-JSON answer %d: %s", resp.StatusCode, res.raw)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("challenge: Cache-Control %q", resp.Header.Get("Cache-Control"))
	}
	return res
}

// firstStep is a first request's authorization parameters with a fresh
// PKCE pair.
func firstStep(clientID string) (url.Values, string) {
	v := oauth2.GenerateVerifier()
	return url.Values{"client_id": {clientID}, "response_type": {"code"}, "scope": {"openid offline_access"},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(v)}, "code_challenge_method": {"S256"}}, v
}

func with(form url.Values, kv ...string) url.Values {
	out := url.Values{}
	for k, v := range form {
		out[k] = slices.Clone(v)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

// redeemNative redeems a code of the native client at the token endpoint,
// without redirect_uri (draft §6).
func (h *harness) redeemNative(t testing.TB, code, verifier string) tokenResult {
	t.Helper()
	res := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {fpClient},
		"code": {code}, "code_verifier": {verifier}}, "", "")
	if res.status != 200 {
		t.Fatalf("token: %d %v", res.status, res.body)
	}
	return res
}

func TestChallengePasswordCodeTokens(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			h := newHarness(t, harnessOpts{backend: backend})
			seedFirstParty(t, h)
			first, verifier := firstStep(fpClient)
			res := h.challenge(t, with(first, "username", testUser, "password", testPassword), nil)
			if res.status != 200 || res.str("authorization_code") == "" {
				t.Fatalf("password step: %d %s", res.status, res.raw)
			}
			tok := h.redeemNative(t, res.str("authorization_code"), verifier)
			if tok.str("access_token") == "" || tok.str("refresh_token") == "" || tok.str("id_token") == "" {
				t.Fatalf("tokens: %v", tok.body)
			}
			claims := jwtClaims(t, tok.str("id_token"))
			if amr, _ := claims["amr"].([]any); len(amr) != 1 || amr[0] != "pwd" || claims["acr"] != "urn:authd:acr:1fa" {
				t.Fatalf("ID token amr %v acr %v", claims["amr"], claims["acr"])
			}
			if claims["sid"] == nil || claims["sid"] == "" {
				t.Fatalf("ID token has no sid: %v", claims)
			}
		})
	}
}

// TestChallengeSessionEndsWithUser: a native sign-in opens a session row
// (no cookie) as the browser's does; disabling the user ends it and
// revokes the tokens, and a retry of the final step is invalid_session.
func TestChallengeSessionEndsWithUser(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "postgres"})
	seedFirstParty(t, h)
	first, verifier := firstStep(fpClient)
	form := with(first, "username", testUser, "password", testPassword)
	res := h.challenge(t, form, nil)
	tok := h.redeemNative(t, res.str("authorization_code"), verifier)
	var n int
	if err := h.pool.QueryRow(context.Background(), `SELECT count(*) FROM sessions`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d session rows, %v", n, err)
	}
	if r := h.admin(t, adminReq{method: "POST", path: "/admin/users/" + testUser + "/disable"}); r.status != 200 {
		t.Fatalf("disable: %d %s", r.status, r.raw)
	}
	if h.introspect(t, tok.str("access_token")) {
		t.Fatal("access token active after the user was disabled")
	}
	if r := h.challenge(t, form, nil); r.status != 400 || r.str("error") != "invalid_session" {
		t.Fatalf("retry after disable: %d %s", r.status, r.raw)
	}
}
