package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ory/fosite"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/jobs"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// tokenKinds are the request-bearing kinds seed creates rows of.
var tokenKinds = []string{storage.CleanupAuthorizeCodes, storage.CleanupAccessTokens,
	storage.CleanupRefreshTokens, storage.CleanupPKCESessions}

func request(id string, exp time.Time) *fosite.Request {
	sess := &fosite.DefaultSession{Subject: "alice"}
	for _, k := range []fosite.TokenType{fosite.AuthorizeCode, fosite.AccessToken, fosite.RefreshToken} {
		sess.SetExpiresAt(k, exp)
	}
	r := fosite.NewRequest()
	r.ID = id
	r.Client = &storage.Client{ID: "app"}
	r.Session = sess
	return r
}

// create stores r as a row of kind under sig.
func create(ctx context.Context, s storage.Store, kind, sig string, r fosite.Requester) error {
	switch kind {
	case storage.CleanupAuthorizeCodes:
		return s.CreateAuthorizeCodeSession(ctx, sig, r)
	case storage.CleanupAccessTokens:
		return s.CreateAccessTokenSession(ctx, sig, r)
	case storage.CleanupRefreshTokens:
		return s.CreateRefreshTokenSession(ctx, sig, "", r)
	default:
		return s.CreatePKCERequestSession(ctx, sig, r)
	}
}

// exists reports whether the row of kind under sig is still stored.
func exists(t *testing.T, s storage.Store, kind, sig string) bool {
	t.Helper()
	ctx, sess := context.Background(), &fosite.DefaultSession{}
	var err error
	switch kind {
	case storage.CleanupAuthorizeCodes:
		_, err = s.GetAuthorizeCodeSession(ctx, sig, sess)
	case storage.CleanupAccessTokens:
		_, err = s.GetAccessTokenSession(ctx, sig, sess)
	case storage.CleanupRefreshTokens:
		_, err = s.GetRefreshTokenSession(ctx, sig, sess)
	default:
		_, err = s.GetPKCERequestSession(ctx, sig, sess)
	}
	if errors.Is(err, storage.ErrNotFound) {
		return false
	}
	if err != nil && !errors.Is(err, storage.ErrInactiveToken) && !errors.Is(err, storage.ErrInvalidatedAuthorizeCode) {
		t.Fatalf("get %s %s: %v", kind, sig, err)
	}
	return true
}

// seed creates the client "app" and, of every token kind, expired rows
// "<kind>-old-<i>" and live rows "<kind>-live-<i>".
func seed(t *testing.T, s storage.Store, expired, live int) {
	t.Helper()
	ctx := context.Background()
	if err := s.CreateClient(ctx, &storage.Client{ID: "app", TokenEndpointAuthMethod: "none"}); err != nil && !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatal(err)
	}
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	for _, kind := range tokenKinds {
		for i := range expired {
			if err := create(ctx, s, kind, fmt.Sprintf("%s-old-%d", kind, i), request(fmt.Sprint("old-", i), past)); err != nil {
				t.Fatal(err)
			}
		}
		for i := range live {
			if err := create(ctx, s, kind, fmt.Sprintf("%s-live-%d", kind, i), request(fmt.Sprint("live-", i), future)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkSeed asserts that the expired rows of seed are gone and the live
// ones all there.
func checkSeed(t *testing.T, s storage.Store, expired, live int) {
	t.Helper()
	for _, kind := range tokenKinds {
		for i := range expired {
			if sig := fmt.Sprintf("%s-old-%d", kind, i); exists(t, s, kind, sig) {
				t.Errorf("expired %s still stored", sig)
			}
		}
		for i := range live {
			if sig := fmt.Sprintf("%s-live-%d", kind, i); !exists(t, s, kind, sig) {
				t.Errorf("live %s deleted", sig)
			}
		}
	}
}

// seedSQL adds expired and live rows of the kinds seed does not cover:
// client assertion JTIs, idempotency keys and finished jobs.
func seedSQL(t *testing.T, pool *pgxpool.Pool, expired, live int) {
	t.Helper()
	for _, q := range []string{
		`INSERT INTO client_assertion_jwts (jti, expires_at)
			SELECT 'old-' || g, now() - interval '1 hour' FROM generate_series(1, $1) g
			UNION ALL SELECT 'live-' || g, now() + interval '1 hour' FROM generate_series(1, $2) g`,
		`INSERT INTO idempotency_keys (credential, endpoint, key_hash, request_hash, created_at, expires_at)
			SELECT 'c'::bytea, 'POST /admin/clients', convert_to('old-' || g, 'UTF8'), 'r'::bytea, now() - interval '2 days',
				now() - interval '1 day' FROM generate_series(1, $1) g
			UNION ALL SELECT 'c'::bytea, 'POST /admin/clients', convert_to('live-' || g, 'UTF8'), 'r'::bytea, now(),
				now() + interval '1 day' FROM generate_series(1, $2) g`,
		`INSERT INTO jobs (kind, status, locked_by, finished_at)
			SELECT 'old', 'done', 'w', now() - interval '30 days' FROM generate_series(1, $1)
			UNION ALL SELECT 'recent', 'done', 'w', now() FROM generate_series(1, $2)`,
		`INSERT INTO replay_records (key, request_id, client_id, fingerprint, sealed, window_end)
			SELECT 'old-' || g, 'r', (SELECT min(id) FROM clients), 'f', 's'::bytea, now() - interval '1 hour' FROM generate_series(1, $1) g
			UNION ALL SELECT 'live-' || g, 'r', (SELECT min(id) FROM clients), 'f', 's'::bytea, now() + interval '1 hour' FROM generate_series(1, $2) g`,
	} {
		if _, err := pool.Exec(context.Background(), q, expired, live); err != nil {
			t.Fatal(err)
		}
	}
}

// countSQL returns the expired and live rows of seedSQL left.
func countSQL(t *testing.T, pool *pgxpool.Pool) (expired, live int) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM client_assertion_jwts WHERE jti LIKE 'old-%')
		+ (SELECT count(*) FROM idempotency_keys WHERE convert_from(key_hash, 'UTF8') LIKE 'old-%')
		+ (SELECT count(*) FROM jobs WHERE kind = 'old')
		+ (SELECT count(*) FROM replay_records WHERE key LIKE 'old-%'),
		(SELECT count(*) FROM client_assertion_jwts WHERE jti LIKE 'live-%')
		+ (SELECT count(*) FROM idempotency_keys WHERE convert_from(key_hash, 'UTF8') LIKE 'live-%')
		+ (SELECT count(*) FROM jobs WHERE kind = 'recent')
		+ (SELECT count(*) FROM replay_records WHERE key LIKE 'live-%')`).Scan(&expired, &live)
	if err != nil {
		t.Fatal(err)
	}
	return expired, live
}

func TestJanitor(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	pool := newPool(t, dsn)
	store := postgres.New(pool)
	const expired, live = 25, 5
	seed(t, store, expired, live)
	seedSQL(t, pool, expired, live)
	// Revoked rows stay until they expire.
	if _, err := pool.Exec(t.Context(), `UPDATE access_tokens SET active = false WHERE signature = 'access_tokens-live-0'`); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	metrics := jobs.NewMetrics(reg)
	cfg := jobs.JanitorConfig{Every: time.Hour, BatchSize: 10, Metrics: metrics, Logger: testLogger(t)}
	var batches int
	cfg = jobs.WithBatchObserver(cfg, func(kind string, rows int, d time.Duration) {
		batches++
		if rows > 10 {
			t.Errorf("%s batch deleted %d rows, more than the batch size", kind, rows)
		}
	})
	kinds, err := jobs.JanitorKinds(t.Context(), store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := mustWorker(t, store, jobs.Config{ID: "w", Metrics: metrics}, kinds...)
	n, err := w.RunDue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n != len(kinds) || n != 18 { // 8 seeded kinds + sessions, pushed requests, logout deliveries, the two passkey kinds, account flows, mail, the two federation kinds and auth sessions (unseeded here)
		t.Errorf("RunDue ran %d jobs, want one per kind (%d)", n, len(kinds))
	}
	if batches < 8*3 {
		t.Errorf("%d batches of 10 for 25+ rows per kind, want at least 3 per kind", batches)
	}

	checkSeed(t, store, expired, live)
	if e, l := countSQL(t, pool); e != 0 || l != 4*live {
		t.Errorf("JTIs, idempotency keys, finished jobs and replay records: %d expired and %d live left; want 0, %d", e, l, 4*live)
	}
	for _, kind := range tokenKinds {
		want := float64(expired)
		if got := counter(t, reg, "authd_janitor_rows_deleted_total", map[string]string{"kind": kind}); got != want {
			t.Errorf("rows deleted{%s} = %v, want %v", kind, got, want)
		}
	}

	// Each kind scheduled its next run, once; none is due now.
	for _, k := range kinds {
		queued := listJobs(t, store, storage.JobFilter{Kind: k.Name, Status: storage.JobQueued})
		if len(queued) != 1 || time.Until(queued[0].RunAt) < 50*time.Minute {
			t.Errorf("%s: queued next runs %+v, want one an hour out", k.Name, queued)
		}
	}
	if n, err := w.RunDue(t.Context()); n != 0 || err != nil {
		t.Errorf("second RunDue = %d, %v; want 0, nil", n, err)
	}
}

func TestSweepMemory(t *testing.T) {
	t.Parallel()
	s := memory.New()
	const expired, live = 25, 5
	seed(t, s, expired, live)
	reg := prometheus.NewRegistry()
	n, err := jobs.Sweep(t.Context(), s, jobs.JanitorConfig{BatchSize: 10, Metrics: jobs.NewMetrics(reg), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(tokenKinds)*expired {
		t.Errorf("Sweep deleted %d rows, want %d", n, len(tokenKinds)*expired)
	}
	checkSeed(t, s, expired, live)
	if got := counter(t, reg, "authd_janitor_rows_deleted_total", map[string]string{"kind": storage.CleanupRefreshTokens}); got != expired {
		t.Errorf("rows deleted{refresh_tokens} = %v, want %d", got, expired)
	}

	// RunSweeper sweeps at once and then on its ticker.
	seed(t, s, expired, 0)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		jobs.RunSweeper(ctx, s, jobs.JanitorConfig{Every: 10 * time.Millisecond, Logger: testLogger(t)})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for exists(t, s, storage.CleanupAccessTokens, "access_tokens-old-0") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	checkSeed(t, s, expired, live)
}
