package oauth_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// TestRequestObjectsNotSupported: request and a request_uri that is not
// PAR's are answered at the client's redirect with request_not_supported
// and request_uri_not_supported (OpenID Connect Core §6.1, §6.2,
// §3.1.2.6), with state and iss; discovery says both are unsupported.
func TestRequestObjectsNotSupported(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	for param, want := range map[string]string{
		"request":     "request_not_supported",
		"request_uri": "request_uri_not_supported",
	} {
		value := "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."
		if param == "request_uri" {
			value = "https://client.example/request.jwt"
		}
		u := h.srv.URL + "/oauth2/authorize?" + url.Values{"client_id": {publicClient}, "redirect_uri": {publicRedirect},
			"response_type": {"code"}, "scope": {"openid"}, "state": {"st-" + param},
			"code_challenge": {oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())}, "code_challenge_method": {"S256"},
			param: {value}}.Encode()
		p := get(t, newBrowser(t), u)
		if p.loc == nil || !strings.HasPrefix(p.loc.String(), publicRedirect) {
			t.Fatalf("%s: %d %v; want a redirect to the client", param, p.status, p.loc)
		}
		q := p.loc.Query()
		if q.Get("error") != want || q.Get("state") != "st-"+param || q.Get("iss") == "" || q.Get("code") != "" {
			t.Fatalf("%s: redirected with %v; want error=%s, the state and iss, no code", param, q, want)
		}
	}
	resp, err := http.Get(h.srv.URL + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	if d["request_parameter_supported"] != false || d["request_uri_parameter_supported"] != false {
		t.Fatalf("discovery: request_parameter_supported=%v request_uri_parameter_supported=%v", d["request_parameter_supported"], d["request_uri_parameter_supported"])
	}
}

// TestNonceBound: a nonce longer than 512 bytes is invalid_request at the
// redirect (the ID token stays small); 512 bytes is accepted.
func TestNonceBound(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	auth := func(nonce string) page {
		return get(t, newBrowser(t), h.srv.URL+"/oauth2/authorize?"+url.Values{"client_id": {publicClient}, "redirect_uri": {publicRedirect},
			"response_type": {"code"}, "scope": {"openid"}, "state": {"state-0123"}, "nonce": {nonce},
			"code_challenge": {oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())}, "code_challenge_method": {"S256"}}.Encode())
	}
	p := auth(strings.Repeat("n", 513))
	if p.loc == nil || p.loc.Query().Get("error") != "invalid_request" || strings.Contains(p.loc.RawQuery, "nnnnnnnnnn") {
		t.Fatalf("nonce of 513 bytes: %d %v", p.status, p.loc)
	}
	if p := auth(strings.Repeat("n", 512)); p.loc != nil || p.status != 200 {
		t.Fatalf("nonce of 512 bytes: %d %v; want the login page", p.status, p.loc)
	}
}
