package oauth_test

import (
	"net/http"
	"testing"
	"time"
)

// dpopBenchProofs signs n proofs for the token endpoint ahead of the
// timer, with the server's nonce (learnt by a refused request, which
// consumes nothing): the benchmarks measure the server, not the client's
// signing.
func dpopBenchProofs(b *testing.B, h *harness, key dpopKey, code, verifier string, n int) []string {
	b.Helper()
	tokenURL := h.srv.URL + "/oauth2/token"
	res := h.dpopPost(b, codeForm(code, verifier), key.proof(b, "POST", tokenURL, "", ""))
	nonce := res.header.Get("DPoP-Nonce")
	proofs := make([]string, n)
	for i := range proofs {
		proofs[i] = key.proof(b, "POST", tokenURL, nonce, "")
	}
	return proofs
}

// BenchmarkExchangeDPoP is BenchmarkExchange with an ES256 DPoP
// proof: the proof verified, its jti recorded, the tokens bound.
func BenchmarkExchangeDPoP(b *testing.B) {
	h := newBenchHarness(b)
	codes, vs := mintCodes(b, h, b.N)
	proofs := dpopBenchProofs(b, h, newDPoPKey(b, "ES256"), codes[0], vs[0], b.N)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		res := h.dpopPost(b, codeForm(codes[i], vs[i]), proofs[i])
		lat = append(lat, time.Since(start))
		if res.status != http.StatusOK || res.str("token_type") != "DPoP" {
			b.Fatalf("exchange: %d %v", res.status, res.body)
		}
	}
	b.StopTimer()
	reportMedian(b, lat)
}

// BenchmarkReplayDPoP is BenchmarkReplay with a fresh ES256 proof from the
// same key on every retry.
func BenchmarkReplayDPoP(b *testing.B) {
	h := newBenchHarness(b)
	codes, vs := mintCodes(b, h, 1)
	key := newDPoPKey(b, "ES256")
	proofs := dpopBenchProofs(b, h, key, codes[0], vs[0], b.N+1)
	first := h.dpopPost(b, codeForm(codes[0], vs[0]), proofs[b.N])
	if first.status != http.StatusOK {
		b.Fatalf("first: %d %v", first.status, first.body)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		res := h.dpopPost(b, codeForm(codes[0], vs[0]), proofs[i])
		lat = append(lat, time.Since(start))
		if res.status != http.StatusOK || res.str("access_token") != first.str("access_token") {
			b.Fatalf("replay: %d %v", res.status, res.body)
		}
	}
	b.StopTimer()
	reportMedian(b, lat)
}
