package dpop_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"
	"time"

	"github.com/authd/authd/dpop"
)

// BenchmarkParse is the token endpoint's per-proof work without the jti
// store: a fresh proof (new jti) from one ES256 key each time, as a
// client sends them.
func BenchmarkParse(b *testing.B) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	const n = 256
	proofs := make([]string, n)
	for i := range proofs {
		p, err := dpop.NewProof(key, dpop.AlgES256, dpop.ProofClaims{Method: "POST", URL: tokenURL, IssuedAt: now})
		if err != nil {
			b.Fatal(err)
		}
		proofs[i] = p
	}
	v := verifier(now, nil)
	req := dpop.Request{Method: "POST", URL: tokenURL}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := v.Parse(proofs[i%n], req); err != nil {
			b.Fatal(err)
		}
	}
}
