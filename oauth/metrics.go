package oauth

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/authd/authd/password"
)

// metrics are the server's Prometheus metrics, in a registry of its own
// (no package-level state: several servers can run in one process).
type metrics struct {
	registry      *prometheus.Registry
	tokenRequests *prometheus.CounterVec   // grant_type, outcome
	replay        *prometheus.CounterVec   // event: hit, wait, mismatch, fail_open, store_failed
	exchangeTime  *prometheus.HistogramVec // grant_type, path (fresh|replay)
	httpRequests  *prometheus.CounterVec   // route, code
	// dpopReplayFailOpen counts DPoP proofs accepted without the jti
	// store (package dpop fails open).
	dpopReplayFailOpen prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		tokenRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authd_token_requests_total",
			Help: "Token endpoint requests by grant_type and outcome (ok, replayed, or the RFC 6749 §5.2 error code).",
		}, []string{"grant_type", "outcome"}),
		replay: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authd_replay_cache_events_total",
			Help: "Exchange replay cache events: hit (duplicate served the original response from Redis), wait (duplicate waited for an exchange in flight), wait_timeout (still in flight after the wait; PostgreSQL answered), mismatch (same code, other fingerprint or scope), fail_open (cache unavailable; the durable record answers), store_failed (response not cached).",
		}, []string{"event"}),
		exchangeTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "authd_token_exchange_seconds",
			Help:    "Token endpoint latency in seconds by grant_type and path (fresh: tokens issued; replay: the original response from Redis; record: from the durable record in PostgreSQL).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"grant_type", "path"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authd_http_requests_total",
			Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		dpopReplayFailOpen: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "authd_dpop_jti_store_fail_open_total",
			Help: "DPoP proofs accepted while the jti replay store could not answer (fail open; the proof's iat window and nonce still bound it).",
		}),
	}
	m.registry.MustRegister(m.tokenRequests, m.replay, m.exchangeTime, m.httpRequests, m.dpopReplayFailOpen,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// watchPasswords exports the password hasher's slots: how many sign-ins
// (and new passwords) are hashing, and how many wait for a slot.
func (m *metrics) watchPasswords(h *password.Hasher) {
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "authd_password_hashes_in_flight",
			Help: "Password hashes and verifications computing now (at most the hasher's concurrency).",
		}, func() float64 { return float64(h.InFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "authd_password_hashes_waiting",
			Help: "Password hashes and verifications queued for a slot (a burst of sign-ins).",
		}, func() float64 { return float64(h.Waiting()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "authd_password_hash_concurrency",
			Help: "Password hashes and verifications that may compute at once.",
		}, func() float64 { return float64(h.Concurrency()) }),
	)
}
