package oauth_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/authd/authd/exchangecache/redistest"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// reportMedian adds the median and p99 of the per-operation latencies.
func reportMedian(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds())/1000, "p99-ms")
}

// newBenchHarness is authd on PostgreSQL + Redis when the test backends
// are configured, else on memory (so the benchmark never rots).
func newBenchHarness(b *testing.B) *harness {
	if os.Getenv(pgtest.EnvDSN) == "" || os.Getenv(redistest.EnvAddr) == "" {
		b.Log("memory backends (set AUTHD_TEST_POSTGRES_DSN and AUTHD_TEST_REDIS_ADDR for PostgreSQL + Redis)")
		return newHarness(b, harnessOpts{backend: "memory"})
	}
	cache, _, _ := redisCache(b, redistest.Addr(b))
	return newHarness(b, harnessOpts{backend: "postgres", cache: cache})
}

// mintCodes signs in once, then mints n codes with the session cookie
// (single sign-on, skip_consent client), each with its own verifier.
func mintCodes(b *testing.B, h *harness, n int) (codes, verifiers []string) {
	b.Helper()
	// A browser each: a public client with a private-use redirect and a
	// signed-in browser gets the one-tap page (RFC 8252 §8.6), not a code.
	for range n {
		c, v := h.code(b, publicClient)
		codes, verifiers = append(codes, c), append(verifiers, v)
	}
	return codes, verifiers
}

// BenchmarkLogin is one full login: authorize → login form (password) →
// code → token exchange, on a fresh browser each time.
func BenchmarkLogin(b *testing.B) {
	h := newBenchHarness(b)
	conf := h.oauthConfig(publicClient)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		v := oauth2.GenerateVerifier()
		loc := h.login(b, newBrowser(nil), conf.AuthCodeURL("bench-state", oauth2.S256ChallengeOption(v)))
		res := h.exchange(b, publicClient, loc.Query().Get("code"), v, publicRedirect)
		if res.status != http.StatusOK {
			b.Fatalf("exchange: %d %v", res.status, res.body)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportMedian(b, lat)
}

// BenchmarkExchange is one first token exchange (code → tokens, one
// database transaction), codes minted ahead.
func BenchmarkExchange(b *testing.B) {
	h := newBenchHarness(b)
	codes, vs := mintCodes(b, h, b.N)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		res := h.exchange(b, publicClient, codes[i], vs[i], publicRedirect)
		lat = append(lat, time.Since(start))
		if res.status != http.StatusOK {
			b.Fatalf("exchange: %d %v", res.status, res.body)
		}
	}
	b.StopTimer()
	reportMedian(b, lat)
}

// BenchmarkReplay is one duplicate exchange served by the replay cache.
func BenchmarkReplay(b *testing.B) {
	h := newBenchHarness(b)
	codes, vs := mintCodes(b, h, 1)
	first := h.exchange(b, publicClient, codes[0], vs[0], publicRedirect)
	if first.status != http.StatusOK {
		b.Fatalf("first: %d %v", first.status, first.body)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res := h.exchange(b, publicClient, codes[0], vs[0], publicRedirect)
		lat = append(lat, time.Since(start))
		if res.status != http.StatusOK || res.str("access_token") != first.str("access_token") {
			b.Fatalf("replay: %d %v", res.status, res.body)
		}
	}
	b.StopTimer()
	reportMedian(b, lat)
}

// discardWriter is an http.ResponseWriter that keeps the status and
// drops the body: the handler's own cost, without net/http's.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(s int)           { w.status = s }

// BenchmarkReplayHandler is BenchmarkReplay without HTTP: the request goes
// straight to the server's handler, so ns/op and allocs/op are authd's own
// work on a replay (form, client, the code's HMAC, the Redis claim, the
// sealed response, the answer, the log line and metrics).
func BenchmarkReplayHandler(b *testing.B) {
	h := newBenchHarness(b)
	codes, vs := mintCodes(b, h, 1)
	if first := h.exchange(b, publicClient, codes[0], vs[0], publicRedirect); first.status != http.StatusOK {
		b.Fatalf("first: %d %v", first.status, first.body)
	}
	body := url.Values{
		"grant_type": {"authorization_code"}, "client_id": {publicClient}, "code": {codes[0]},
		"code_verifier": {vs[0]}, "redirect_uri": {publicRedirect},
	}.Encode()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		req := httptest.NewRequest(http.MethodPost, "/oauth2/token", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := &discardWriter{h: http.Header{}}
		h.app.ServeHTTP(w, req)
		if w.status != http.StatusOK && w.status != 0 {
			b.Fatalf("replay: %d", w.status)
		}
	}
}
