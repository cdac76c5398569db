package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/authd/authd/oauth"
)

// TestPARBounds: the pushed authorization request endpoint is an entry
// point like the authorization endpoint: the same bounds on state, nonce
// and scope (400 invalid_request, nothing stored), and a budget per client
// and per source address (429 with Retry-After).
func TestPARBounds(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	for name, extra := range map[string]url.Values{
		"60 000-byte state": {"state": {strings.Repeat("s", 60000)}},
		"2049-byte state":   {"state": {strings.Repeat("s", 2049)}},
		"long nonce":        {"nonce": {strings.Repeat("n", 600)}},
		"long scope":        {"scope": {"openid " + strings.Repeat("x", 3000)}},
	} {
		res := h.push(t, publicClient, "", publicRedirect, oauth2.GenerateVerifier(), extra)
		wantError(t, res, http.StatusBadRequest, "invalid_request")
		if d, _ := res.body["error_description"].(string); len(d) > 1024 || strings.Contains(d, "xxxxxxxxxx") || strings.Contains(d, "ssssssssss") {
			t.Errorf("%s: the description echoes the input: %q", name, clip(d))
		}
	}
	// At the bound, accepted.
	res := h.push(t, publicClient, "", publicRedirect, oauth2.GenerateVerifier(), url.Values{"state": {strings.Repeat("s", 2048)}, "nonce": {strings.Repeat("n", 512)}})
	if res.status != http.StatusCreated {
		t.Fatalf("state of 2048 bytes and nonce of 512: %d %v", res.status, res.body)
	}
}

// TestPAROpenIDParameters: what the authorization endpoint refuses as
// invalid_request (an unknown prompt value, prompt=none with another, a bad
// max_age, a claims parameter that is not JSON, a foreign id_token_hint)
// is refused when pushed too, not accepted and failed at the redirect.
func TestPAROpenIDParameters(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	for name, extra := range map[string]url.Values{
		"unknown prompt":    {"prompt": {"bogus"}},
		"prompt none+login": {"prompt": {"none login"}},
		"negative max_age":  {"max_age": {"-1"}},
		"claims not JSON":   {"claims": {"{not json"}},
		"foreign hint":      {"id_token_hint": {"abc.def.ghi"}},
	} {
		res := h.push(t, publicClient, "", publicRedirect, oauth2.GenerateVerifier(), extra)
		if res.status != http.StatusBadRequest || res.body["error"] != "invalid_request" {
			t.Errorf("%s: %d %v, want 400 invalid_request", name, res.status, res.body)
		}
	}
	res := h.push(t, publicClient, "", publicRedirect, oauth2.GenerateVerifier(), url.Values{"prompt": {"login consent"}, "max_age": {"0"}})
	if res.status != http.StatusCreated {
		t.Fatalf("prompt=login consent, max_age=0: %d %v", res.status, res.body)
	}
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// TestPARBudget: pushes beyond a client's budget get 429 with Retry-After;
// another client is not affected.
func TestPARBudget(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) {
		c.PARLimits = oauth.PARLimits{PerClient: oauth.TokenLimits{PerSecond: 0.01, Burst: 3}, PerSource: oauth.TokenLimits{PerSecond: 0.01, Burst: 5}}
	}})
	var last tokenResult
	for range 4 {
		last = h.push(t, publicClient, "", publicRedirect, oauth2.GenerateVerifier(), nil)
	}
	wantError(t, last, http.StatusTooManyRequests, "temporarily_unavailable")
	if last.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	if res := h.push(t, confClient, confSecret, confRedirect, oauth2.GenerateVerifier(), nil); res.status != http.StatusCreated {
		t.Fatalf("another client: %d %v", res.status, res.body)
	}
	// The source's budget (5) is spent now: even another client is refused.
	wantError(t, h.push(t, confClient, confSecret, confRedirect, oauth2.GenerateVerifier(), nil), http.StatusTooManyRequests, "temporarily_unavailable")
}

// TestPARRequestURIOfAnotherClient: a request_uri opened with another
// client_id (RFC 9126 §2.2: bound to the client that pushed it) is an error
// page; nobody is redirected to the pushing client and its state is not
// shown.
func TestPARRequestURIOfAnotherClient(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	res := h.push(t, confClient, confSecret, confRedirect, oauth2.GenerateVerifier(), url.Values{"state": {"secret-state-of-conf"}})
	if res.status != http.StatusCreated {
		t.Fatalf("push: %d %v", res.status, res.body)
	}
	p := get(t, newBrowser(t), h.parAuthURL(publicClient, res.str("request_uri")))
	if p.loc != nil || p.status != http.StatusBadRequest {
		t.Fatalf("request_uri with another client_id: %d, redirect %v; want an error page", p.status, p.loc)
	}
	if strings.Contains(p.body, "secret-state-of-conf") {
		t.Fatal("the error page shows the pushed request's state")
	}
}
