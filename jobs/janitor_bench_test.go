package jobs_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/jobs"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// TestJanitorDeleteBench measures the janitor deleting 100,000 expired
// tokens (next to 10,000 live ones) in batches: rows per second, batches,
// the longest single transaction, and the latency of token reads and writes
// running meanwhile. The full measurement runs with AUTHD_JANITOR_BENCH=1:
//
//	AUTHD_JANITOR_BENCH=1 AUTHD_TEST_POSTGRES_DSN=… go test -run JanitorDeleteBench -v ./jobs
//
// Without it, the same code runs on 2,000 rows in one configuration, so
// the measurement cannot rot (and CI never skips it).
func TestJanitorDeleteBench(t *testing.T) {
	expired, live := 100000, 10000
	tests := []struct {
		table string
		batch int
	}{
		{storage.CleanupAccessTokens, 1000},
		{storage.CleanupRefreshTokens, 1000},
		{storage.CleanupAccessTokens, 500},
		{storage.CleanupAccessTokens, 5000},
	}
	if os.Getenv("AUTHD_JANITOR_BENCH") != "1" {
		expired, live = 2000, 200
		tests = tests[:1]
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/batch=%d", tt.table, tt.batch), func(t *testing.T) {
			ctx := t.Context()
			dsn := pgtest.DSN(t)
			pool := newPool(t, dsn)
			store := postgres.New(pool)
			if err := store.CreateClient(ctx, &storage.Client{ID: "app", TokenEndpointAuthMethod: "none"}); err != nil {
				t.Fatal(err)
			}
			// Rows the size of real ones: a session of ~400 bytes, scopes, a
			// form.
			for _, set := range []struct {
				prefix string
				n      int
				exp    string
			}{ // expiries spread as issuance spreads them
				{"old", expired, "- interval '1 hour' - g * interval '30 ms'"},
				{"live", live, "+ interval '1 hour' + g * interval '30 ms'"},
			} {
				extraCol, extraVal := "", ""
				if tt.table == storage.CleanupRefreshTokens {
					extraCol, extraVal = ", access_signature", ", 'at-' || g"
				}
				_, err := pool.Exec(ctx, `INSERT INTO `+tt.table+` (signature, request_id, client_id, subject,
					requested_at, expires_at, scopes, granted_scopes, form, session`+extraCol+`)
					SELECT $1 || '-' || g || '-' || md5(g::text), 'req-' || g, 'app', 'alice', now(),
						now() `+set.exp+`, '{openid,offline_access,profile}', '{openid,offline_access}',
						'redirect_uri=https%3A%2F%2Fapp.example%2Fcb&scope=openid+offline_access+profile',
						jsonb_build_object('subject', 'alice', 'username', 'alice', 'expires_at',
							jsonb_build_object('access_token', now(), 'refresh_token', now()),
							'extra', jsonb_build_object('amr', 'pwd', 'pad', repeat('x', 250)))`+extraVal+`
					FROM generate_series(1, $2) g`, set.prefix, set.n)
				if err != nil {
					t.Fatal(err)
				}
			}
			if _, err := pool.Exec(ctx, `ANALYZE `+tt.table); err != nil {
				t.Fatal(err)
			}

			var kind jobs.Kind
			var (
				mu      sync.Mutex
				batches []time.Duration
			)
			cfg := jobs.WithBatchObserver(jobs.JanitorConfig{BatchSize: tt.batch, Logger: testLogger(t)},
				func(_ string, _ int, d time.Duration) {
					mu.Lock()
					batches = append(batches, d)
					mu.Unlock()
				})
			kinds, err := jobs.JanitorKinds(ctx, store, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range kinds {
				if k.Name == jobs.JanitorKindPrefix+tt.table {
					kind = k
				}
			}
			w := mustWorker(t, store, jobs.Config{ID: "bench"}, kind)

			// The hot path meanwhile: issue and read tokens, on other connections.
			hot := postgres.New(newPool(t, dsn))
			hotCtx, stopHot := context.WithCancel(ctx)
			var (
				hotWG  sync.WaitGroup
				hotLat []time.Duration
			)
			hotWG.Go(func() {
				sess := &fosite.DefaultSession{Subject: "alice"}
				sess.SetExpiresAt(fosite.AccessToken, time.Now().Add(time.Hour))
				for i := 0; hotCtx.Err() == nil; i++ {
					r := fosite.NewRequest()
					r.ID, r.Client, r.Session = fmt.Sprint("hot-", i), &storage.Client{ID: "app"}, sess
					t0 := time.Now()
					err := hot.CreateAccessTokenSession(hotCtx, fmt.Sprint("hot-", i), r)
					if err == nil {
						_, err = hot.GetAccessTokenSession(hotCtx, fmt.Sprint("hot-", i), &fosite.DefaultSession{})
					}
					if hotCtx.Err() != nil {
						return
					}
					if err != nil {
						t.Errorf("hot path: %v", err)
						return
					}
					hotLat = append(hotLat, time.Since(t0))
				}
			})

			start := time.Now()
			n, err := w.RunDue(ctx)
			took := time.Since(start)
			stopHot()
			hotWG.Wait()
			if err != nil || n != 1 {
				t.Fatalf("RunDue = %d, %v", n, err)
			}

			var left, liveLeft int
			if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE signature LIKE 'old-%'),
				count(*) FILTER (WHERE signature LIKE 'live-%') FROM `+tt.table).Scan(&left, &liveLeft); err != nil {
				t.Fatal(err)
			}
			if left != 0 || liveLeft != live {
				t.Fatalf("after the run: %d expired and %d live rows left; want 0, %d", left, liveLeft, live)
			}
			slices.Sort(batches)
			slices.Sort(hotLat)
			pct := func(d []time.Duration, p float64) time.Duration {
				if len(d) == 0 {
					return 0
				}
				return d[min(len(d)-1, int(float64(len(d))*p))]
			}
			// A small run can end before the hot path recorded anything.
			maxOf := func(d []time.Duration) time.Duration { return pct(d, 1) }
			t.Logf("%s, %d expired + %d live rows, batch %d: %d rows in %v = %.0f rows/s; %d transactions, "+
				"longest %v, median %v, p95 %v; token issue+read meanwhile: %d ops, median %v, p99 %v, max %v",
				tt.table, expired, live, tt.batch, expired, took.Round(time.Millisecond),
				float64(expired)/took.Seconds(), len(batches), maxOf(batches).Round(10*time.Microsecond),
				pct(batches, 0.5).Round(10*time.Microsecond), pct(batches, 0.95).Round(10*time.Microsecond),
				len(hotLat), pct(hotLat, 0.5).Round(10*time.Microsecond), pct(hotLat, 0.99).Round(10*time.Microsecond),
				maxOf(hotLat).Round(10*time.Microsecond))
		})
	}
}
