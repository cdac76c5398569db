package ops

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Pinger reports whether a dependency answers. The database's Ping is
// storage.Pinger; the Redis replay cache's is exchangecache.Redis.Ping.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Config configures a Server. Database is required; the rest is optional.
type Config struct {
	// Gatherer is what /metrics serves (the server's registry).
	Gatherer prometheus.Gatherer
	// Registerer receives the readiness metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Database must answer for the process to be ready.
	Database Pinger
	// Cache is the replay cache, if it can be down (Redis); nil for an
	// in-process cache, which is always "ok". A failing cache makes
	// readiness "degraded", never 503.
	Cache Pinger
	// Pprof serves /debug/pprof/ (to loopback callers only).
	Pprof bool
	// Logger receives the rate-limited warnings; nil is slog.Default().
	Logger *slog.Logger
	// WarnEvery bounds the warnings about a dependency that is down: at
	// most one per WarnEvery each. Zero means 10 s.
	WarnEvery time.Duration
	// Timeout bounds each check of a probe. Zero means 2 s.
	Timeout time.Duration
	// Now is the clock of the warning limit; nil is time.Now.
	Now func() time.Time
}

// Dependency and readiness states, as /readyz writes them.
const (
	StateOK          = "ok"          // the dependency answered
	StateUnavailable = "unavailable" // the database did not answer: 503
	StateDegraded    = "degraded"    // the cache did not answer: still 200
	StateReady       = "ready"
	StateNotReady    = "not_ready"
	StateDraining    = "draining"
)

// Readiness is the body of /readyz.
type Readiness struct {
	Status   string `json:"status"`   // ready, not_ready or draining
	Database string `json:"database"` // ok or unavailable
	Cache    string `json:"cache"`    // ok or degraded
	// CacheError says what is failing while the cache is degraded (for a
	// Redis Cluster, which master; see RedisHealth).
	CacheError string `json:"cache_error,omitempty"`
}

// Server holds the readiness state. Create it with New; it is safe for
// concurrent use.
type Server struct {
	cfg       Config
	draining  atomic.Bool
	up        *prometheus.GaugeVec
	ready     prometheus.Gauge
	dbWarn    limiter
	cacheWarn limiter
}

// ErrNoDatabase is returned by New without Config.Database.
var ErrNoDatabase = errors.New("ops: Config.Database is required")

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Database == nil {
		return nil, ErrNoDatabase
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WarnEvery <= 0 {
		cfg.WarnEvery = 10 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{
		cfg: cfg,
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "authd_dependency_up",
			Help: "Whether a dependency answered the last readiness probe (1) or not (0): database, replay_cache. A replay cache that is down degrades authd (retried exchanges are answered from PostgreSQL) but keeps it ready.",
		}, []string{"dependency"}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "authd_ready",
			Help: "Whether the last readiness probe answered 200 (1) or 503 (0: database unreachable, or draining).",
		}),
	}
	s.dbWarn.every, s.cacheWarn.every = cfg.WarnEvery, cfg.WarnEvery
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.up); err != nil {
			return nil, err
		}
		if err := cfg.Registerer.Register(s.ready); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Drain makes readiness 503 from now on: a load balancer stops sending new
// requests while the in-flight ones finish (authd serve calls it on
// SIGTERM, before it closes the public listener).
func (s *Server) Drain() { s.draining.Store(true) }

// Check runs one readiness probe: the database, then the cache.
func (s *Server) Check(ctx context.Context) (int, Readiness) {
	r := Readiness{Status: StateReady, Database: StateOK, Cache: StateOK}
	code := http.StatusOK
	if err := s.ping(ctx, s.cfg.Database); err != nil {
		r.Database, r.Status, code = StateUnavailable, StateNotReady, http.StatusServiceUnavailable
		s.warn(&s.dbWarn, "database unreachable: readiness is 503 until it answers", err)
		s.up.WithLabelValues("database").Set(0)
	} else {
		s.recovered(&s.dbWarn, "database reachable again")
		s.up.WithLabelValues("database").Set(1)
	}
	if s.cfg.Cache != nil {
		if err := s.ping(ctx, s.cfg.Cache); err != nil {
			// The cache logs its own health (one warning per 10 s,
			// exchangecache.RedisOptions.Logger): readiness only reports it.
			r.Cache, r.CacheError = StateDegraded, err.Error()
			s.up.WithLabelValues("replay_cache").Set(0)
		} else {
			s.recovered(&s.cacheWarn, "replay cache (Redis) reachable again")
			s.up.WithLabelValues("replay_cache").Set(1)
		}
	} else {
		s.up.WithLabelValues("replay_cache").Set(1)
	}
	if s.draining.Load() {
		r.Status, code = StateDraining, http.StatusServiceUnavailable
	}
	if code == http.StatusOK {
		s.ready.Set(1)
	} else {
		s.ready.Set(0)
	}
	return code, r
}

func (s *Server) ping(ctx context.Context, p Pinger) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return p.Ping(ctx)
}

// warn logs msg unless l logged within its interval; it counts the
// suppressed ones and reports them with the next line.
func (s *Server) warn(l *limiter, msg string, err error) {
	if n, ok := l.allow(s.cfg.Now()); ok {
		s.cfg.Logger.Warn(msg, "error", err.Error(), "suppressed", n, "every_s", l.every.Seconds())
	}
}

// recovered logs msg once when a dependency answers again after a warning.
func (s *Server) recovered(l *limiter, msg string) {
	if l.reset() {
		s.cfg.Logger.Info(msg)
	}
}

// retryAfterSeconds is /readyz's Retry-After on a 503.
const retryAfterSeconds = "5"

// Handler returns the operations mux: /metrics, /healthz, /readyz and,
// with Config.Pprof, /debug/pprof/.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		code, body := s.Check(r.Context())
		if code == http.StatusServiceUnavailable {
			// RFC 9110 §10.2.3: when to ask again (a few probe periods of
			// a typical load balancer; a draining process is replaced).
			w.Header().Set("Retry-After", retryAfterSeconds)
		}
		writeJSON(w, code, body)
	})
	if s.cfg.Pprof {
		mux.Handle("/debug/pprof/", loopbackOnly(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/cmdline", loopbackOnly(http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", loopbackOnly(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", loopbackOnly(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", loopbackOnly(http.HandlerFunc(pprof.Trace)))
	}
	return mux
}

// loopbackOnly answers 403 to a caller that is not on this machine (or in
// this pod: kubectl port-forward connects from loopback). Profiles expose
// memory contents; the operations port may be reachable from the cluster.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "forbidden", "error_description": "pprof answers loopback callers only (use kubectl port-forward or ssh)."})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// limiter lets one event through per interval and counts the others.
type limiter struct {
	every time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
	warned     bool // a warning was logged since the last recovery
}

// allow reports whether an event at now may be logged, and how many were
// suppressed since the last one that was.
func (l *limiter) allow(now time.Time) (suppressed int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		return 0, false
	}
	n := l.suppressed
	l.last, l.suppressed, l.warned = now, 0, true
	return n, true
}

// reset reports whether a warning was logged before, and forgets it. The
// interval still holds: a dependency that flaps is not logged more often.
func (l *limiter) reset() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	was := l.warned
	l.warned = false
	return was
}
