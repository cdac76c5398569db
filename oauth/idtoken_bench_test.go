package oauth_test

import (
	"context"
	"testing"

	"github.com/authd/authd/storage"
)

// BenchmarkExchangeIDToken: one code exchange on PostgreSQL with Redis,
// without an ID token (scope offline_access) and with one signed RS256 or
// ES256 (scope openid offline_access). The login that mints each code is
// outside the timer.
func BenchmarkExchangeIDToken(b *testing.B) {
	for _, bc := range []struct{ name, alg, scope string }{
		{"no-id-token", "", "offline_access"},
		{"RS256", "RS256", "openid offline_access"},
		{"ES256", "ES256", "openid offline_access"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := newHarness(b, harnessOpts{backend: "postgres"})
			fc, err := h.store.GetClient(context.Background(), publicClient)
			if err != nil {
				b.Fatal(err)
			}
			c := fc.(*storage.Client).Clone()
			c.IDTokenSignedResponseAlg = bc.alg
			if err := h.store.UpdateClient(context.Background(), c); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				b.StopTimer()
				code, v := h.codeWithScope(b, publicClient, bc.scope)
				b.StartTimer()
				res := h.exchange(b, publicClient, code, v, publicRedirect)
				if res.status != 200 || (bc.alg != "") != (res.str("id_token") != "") {
					b.Fatalf("exchange: %d %v", res.status, res.body)
				}
			}
		})
	}
}
