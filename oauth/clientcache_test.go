package oauth_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/authd/authd/oauth"
)

// TestClientCacheKeepsExchangeInvariants runs the exchange's invariants
// with the cache and memo on: a code is redeemed once, even by 32
// concurrent requests; reuse with another verifier is refused and revokes
// the tokens; a duplicate within the window gets the same tokens.
func TestClientCacheKeepsExchangeInvariants(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend, clientCacheTTL: time.Minute, cfg: func(c *oauth.Config) { c.DisableReplay = true }})
			code, v := h.code(t, publicClient)
			results := h.raceExchange(t, 32, code, v)
			ok, winner := 0, ""
			for _, r := range results {
				switch {
				case r.status == 200:
					ok++
					winner = r.str("access_token")
				case r.status == 400 && r.str("error") == "invalid_grant":
				default:
					t.Errorf("unexpected answer %d %v", r.status, r.body)
				}
			}
			if ok != 1 {
				t.Fatalf("%d requests got tokens, want exactly 1", ok)
			}
			if h.pool != nil {
				if access, _ := countTokens(t, h); access != 1 {
					t.Fatalf("%d access tokens stored, want 1", access)
				}
			}
			// The losers' reuse revoked the winner's tokens (RFC 6749 §4.1.2).
			if h.introspect(t, winner) {
				t.Error("tokens of a reused code are still active")
			}

			// A fresh code: wrong verifier does not consume it; the right one works.
			code, v = h.code(t, publicClient)
			wrong := v[:len(v)-1] + "A"
			if wrong == v {
				wrong = v[:len(v)-1] + "B" // one verifier in 64 ends in A
			}
			if r := h.exchange(t, publicClient, code, wrong, publicRedirect); r.status != 400 {
				t.Fatalf("wrong verifier: %d %v", r.status, r.body)
			}
			if r := h.exchange(t, publicClient, code, v, publicRedirect); r.status != 200 {
				t.Fatalf("right verifier after a wrong one: %d %v", r.status, r.body)
			}
		})
	}
}

// TestClientCacheReplayAndClientCredentials: with the cache on, a
// duplicate exchange is replayed, a mismatched one refused, and the
// client_credentials grant checks the secret every time.
func TestClientCacheReplayAndClientCredentials(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend, clientCacheTTL: time.Minute})
			h.addServiceClient(t)
			code, v := h.code(t, publicClient)
			first := h.exchange(t, publicClient, code, v, publicRedirect)
			again := h.exchange(t, publicClient, code, v, publicRedirect)
			if first.status != 200 || again.status != 200 || again.str("access_token") != first.str("access_token") {
				t.Fatalf("replay: %d %v / %d %v", first.status, first.body, again.status, again.body)
			}
			if r := h.exchange(t, "other-app", code, v, publicRedirect); r.status != 400 || r.str("error") != "invalid_grant" {
				t.Fatalf("other client: %d %v", r.status, r.body)
			}
			for range 3 {
				if r := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, serviceClient, serviceSecret); r.status != http.StatusOK {
					t.Fatalf("client_credentials: %d %v", r.status, r.body)
				}
				if r := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, serviceClient, "wrong"); r.status != http.StatusUnauthorized {
					t.Fatalf("wrong secret with a cached client: %d %v", r.status, r.body)
				}
			}
		})
	}
}
