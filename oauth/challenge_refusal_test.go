package oauth_test

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// What the challenge endpoint refuses, and the login page's rules it
// shares (issue 28).

func TestChallengeClients(t *testing.T) {
	h, _, _ := newChallengeHarness(t, nil, harnessOpts{})
	first, _ := firstStep(publicClient)
	r := h.challenge(t, with(first, "username", testUser, "password", testPassword), nil)
	if r.status != http.StatusBadRequest || r.str("error") != "unauthorized_client" {
		t.Fatalf("client without first_party: %d %s", r.status, r.raw)
	}
	conf, verifier := firstStep(fpConf)
	conf = with(conf, "username", testUser, "password", testPassword)
	r = h.challenge(t, conf, nil)
	if r.status != http.StatusUnauthorized || r.str("error") != "invalid_client" || r.header.Get("WWW-Authenticate") == "" {
		t.Fatalf("confidential client without authentication: %d %s %q", r.status, r.raw, r.header.Get("WWW-Authenticate"))
	}
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/challenge", strings.NewReader(conf.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(fpConf, fpSecret)
	ok := readTokenResult(t, mustDo(t, req))
	if ok.status != 200 || ok.str("authorization_code") == "" {
		t.Fatalf("confidential client: %d %v", ok.status, ok.body)
	}
	tok := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"authorization_code"}, "code": {ok.str("authorization_code")},
		"code_verifier": {verifier}}, fpConf, fpSecret)
	if tok.status != 200 {
		t.Fatalf("confidential token: %d %v", tok.status, tok.body)
	}
}

// TestChallengeSameAnswerAndSharedLimits: an unknown user and a wrong
// password answer alike, and the password back-off is the login page's.
func TestChallengeSameAnswerAndSharedLimits(t *testing.T) {
	h, _, _ := newChallengeHarness(t, nil, harnessOpts{})
	strip := func(r challengeResult) []byte {
		return bytes.Replace(r.raw, []byte(r.str("auth_session")), nil, 1)
	}
	a, _ := firstStep(fpClient)
	b, _ := firstStep(fpClient)
	unknown := h.challenge(t, with(a, "username", "nobody-here", "password", "whatever"), nil)
	wrong := h.challenge(t, with(b, "username", testUser, "password", "whatever"), nil)
	if unknown.status != wrong.status || !bytes.Equal(strip(unknown), strip(wrong)) {
		t.Fatalf("unknown user %d %s, wrong password %d %s", unknown.status, unknown.raw, wrong.status, wrong.raw)
	}
	// Four more failures on the login page (five with the one above):
	// the endpoint holds the username back as the page would.
	br := newBrowser(t)
	for range 4 {
		p, _ := h.startAuth(t, br)
		if f := h.signInAs(t, br, p, testUser, "still wrong"); f.status != http.StatusUnauthorized {
			t.Fatalf("login page failure: %d", f.status)
		}
	}
	c, _ := firstStep(fpClient)
	if r := h.challenge(t, with(c, "username", testUser, "password", testPassword), nil); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("after five failures: %d %s", r.status, r.raw)
	}
	p, _ := h.startAuth(t, br)
	if f := h.signInAs(t, br, p, testUser, testPassword); f.status != http.StatusTooManyRequests {
		t.Fatalf("login page after five failures: %d", f.status)
	}
}

// TestChallengeBadInput: malformed requests are 400 (or 405, 413) JSON,
// never a 500.
func TestChallengeBadInput(t *testing.T) {
	h, _, _ := newChallengeHarness(t, nil, harnessOpts{})
	first, _ := firstStep(fpClient)
	pw := with(first, "username", testUser, "password", testPassword)
	cases := map[string]string{
		"param twice":       pw.Encode() + "&scope=openid",
		"no challenge":      with(pw, "code_challenge", "").Encode(),
		"plain method":      with(pw, "code_challenge_method", "plain").Encode(),
		"no method":         with(pw, "code_challenge_method", "").Encode(),
		"short challenge":   with(pw, "code_challenge", "abc").Encode(),
		"token response":    with(pw, "response_type", "token").Encode(),
		"no input":          first.Encode(),
		"two inputs":        with(pw, "otp", "123456").Encode(),
		"no password":       with(first, "username", testUser).Encode(),
		"huge password":     with(pw, "password", strings.Repeat("p", 5000)).Encode(),
		"huge username":     with(pw, "username", strings.Repeat("u", 2000)).Encode(),
		"huge scope":        with(pw, "scope", strings.Repeat("openid ", 400)).Encode(),
		"unknown scope":     with(pw, "scope", "openid admin").Encode(),
		"bad acr_values":    with(pw, "acr_values", strings.Repeat("x", 2000)).Encode(),
		"passkey=yes":       with(first, "passkey", "yes").Encode(),
		"assertion first":   with(first, "passkey_assertion", "{}").Encode(),
		"otp first":         with(first, "otp", "123456").Encode(),
		"short session":     url.Values{"client_id": {fpClient}, "auth_session": {"x"}, "otp": {"1"}}.Encode(),
		"huge body":         pw.Encode() + "&x=" + strings.Repeat("y", 70<<10),
		"no client":         with(pw, "client_id", "").Encode(),
		"unknown client":    with(pw, "client_id", "nobody").Encode(),
		"form in the query": "",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			u := h.srv.URL + "/oauth2/challenge"
			if body == "" {
				u += "?" + pw.Encode()
			}
			req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r := readTokenResult(t, mustDo(t, req))
			if r.status < 400 || r.status >= 500 || r.str("error") == "" || r.header.Get("Cache-Control") != "no-store" {
				t.Fatalf("%d %v", r.status, r.body)
			}
		})
	}
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/challenge", strings.NewReader(`{"client_id":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	if r := readTokenResult(t, mustDo(t, req)); r.status != http.StatusBadRequest {
		t.Fatalf("JSON body: %d %v", r.status, r.body)
	}
	resp := mustDo(t, mustReq(t, http.MethodGet, h.srv.URL+"/oauth2/challenge"))
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(resp.Header.Get("Allow"), "POST") {
		t.Fatalf("GET: %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func mustReq(t *testing.T, method, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestChallengeAuthorizationParams: the first request's authorization
// parameters are checked before the password is: a NUL or a byte that is
// not UTF-8 (which PostgreSQL refuses at the code's commit, answered as
// invalid_session), a state too short for the pushed request, a
// redirect_uri the client did not register, a prompt the authorization
// endpoint would refuse are invalid_request, and the password is not
// charged.
func TestChallengeAuthorizationParams(t *testing.T) {
	h, _, _ := newChallengeHarness(t, nil, harnessOpts{})
	for name, kv := range map[string][]string{
		"NUL nonce":             {"nonce", "n\x00"},
		"nonce not UTF-8":       {"nonce", "n\xff"},
		"login_hint not UTF-8":  {"login_hint", "\xff\xfe", "prompt", "consent"},
		"short state":           {"state", "s", "prompt", "consent"},
		"unregistered redirect": {"redirect_uri", "https://evil.example/cb"},
		"scope with NUL":        {"scope", "openid\x00"},
		"unknown prompt":        {"prompt", "xyz"},
		"prompt none and more":  {"prompt", "none consent"},
	} {
		t.Run(name, func(t *testing.T) {
			first, _ := firstStep(fpClient)
			r := h.challenge(t, with(with(first, kv...), "username", testUser, "password", "wrong"), nil)
			if r.status != http.StatusBadRequest || r.str("error") != "invalid_request" {
				t.Fatalf("%d %s", r.status, r.raw)
			}
		})
	}
	// None of the wrong passwords above was tried: the right one
	// passes.
	first, _ := firstStep(fpClient)
	if r := h.challenge(t, with(first, "username", testUser, "password", testPassword, "state", "a-long-enough-state",
		"redirect_uri", publicRedirect), nil); r.status != http.StatusOK {
		t.Fatalf("valid parameters: %d %s", r.status, r.raw)
	}
}
