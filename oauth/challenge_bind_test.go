package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The auth_session is bound to its client and its DPoP key, and short
// lived (draft-ietf-oauth-first-party-apps-04 §9).

func TestChallengeDPoPBinding(t *testing.T) {
	h, _, _ := newChallengeHarness(t, nil, harnessOpts{dpopNonceOff: true})
	keyA, keyB := newDPoPKey(t, "ES256"), newDPoPKey(t, "ES256")
	htu := h.srv.URL + "/oauth2/challenge"
	proofA := func() http.Header { return http.Header{"Dpop": {keyA.proof(t, "POST", htu, "", "")}} }
	proofB := func() http.Header { return http.Header{"Dpop": {keyB.proof(t, "POST", htu, "", "")}} }

	first, verifier := firstStep(fpClient)
	bad := h.repeat(t, with(first, "username", testUser, "password", "nope"), proofA, 8, 2)
	handle := bad.str("auth_session")
	if bad.status != http.StatusForbidden || handle == "" {
		t.Fatalf("first step: %d %s", bad.status, bad.raw)
	}
	next := url.Values{"client_id": {fpClient}, "auth_session": {handle}, "username": {testUser}, "password": {testPassword}}
	for name, hdr := range map[string]http.Header{"another key": proofB(), "no proof": nil} {
		if r := h.challenge(t, next, hdr); r.status != http.StatusBadRequest || r.str("error") != "invalid_session" {
			t.Fatalf("%s: %d %s", name, r.status, r.raw)
		}
	}
	// Another client with the handle (it authenticates as itself).
	other := with(next, "client_id", fpConf)
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/challenge", strings.NewReader(other.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("DPoP", keyA.proof(t, "POST", htu, "", ""))
	req.SetBasicAuth(fpConf, fpSecret)
	if r := readTokenResult(t, mustDo(t, req)); r.status != http.StatusBadRequest || r.str("error") != "invalid_session" {
		t.Fatalf("other client: %d %v", r.status, r.body)
	}
	// The right key: the code, bound to it (RFC 9449 §10).
	done := h.repeat(t, next, proofA, 16, 2)
	code := done.str("authorization_code")
	if done.status != 200 || code == "" {
		t.Fatalf("final step: %d %s", done.status, done.raw)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "client_id": {fpClient}, "code": {code}, "code_verifier": {verifier}}
	if r := h.postForm(t, "/oauth2/token", form, "", ""); r.status != http.StatusBadRequest || r.str("error") != "invalid_grant" {
		t.Fatalf("redeemed without the key: %d %v", r.status, r.body)
	}
	tok := h.dpopPost(t, form, keyA.proof(t, "POST", h.srv.URL+"/oauth2/token", "", ""))
	if tok.status != 200 || tok.str("token_type") != "DPoP" {
		t.Fatalf("redeemed with the key: %d %v", tok.status, tok.body)
	}
}

func mustDo(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestChallengeSessionExpires(t *testing.T) {
	clk := &testClock{}
	h, _, _ := newChallengeHarness(t, nil, harnessOpts{now: clk.now})
	first, _ := firstStep(fpClient)
	bad := h.challenge(t, with(first, "username", testUser, "password", "nope"), nil)
	handle := bad.str("auth_session")
	clk.advance(5*time.Minute + time.Second) // AUTHD_AUTH_SESSION_TTL's default
	next := url.Values{"client_id": {fpClient}, "auth_session": {handle}, "username": {testUser}, "password": {testPassword}}
	if r := h.challenge(t, next, nil); r.status != http.StatusBadRequest || r.str("error") != "invalid_session" {
		t.Fatalf("expired: %d %s", r.status, r.raw)
	}
	if r := h.challenge(t, with(next, "auth_session", strings.Repeat("A", 43)), nil); r.str("error") != "invalid_session" {
		t.Fatalf("unknown handle: %d %s", r.status, r.raw)
	}
}
