package oauth

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/authd/authd/password"
	"github.com/authd/authd/secevent"
)

// Metrics are a server's Prometheus metrics, in a registry of their own
// (no package-level state: several servers can run in one process). The
// caller that builds the server's services creates them first (NewMetrics),
// so that the revocation store and the DPoP verifiers count into them
// (RevocationCacheError, DPoPStoreError), and passes them in Deps.Metrics:
// one Server per Metrics.
type Metrics struct {
	registry      *prometheus.Registry
	tokenRequests *prometheus.CounterVec   // grant_type, outcome
	replay        *prometheus.CounterVec   // event: hit, wait, mismatch, fail_open, store_failed
	exchangeTime  *prometheus.HistogramVec // grant_type, path (fresh|replay)
	httpRequests  *prometheus.CounterVec   // route, code
	// dpopReplayFailOpen counts DPoP proofs accepted without the jti
	// store (package dpop fails open).
	dpopReplayFailOpen prometheus.Counter
	// security counts security events (package secevent).
	security *prometheus.CounterVec
}

// NewMetrics returns the metrics of one server, registered in a new
// registry (Registry).
func NewMetrics() *Metrics {
	m := &Metrics{
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
		security: secevent.NewCounter(),
	}
	m.registry.MustRegister(m.tokenRequests, m.replay, m.exchangeTime, m.httpRequests, m.dpopReplayFailOpen, m.security,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is the registry holding the metrics (Server.Registry).
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// RevocationCacheError is revocation.Store's OnError: a revoked grant's
// replay cache entry that could not be dropped counts as a replay cache
// fail_open, with a warning in log.
func (m *Metrics) RevocationCacheError(log *slog.Logger) func(error) {
	return func(err error) {
		m.replay.WithLabelValues("fail_open").Inc()
		log.Warn("replay cache entry of a revoked grant not dropped; it expires with the replay window", "error", err)
	}
}

// DPoPStoreError is dpop.Options.OnStoreError: a proof accepted while the
// jti store could not answer counts in authd_dpop_jti_store_fail_open_total,
// with a warning in log.
func (m *Metrics) DPoPStoreError(log *slog.Logger) func(error) {
	return func(err error) {
		m.dpopReplayFailOpen.Inc()
		log.Warn("DPoP jti store unavailable; proof accepted within its iat window (fail open)", "error", err)
	}
}

// watchPasswords exports the password hasher's slots: how many sign-ins
// (and new passwords) are hashing, and how many wait for a slot.
func (m *Metrics) watchPasswords(h *password.Hasher) {
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

// SecurityEvents returns the recorder of security events (package
// secevent) that writes to log and counts in this registry's
// authd_security_events_total: for the services outside oauth that detect
// one (a passkey's sign count regression).
func (m *Metrics) SecurityEvents(log *slog.Logger) *secevent.Recorder {
	return secevent.New(log, m.security)
}
