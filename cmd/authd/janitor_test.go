package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// janitorTables are the request-bearing tables the three-process test fills.
var janitorTables = []string{"authorize_codes", "access_tokens", "refresh_tokens", "pkce_sessions"}

// janitorSeed inserts n rows named prefix-i into every token table, with
// client assertion JTIs and idempotency keys, expiring at exp relative to
// now (negative: expired), active or not.
func janitorSeed(t *testing.T, pool *pgxpool.Pool, prefix string, n int, exp time.Duration, active bool) {
	t.Helper()
	ctx := context.Background()
	for _, table := range janitorTables {
		_, err := pool.Exec(ctx, `INSERT INTO `+table+` (signature, request_id, client_id, requested_at,
			expires_at, session, active)
			SELECT $1 || '-' || g, $1 || '-' || g, 'app', now(), now() + $2 * interval '1 microsecond', '{}', $4
			FROM generate_series(1, $3) g`, prefix, exp.Microseconds(), n, active)
		if err != nil {
			t.Fatalf("seed %s: %v", table, err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO client_assertion_jwts (jti, expires_at)
		SELECT $1 || '-' || g, now() + $2 * interval '1 microsecond' FROM generate_series(1, $3) g`,
		prefix, exp.Microseconds(), n); err != nil {
		t.Fatalf("seed client_assertion_jwts: %v", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO idempotency_keys (credential, endpoint, key_hash,
		request_hash, created_at, expires_at)
		SELECT 'c'::bytea, 'POST /admin/clients', convert_to($1 || '-' || g, 'UTF8'), 'r'::bytea, now(),
			now() + $2 * interval '1 microsecond' FROM generate_series(1, $3) g`,
		prefix, exp.Microseconds(), n); err != nil {
		t.Fatalf("seed idempotency_keys: %v", err)
	}
}

// janitorCount returns, per table, the rows whose name starts with prefix.
func janitorCount(t *testing.T, pool *pgxpool.Pool, prefix string) map[string]int {
	t.Helper()
	out := map[string]int{}
	queries := map[string]string{
		"client_assertion_jwts": `SELECT count(*) FROM client_assertion_jwts WHERE jti LIKE $1 || '-%'`,
		"idempotency_keys":      `SELECT count(*) FROM idempotency_keys WHERE convert_from(key_hash, 'UTF8') LIKE $1 || '-%'`,
	}
	for _, table := range janitorTables {
		queries[table] = `SELECT count(*) FROM ` + table + ` WHERE signature LIKE $1 || '-%'`
	}
	for table, q := range queries {
		var n int
		if err := pool.QueryRow(context.Background(), q, prefix).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		out[table] = n
	}
	return out
}

// TestJanitorThreeProcesses runs three "authd serve" processes with short
// janitor intervals on one database while rows expire and tokens rotate
// under them: expired rows go, live rows stay, each recurring job has one
// pending row at any time, runs are not tripled, and no process logs an
// error or a deadlock.
func TestJanitorThreeProcesses(t *testing.T) {
	dsn := pgtest.DSN(t)
	bin := buildAuthd(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	store := postgres.New(pool)
	if err := store.CreateClient(ctx, &storage.Client{ID: "app", TokenEndpointAuthMethod: "none"}); err != nil {
		t.Fatal(err)
	}

	const (
		nExpired = 500
		nLive    = 50
		interval = 200 * time.Millisecond
	)
	janitorSeed(t, pool, "old", nExpired, -time.Hour, true)
	janitorSeed(t, pool, "live", nLive, time.Hour, true)
	// Redeemed codes and revoked tokens stay until they expire.
	janitorSeed(t, pool, "used", nLive, time.Hour, false)

	dir := t.TempDir()
	env := withoutAuthdEnv()
	env = append(env, "AUTHD_DATABASE_URL="+dsn, "AUTHD_SECRET=janitor-test-secret-0123456789-0123456789",
		"AUTHD_ADDR=127.0.0.1:0", "AUTHD_OPS_ADDR=127.0.0.1:0", "AUTHD_DRAIN_DELAY=0s", "AUTHD_REDIS_URL=memory", "AUTHD_LOG_LEVEL=debug",
		"AUTHD_JANITOR_INTERVAL="+interval.String(), "AUTHD_JANITOR_BATCH=100", "AUTHD_JOB_LEASE=2s", "AUTHD_JANITOR_GRACE=0s")
	type proc struct {
		cmd  *exec.Cmd
		log  string
		done chan error
	}
	var procs []*proc
	for i := range 3 {
		p := &proc{log: filepath.Join(dir, fmt.Sprintf("authd-%d.log", i)), done: make(chan error, 1)}
		f, err := os.Create(p.log)
		if err != nil {
			t.Fatal(err)
		}
		p.cmd = exec.Command(bin, "serve")
		p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = env, f, f
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.done <- p.cmd.Wait(); f.Close() }()
		procs = append(procs, p)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		for _, p := range procs {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
		for i, p := range procs {
			select {
			case err := <-p.done:
				if err != nil {
					t.Errorf("process %d exited with %v", i, err)
				}
			case <-time.After(30 * time.Second):
				_ = p.cmd.Process.Kill()
				t.Errorf("process %d did not stop on SIGTERM", i)
			}
		}
	}
	defer stop()
	started := time.Now()

	// Meanwhile: more rows expire, token families rotate (row locks the
	// janitor must skip, not wait for), and every 25 ms no recurring job
	// may have two pending rows.
	var (
		wg         sync.WaitGroup
		duplicates []string
		mu         sync.Mutex
	)
	workCtx, stopWork := context.WithCancel(ctx)
	seeded := make(chan struct{})
	wg.Go(func() {
		defer close(seeded)
		for i := range 10 {
			janitorSeed(t, pool, fmt.Sprint("late", i), 50, -time.Second, true)
			time.Sleep(100 * time.Millisecond)
		}
	})
	wg.Go(func() {
		for i := 0; workCtx.Err() == nil; i++ {
			if err := janitorRotate(workCtx, store, fmt.Sprint("churn-", i)); err != nil && workCtx.Err() == nil {
				t.Errorf("rotate: %v", err)
				return
			}
		}
	})
	wg.Go(func() {
		for workCtx.Err() == nil {
			rows, err := pool.Query(workCtx, `SELECT unique_key, count(*) FROM jobs
				WHERE status IN ('queued', 'running') AND unique_key IS NOT NULL
				GROUP BY unique_key HAVING count(*) > 1`)
			if err == nil {
				for rows.Next() {
					var (
						key string
						n   int
					)
					_ = rows.Scan(&key, &n)
					mu.Lock()
					duplicates = append(duplicates, fmt.Sprintf("%s×%d", key, n))
					mu.Unlock()
				}
				rows.Close()
			}
			time.Sleep(25 * time.Millisecond)
		}
	})

	// Run for at least 3 s, and until every expired row is gone.
	expired := []string{"old"}
	for i := range 10 {
		expired = append(expired, fmt.Sprint("late", i))
	}
	expiredLeft := func() int {
		n := 0
		for _, prefix := range expired {
			for _, c := range janitorCount(t, pool, prefix) {
				n += c
			}
		}
		return n
	}
	clean := func() bool {
		select {
		case <-seeded:
			return expiredLeft() == 0
		default:
			return false
		}
	}
	for time.Since(started) < 3*time.Second || !clean() {
		for i, p := range procs {
			select {
			case err := <-p.done:
				log, _ := os.ReadFile(p.log)
				t.Fatalf("process %d exited early: %v\n%s", i, err, log)
			default:
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("expired rows still there after %v: %d", time.Since(started), expiredLeft())
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopWork()
	wg.Wait()
	elapsed := time.Since(started)

	// The worker's metrics are on the server's registry, served on the
	// operations listener.
	log0, _ := os.ReadFile(procs[0].log)
	if m := regexp.MustCompile(`"msg":"operations listening","addr":"([^"]+)"`).FindSubmatch(log0); m == nil {
		t.Errorf("no listen address in the log:\n%s", log0)
	} else if resp, err := http.Get("http://" + string(m[1]) + "/metrics"); err != nil {
		t.Errorf("GET /metrics: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, name := range []string{"authd_jobs_claimed_total", "authd_jobs_completed_total", "authd_janitor_rows_deleted_total"} {
			if !strings.Contains(string(body), name) {
				t.Errorf("/metrics has no %s", name)
			}
		}
	}
	stop()

	// Expired rows gone, live rows untouched.
	for _, prefix := range expired {
		for table, n := range janitorCount(t, pool, prefix) {
			if n != 0 {
				t.Errorf("%s: %d expired rows left in %s", prefix, n, table)
			}
		}
	}
	for table, n := range janitorCount(t, pool, "live") {
		if n != nLive {
			t.Errorf("%s: %d live rows left, want %d", table, n, nLive)
		}
	}
	for table, n := range janitorCount(t, pool, "used") {
		if n != nLive {
			t.Errorf("%s: %d unexpired inactive rows left, want %d", table, n, nLive)
		}
	}

	mu.Lock()
	if len(duplicates) > 0 {
		t.Errorf("duplicate pending schedule rows seen: %v", duplicates)
	}
	mu.Unlock()
	rows, err := pool.Query(ctx, `SELECT kind,
		count(*) FILTER (WHERE status IN ('queued', 'running')),
		count(*) FILTER (WHERE status = 'done'),
		count(*) FILTER (WHERE status = 'failed'),
		count(DISTINCT locked_by)
		FROM jobs GROUP BY kind ORDER BY kind`)
	if err != nil {
		t.Fatal(err)
	}
	kinds := 0
	maxRuns := int(elapsed/interval) + 2
	for rows.Next() {
		var (
			kind                          string
			pending, done, failed, owners int
		)
		if err := rows.Scan(&kind, &pending, &done, &failed, &owners); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(kind, "janitor:") {
			continue // not a janitor kind (signing:rotate runs hourly)
		}
		kinds++
		t.Logf("%-30s pending %d, done %3d, failed %d, run by %d processes", kind, pending, done, failed, owners)
		if pending != 1 || failed != 0 || done < 2 || done > maxRuns {
			t.Errorf("%s: %d pending, %d done, %d failed; want 1 pending, 2..%d done (%v at %v), 0 failed",
				kind, pending, done, failed, maxRuns, elapsed.Round(time.Millisecond), interval)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if kinds != 18 { // 8 kinds of token, record and job rows + browser sessions + pushed requests + logout deliveries + passkey ceremonies and links + account flows and mail + the two federation kinds + auth sessions
		t.Errorf("%d janitor kinds ran, want 18", kinds)
	}

	for i, p := range procs {
		log, err := os.ReadFile(p.log)
		if err != nil {
			t.Fatal(err)
		}
		s := string(log)
		for _, bad := range []string{`"level":"ERROR"`, "deadlock", "40P01", "SQLSTATE 40001"} {
			if strings.Contains(s, bad) {
				t.Errorf("process %d logged %s:\n%s", i, bad, s)
			}
		}
		if !strings.Contains(s, "job worker started") {
			t.Errorf("process %d did not start the job worker:\n%s", i, s)
		}
		t.Logf("process %d: %d janitor runs deleted rows", i, strings.Count(s, "janitor: deleted expired rows")-strings.Count(s, `"rows":0`))
	}
}

// janitorRotate issues an access and a refresh token for request id and
// rotates them, as a refresh grant does: one transaction locking both rows.
func janitorRotate(ctx context.Context, s *postgres.Store, id string) error {
	sess := &fosite.DefaultSession{Subject: "alice"}
	sess.SetExpiresAt(fosite.AccessToken, time.Now().Add(time.Hour))
	sess.SetExpiresAt(fosite.RefreshToken, time.Now().Add(time.Hour))
	r := fosite.NewRequest()
	r.ID, r.Client, r.Session = id, &storage.Client{ID: "app"}, sess
	if err := s.CreateAccessTokenSession(ctx, id+"-at", r); err != nil {
		return err
	}
	if err := s.CreateRefreshTokenSession(ctx, id+"-rt", id+"-at", r); err != nil {
		return err
	}
	tx, err := s.BeginTX(ctx)
	if err != nil {
		return err
	}
	if err := s.RotateRefreshToken(tx, id, id+"-rt"); err != nil {
		_ = s.Rollback(tx)
		return err
	}
	time.Sleep(2 * time.Millisecond) // hold the row locks a little
	return s.Commit(tx)
}
