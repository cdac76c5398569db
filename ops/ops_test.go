package ops_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/exchangecache/redistest"
	"github.com/authd/authd/ops"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func probe(t *testing.T, h http.Handler) (int, ops.Readiness) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var r ops.Readiness
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("/readyz body %q: %v", rec.Body.String(), err)
	}
	return rec.Code, r
}

// TestReadinessRedisDown: with a real Redis killed mid-test, /readyz stays
// 200 with "cache":"degraded" and the metric says so; the warning (the
// cache's own, exchangecache.RedisOptions.Logger) is logged once however
// often the probe runs.
func TestReadinessRedisDown(t *testing.T) {
	addr, stop := redistest.Start(t)
	var log syncBuffer
	cache := exchangecache.NewRedis(redistest.NewClient(t, addr), exchangecache.RedisOptions{Prefix: "ops-test:",
		Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	reg := prometheus.NewRegistry()
	clk := &clock{t: time.Unix(1_000_000, 0)}
	s, err := ops.New(ops.Config{
		Gatherer: reg, Registerer: reg,
		Database: postgres.New(pgtest.New(t)), Cache: cache,
		Logger: slog.New(slog.NewJSONHandler(&log, nil)), Now: clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	if code, r := probe(t, h); code != 200 || r != (ops.Readiness{Status: "ready", Database: "ok", Cache: "ok"}) {
		t.Fatalf("Redis up: %d %+v", code, r)
	}
	stop()
	for i := range 200 {
		code, r := probe(t, h)
		if code != 200 || r.Cache != "degraded" || r.Database != "ok" || r.Status != "ready" {
			t.Fatalf("probe %d with Redis down: %d %+v", i, code, r)
		}
		clk.Add(10 * time.Millisecond) // 200 probes in 2 s
	}
	if n := strings.Count(log.String(), `"level":"WARN"`); n != 1 {
		t.Fatalf("%d warnings for 200 probes within 10 s, want 1:\n%s", n, log.String())
	}
	if got := gauge(t, reg, "authd_dependency_up", "replay_cache"); got != 0 {
		t.Fatalf("authd_dependency_up{replay_cache} = %v, want 0", got)
	}
}

// gauge reads one labelled gauge back from the registry.
func gauge(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if mf.GetName() == name && lp.GetValue() == label {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s}", name, label)
	return 0
}

// TestReadinessDatabaseDown: a database that does not answer is 503.
func TestReadinessDatabaseDown(t *testing.T) {
	// A real pgx pool to a port where nothing listens.
	pool, err := pgxpool.New(t.Context(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var log syncBuffer
	s, err := ops.New(ops.Config{Database: postgres.New(pool), Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if code, r := probe(t, s.Handler()); code != 503 || r.Database != "unavailable" || r.Status != "not_ready" {
			t.Fatalf("database down: %d %+v", code, r)
		}
	}
	if n := strings.Count(log.String(), `"level":"WARN"`); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, log.String())
	}
}

// TestDrain: after Drain, readiness is 503 "draining" although every
// dependency answers; liveness stays 200.
func TestDrain(t *testing.T) {
	s, err := ops.New(ops.Config{Database: postgres.New(pgtest.New(t))})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	if code, _ := probe(t, h); code != 200 {
		t.Fatalf("before Drain: %d", code)
	}
	s.Drain()
	if code, r := probe(t, h); code != 503 || r.Status != "draining" || r.Database != "ok" {
		t.Fatalf("after Drain: %d %+v", code, r)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != 200 {
		t.Fatalf("/healthz while draining: %d", rec.Code)
	}
}

// TestReadiness503RetryAfter: a 503 from /readyz says when to ask again
// (RFC 9110 §10.2.3), for a database down and while draining; a 200 does
// not.
func TestReadiness503RetryAfter(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	down, err := ops.New(ops.Config{Database: postgres.New(pool), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	up, err := ops.New(ops.Config{Database: postgres.New(pgtest.New(t))})
	if err != nil {
		t.Fatal(err)
	}
	get := func(s *ops.Server) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec
	}
	if rec := get(up); rec.Code != 200 || rec.Header().Get("Retry-After") != "" {
		t.Fatalf("ready: %d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	up.Drain()
	for name, s := range map[string]*ops.Server{"database down": down, "draining": up} {
		rec := get(s)
		if n, err := strconv.Atoi(rec.Header().Get("Retry-After")); rec.Code != 503 || err != nil || n <= 0 {
			t.Errorf("%s: %d Retry-After %q", name, rec.Code, rec.Header().Get("Retry-After"))
		}
	}
}

// TestPprofLoopbackOnly: pprof is off by default, and when on answers
// loopback callers only.
func TestPprofLoopbackOnly(t *testing.T) {
	db := postgres.New(pgtest.New(t))
	for _, tt := range []struct {
		pprof  bool
		remote string
		want   int
	}{
		{false, "127.0.0.1:5000", 404},
		{true, "127.0.0.1:5000", 200},
		{true, "[::1]:5000", 200},
		{true, "10.1.2.3:5000", 403},
	} {
		s, err := ops.New(ops.Config{Database: db, Pprof: tt.pprof})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil)
		req.RemoteAddr = tt.remote
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("pprof=%v from %s: %d, want %d", tt.pprof, tt.remote, rec.Code, tt.want)
		}
	}
}
