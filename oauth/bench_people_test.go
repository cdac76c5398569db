package oauth_test

import (
	"net/url"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// BenchmarkSSO is one authorization with a signed-in browser, up to the
// code: a server-side session lookup (and idle-expiry touch) per request.
//   - public: a public client with a private-use redirect: the one-tap page,
//     then the tap (RFC 8252 §8.6);
//   - confidential: a confidential client with a remembered consent:
//     silent.
func BenchmarkSSO(b *testing.B) {
	for _, tc := range []struct{ name, client, redirect string }{
		{"public", publicClient, publicRedirect},
		{"confidential", confClient, confRedirect},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := newBenchHarness(b)
			br := newBrowser(nil)
			conf := h.oauthConfig(tc.client)
			h.login(b, br, conf.AuthCodeURL("bench-state", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				p := get(b, br, conf.AuthCodeURL("bench-state", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
				if p.loc == nil {
					p = submit(b, br, h.srv.URL, p, url.Values{"step": {"continue"}})
				}
				if p.loc == nil || p.loc.Query().Get("code") == "" {
					b.Fatalf("no code: %d %s", p.status, p.body)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			reportMedian(b, lat)
		})
	}
}
