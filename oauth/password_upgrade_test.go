package oauth_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// TestLoginFormUpgradesBcrypt: the harness's user has a bcrypt hash (as
// authd made before argon2id). Signing in on the login form replaces it
// with an argon2id hash; the next sign-in, in another browser, verifies
// that; a wrong password on the form changes nothing.
func TestLoginFormUpgradesBcrypt(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})
			ctx := context.Background()
			stored := func() string {
				u, err := h.store.GetUser(ctx, testUser)
				if err != nil {
					t.Fatal(err)
				}
				return string(u.PasswordHash)
			}
			authURL := h.oauthConfig(publicClient).AuthCodeURL("state-upgrade", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
			before := stored()
			if !strings.HasPrefix(before, "$2a$") {
				t.Fatalf("seeded hash %q is not bcrypt", before)
			}

			b := newBrowser(t)
			p := submit(t, b, h.srv.URL, get(t, b, authURL), url.Values{"step": {"login"}, "username": {testUser}, "password": {"not the password"}})
			if p.status != http.StatusUnauthorized || stored() != before {
				t.Fatalf("wrong password: %d, hash changed: %v", p.status, stored() != before)
			}

			h.login(t, newBrowser(t), authURL)
			after := stored()
			if !strings.HasPrefix(after, "$argon2id$v=19$") || testPasswords.NeedsRehash([]byte(after)) {
				t.Fatalf("hash after a sign-in on the form = %q, want argon2id with the server's parameters", after)
			}
			h.login(t, newBrowser(t), authURL)
			if stored() != after {
				t.Error("a sign-in with an argon2id hash rewrote it")
			}
			resp, err := http.Get(h.srv.URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			for _, m := range []string{"authd_password_hashes_in_flight 0", "authd_password_hashes_waiting 0", "authd_password_hash_concurrency "} {
				if !strings.Contains(string(body), m) {
					t.Errorf("/metrics has no %q", m)
				}
			}
		})
	}
}
