package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/authd/authd/oauth"
)

// push sends a pushed authorization request (RFC 9126 §2.1) for clientID
// (Basic credentials when secret is set) with the given DPoP proofs.
func (h *harness) push(t testing.TB, clientID, secret, redirect, verifier string, extra url.Values, proofs ...string) tokenResult {
	t.Helper()
	form := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect},
		"scope": {"openid offline_access"}, "state": {"state-0123"},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}}
	for k, v := range extra {
		form[k] = v
	}
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/par", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if secret != "" {
		req.SetBasicAuth(clientID, secret)
	}
	for _, p := range proofs {
		req.Header.Add("DPoP", p)
	}
	return h.do(t, req)
}

// do sends req and reads a JSON answer.
func (h *harness) do(t testing.TB, req *http.Request) tokenResult {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return readTokenResult(t, resp)
}

// parAuthURL is the front-channel authorization request of a pushed one.
func (h *harness) parAuthURL(clientID, requestURI string) string {
	return h.srv.URL + "/oauth2/authorize?" + url.Values{"client_id": {clientID}, "request_uri": {requestURI}}.Encode()
}

// TestPAR: a pushed request's request_uri signs in once (public and
// confidential clients); a second use is refused and issues no code.
func TestPAR(t *testing.T) {
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			h := newHarness(t, harnessOpts{backend: backend})
			for _, c := range []struct{ id, secret, redirect string }{
				{publicClient, "", publicRedirect}, {confClient, confSecret, confRedirect},
			} {
				verifier := oauth2.GenerateVerifier()
				res := h.push(t, c.id, c.secret, c.redirect, verifier, nil)
				uri := res.str("request_uri")
				if res.status != 201 || !strings.HasPrefix(uri, "urn:ietf:params:oauth:request_uri:") || res.body["expires_in"] == nil {
					t.Fatalf("push %s: %d %v", c.id, res.status, res.body)
				}
				loc := h.login(t, newBrowser(t), h.parAuthURL(c.id, uri))
				code := loc.Query().Get("code")
				if code == "" || loc.Query().Get("state") != "state-0123" || !strings.HasPrefix(loc.String(), c.redirect) {
					t.Fatalf("authorize by PAR: %s", loc)
				}
				form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier}, "redirect_uri": {c.redirect}}
				if c.secret == "" {
					form.Set("client_id", c.id)
				}
				if tok := h.postForm(t, "/oauth2/token", form, map[bool]string{true: c.id}[c.secret != ""], c.secret); tok.status != 200 {
					t.Fatalf("exchange: %d %v", tok.status, tok.body)
				}
				// Single use (RFC 9126 §4): the same request_uri again gives
				// no code.
				p := get(t, newBrowser(t), h.parAuthURL(c.id, uri))
				if p.loc != nil && p.loc.Query().Get("code") != "" {
					t.Fatalf("second use of the request_uri issued a code: %s", p.loc)
				}
				if p.loc == nil && strings.Contains(p.body, `name="password"`) {
					t.Fatalf("second use of the request_uri offered a sign-in")
				}
			}
			// A push by an unauthenticated confidential client is refused.
			if res := h.push(t, confClient, "wrong-secret", confRedirect, oauth2.GenerateVerifier(), nil); res.status != 401 {
				t.Fatalf("bad secret: %d %v", res.status, res.body)
			}
			// A push with an unregistered redirect_uri is refused.
			if res := h.push(t, publicClient, "", "https://evil.example/cb", oauth2.GenerateVerifier(), nil); res.status != 400 {
				t.Fatalf("bad redirect: %d %v", res.status, res.body)
			}
		})
	}
}

// TestPARUnknownRequestURI: a request_uri nobody pushed gets an error
// page that says so in words and what to do, not fosite's wording.
func TestPARUnknownRequestURI(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	p := get(t, newBrowser(t), h.parAuthURL(publicClient, "urn:ietf:params:oauth:request_uri:nobody-pushed-this"))
	if p.loc != nil || p.status != http.StatusBadRequest || strings.Contains(p.body, "PAR session") ||
		!strings.Contains(p.body, "The request_uri is unknown, used or expired; push the request again (RFC 9126).") {
		t.Fatalf("unknown request_uri: %d %v %s", p.status, p.loc, p.body)
	}
}

// TestPARRequired: a client registered with
// require_pushed_authorization_requests, and every client under
// RequirePAR, is refused a front-channel request and signs in by PAR.
func TestPARRequired(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "postgres"})
	res := h.admin(t, adminReq{method: "POST", path: "/admin/clients", body: `{"client_name":"PAR app","redirect_uris":["` + publicRedirect + `"],` +
		`"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"token_endpoint_auth_method":"none",` +
		`"scope":"openid offline_access","skip_consent":true,"require_pushed_authorization_requests":true}`})
	id := res.str("client_id")
	if res.status != 201 || res.body["require_pushed_authorization_requests"] != true {
		t.Fatalf("register: %s", res)
	}
	conf := h.oauthConfig(publicClient)
	conf.ClientID = id
	verifier := oauth2.GenerateVerifier()
	p := get(t, newBrowser(t), conf.AuthCodeURL("state-0123", oauth2.S256ChallengeOption(verifier)))
	if p.loc == nil || p.loc.Query().Get("error") != "invalid_request" || p.loc.Query().Get("code") != "" {
		t.Fatalf("front-channel request of a PAR client: %d %v", p.status, p.loc)
	}
	push := h.push(t, id, "", publicRedirect, verifier, nil)
	if loc := h.login(t, newBrowser(t), h.parAuthURL(id, push.str("request_uri"))); loc.Query().Get("code") == "" {
		t.Fatalf("by PAR: %s", loc)
	}

	// Server-wide.
	h2 := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) { c.RequirePAR = true }})
	p = get(t, newBrowser(t), h2.oauthConfig(publicClient).AuthCodeURL("state-0123", oauth2.S256ChallengeOption(verifier)))
	if p.loc == nil || p.loc.Query().Get("error") != "invalid_request" {
		t.Fatalf("RequirePAR, front channel: %d %v", p.status, p.loc)
	}
	md := h2.do(t, mustRequest(t, http.MethodGet, h2.srv.URL+"/.well-known/oauth-authorization-server"))
	if md.body["pushed_authorization_request_endpoint"] != h2.srv.URL+"/oauth2/par" || md.body["require_pushed_authorization_requests"] != true {
		t.Fatalf("metadata: %v", md.body)
	}
}

// TestPARDPoP: a pushed request with a DPoP proof (RFC 9449 §10.1) binds
// the code to the proof's key: the exchange with another key is refused,
// with the key it gets DPoP tokens. A dpop_jkt differing from the proof's
// key is refused.
func TestPARDPoP(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory", dpopNonceOff: true})
	key, other := newDPoPKey(t, "ES256"), newDPoPKey(t, "EdDSA")
	parURL := h.srv.URL + "/oauth2/par"
	verifier := oauth2.GenerateVerifier()
	wantError(t, h.push(t, publicClient, "", publicRedirect, verifier, url.Values{"dpop_jkt": {other.jkt}}, key.proof(t, "POST", parURL, "", "")), 400, "invalid_dpop_proof")
	wantError(t, h.push(t, publicClient, "", publicRedirect, verifier, nil, key.proof(t, "POST", h.srv.URL+"/oauth2/token", "", "")), 400, "invalid_dpop_proof")
	res := h.push(t, publicClient, "", publicRedirect, verifier, nil, key.proof(t, "POST", parURL, "", ""))
	if res.status != 201 {
		t.Fatalf("push: %d %v", res.status, res.body)
	}
	code := h.login(t, newBrowser(t), h.parAuthURL(publicClient, res.str("request_uri"))).Query().Get("code")
	tokenURL := h.srv.URL + "/oauth2/token"
	wantError(t, h.dpopPost(t, codeForm(code, verifier), other.proof(t, "POST", tokenURL, "", "")), 400, "invalid_grant")
	wantError(t, h.exchange(t, publicClient, code, verifier, publicRedirect), 400, "invalid_grant")
	tok := h.dpopPost(t, codeForm(code, verifier), key.proof(t, "POST", tokenURL, "", ""))
	if tok.status != 200 || tok.str("token_type") != "DPoP" {
		t.Fatalf("bound key: %d %v", tok.status, tok.body)
	}
	// A front-channel dpop_jkt is not added to a pushed request.
	v2 := oauth2.GenerateVerifier()
	res = h.push(t, publicClient, "", publicRedirect, v2, nil)
	loc := h.login(t, newBrowser(t), h.parAuthURL(publicClient, res.str("request_uri"))+"&dpop_jkt="+other.jkt)
	if tok := h.exchange(t, publicClient, loc.Query().Get("code"), v2, publicRedirect); tok.status != 200 {
		t.Fatalf("a front-channel dpop_jkt bound a pushed request's code: %d %v", tok.status, tok.body)
	}
}

func mustRequest(t testing.TB, method, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestPARUsedAtIssuance: the request_uri is used up by the code, not by
// the first read: two browsers on the sign-in page of one pushed request
// (both see the login form), the first to sign in gets the code, the
// second nothing.
func TestPARUsedAtIssuance(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "postgres"})
	verifier := oauth2.GenerateVerifier()
	uri := h.push(t, publicClient, "", publicRedirect, verifier, nil).str("request_uri")
	a, b := newBrowser(t), newBrowser(t)
	pa := get(t, a, h.parAuthURL(publicClient, uri))
	pb := get(t, b, h.parAuthURL(publicClient, uri))
	if !strings.Contains(pa.body, `name="password"`) || !strings.Contains(pb.body, `name="password"`) {
		t.Fatalf("login forms: %d %d", pa.status, pb.status)
	}
	fields := func() url.Values {
		return url.Values{"step": {"login"}, "username": {testUser}, "password": {testPassword}}
	}
	ra := submit(t, a, h.srv.URL, pa, fields())
	if ra.loc == nil || ra.loc.Query().Get("code") == "" {
		t.Fatalf("first sign-in: %d %v %s", ra.status, ra.loc, ra.body)
	}
	rb := submit(t, b, h.srv.URL, pb, fields())
	if rb.loc != nil && rb.loc.Query().Get("code") != "" {
		t.Fatalf("the second sign-in of one request_uri got a code: %s", rb.loc)
	}
}
