package oauth_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/authd/authd/exchangecache/redistest"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/revocation"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// The durable replay record (docs/architecture.md, "The exchange"): a
// retried exchange is answered with the original response whatever
// happened to Redis, and anything that is not the same request is still
// reuse.

// ownRedisHarness is authd on PostgreSQL and a redis-server of the test's
// own, which the test may kill; stop kills it.
func ownRedisHarness(t *testing.T, cfg func(*oauth.Config)) (h *harness, stop func(), flush func()) {
	t.Helper()
	addr, stop := redistest.Start(t)
	cache, client, _ := redisCache(t, addr)
	h = newHarness(t, harnessOpts{backend: "postgres", cache: cache, cfg: cfg})
	flush = func() {
		if err := client.FlushDB(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return h, stop, flush
}

// TestRetryAnsweredWhenRedisFails: the first exchange completes with Redis
// up; Redis is then killed, or flushed; the retry gets the same
// access_token and refresh_token, and the first token is still active.
func TestRetryAnsweredWhenRedisFails(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		breakRedis func(stop, flush func())
	}{
		{"killed", func(stop, _ func()) { stop() }},
		{"flushed", func(_, flush func()) { flush() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h, stop, flush := ownRedisHarness(t, nil)
			code, v := h.code(t, publicClient)
			first := h.redeem(t, code, v)
			c.breakRedis(stop, flush)
			for i := range 2 {
				retry := h.exchange(t, publicClient, code, v, publicRedirect)
				if retry.status != 200 || retry.str("access_token") != first.str("access_token") || retry.str("refresh_token") != first.str("refresh_token") {
					t.Fatalf("retry %d with Redis %s: %d %v, want the first tokens", i, c.name, retry.status, retry.body)
				}
			}
			if !h.introspect(t, first.str("access_token")) {
				t.Fatal("the first access token is not active after the retries")
			}
		})
	}
}

// TestNotTheSameRequestIsReuse: with Redis up and with Redis down, a retry
// after the window, or with another code_verifier, client or redirect_uri,
// gets invalid_grant and revokes the tokens issued from the code.
func TestNotTheSameRequestIsReuse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		retry func(h *harness, code, v string) tokenResult
		wait  time.Duration
	}{
		{"other verifier", func(h *harness, code, _ string) tokenResult {
			return h.exchange(t, publicClient, code, "other-verifier-0123456789-0123456789-0123456789", publicRedirect)
		}, 0},
		{"no verifier", func(h *harness, code, _ string) tokenResult {
			return h.exchange(t, publicClient, code, "", publicRedirect)
		}, 0},
		{"other client", func(h *harness, code, v string) tokenResult {
			return h.exchange(t, "other-app", code, v, publicRedirect)
		}, 0},
		{"other redirect_uri", func(h *harness, code, v string) tokenResult {
			return h.exchange(t, publicClient, code, v, "http://127.0.0.1/callback")
		}, 0},
		{"after the window", func(h *harness, code, v string) tokenResult {
			return h.exchange(t, publicClient, code, v, publicRedirect)
		}, 1500 * time.Millisecond},
	}
	for _, redisState := range []string{"up", "down"} {
		for _, c := range cases {
			t.Run("redis "+redisState+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				h, stop, _ := ownRedisHarness(t, func(cfg *oauth.Config) { cfg.ReplayWindow = time.Second })
				code, v := h.code(t, publicClient)
				first := h.redeem(t, code, v)
				if redisState == "down" {
					stop()
				}
				time.Sleep(c.wait)
				res := c.retry(h, code, v)
				if res.status != 400 || res.str("error") != "invalid_grant" {
					t.Fatalf("retry: %d %v, want invalid_grant", res.status, res.body)
				}
				if h.introspect(t, first.str("access_token")) || h.introspect(t, first.str("refresh_token")) {
					t.Fatal("the tokens issued from the code are still active after reuse")
				}
				// And the genuine retry no longer gets them either.
				if again := h.exchange(t, publicClient, code, v, publicRedirect); again.status == 200 {
					t.Fatalf("a retry after reuse got tokens: %v", again.body)
				}
			})
		}
	}
}

// TestReplayRecordHoldsNoSecret: a dump of replay_records holds no token,
// code or verifier, as text or hex.
func TestReplayRecordHoldsNoSecret(t *testing.T) {
	t.Parallel()
	h, _, _ := newReplayHarness(t, nil)
	code, v := h.code(t, publicClient)
	first := h.redeem(t, code, v)
	refreshed := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"},
		"client_id": {publicClient}, "refresh_token": {first.str("refresh_token")}}, "", "")
	if refreshed.status != 200 {
		t.Fatalf("refresh: %d %v", refreshed.status, refreshed.body)
	}
	rows, err := h.pool.Query(context.Background(), `SELECT r::text, encode(sealed, 'hex'), encode(sealed, 'base64') FROM replay_records r`)
	if err != nil {
		t.Fatal(err)
	}
	dump, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var a, b, c string
		err := r.Scan(&a, &b, &c)
		return a + b + c, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dump) != 2 {
		t.Fatalf("%d replay records, want 2 (exchange and refresh)", len(dump))
	}
	all := strings.Join(dump, "\n")
	for name, secret := range map[string]string{
		"code": code, "code_verifier": v,
		"access_token": first.str("access_token"), "refresh_token": first.str("refresh_token"),
		"new access_token": refreshed.str("access_token"), "new refresh_token": refreshed.str("refresh_token"),
	} {
		// A code or token is key.signature; the signature is what
		// authd stores by design, the key half must never appear.
		key, _, _ := strings.Cut(secret, ".")
		for _, p := range []string{"ory_ac_", "ory_at_", "ory_rt_"} {
			key = strings.TrimPrefix(key, p)
		}
		if strings.Contains(all, key) || strings.Contains(all, secret) {
			t.Errorf("the replay_records dump contains the %s", name)
		}
	}
}

// TestRace32SameVerifier: 32 goroutines race one code with the same
// verifier, with Redis up and with Redis down: the database holds one
// token pair, all 32 get 200 with it (a loser of the database race waits
// for the winner's commit and answers from its record), and the token is
// still active afterwards.
func TestRace32SameVerifier(t *testing.T) {
	t.Parallel()
	for _, redisState := range []string{"up", "down"} {
		t.Run("redis "+redisState, func(t *testing.T) {
			t.Parallel()
			h, stop, _ := ownRedisHarness(t, nil)
			if redisState == "down" {
				stop()
			}
			for round := range 3 {
				code, v := h.code(t, publicClient)
				results := h.raceExchange(t, 32, code, v)
				for i, r := range results {
					if r.status != 200 || r.str("access_token") != results[0].str("access_token") || r.str("refresh_token") != results[0].str("refresh_token") {
						t.Fatalf("round %d, request %d: %d %v; want 200 with the one token pair", round, i, r.status, r.body)
					}
				}
				if !h.introspect(t, results[0].str("access_token")) {
					t.Fatalf("round %d: the token is not active after the race", round)
				}
				if a, r := countTokens(t, h); a != round+1 || r != round+1 {
					t.Fatalf("round %d: %d access and %d refresh tokens in the database, want %d of each", round, a, r, round+1)
				}
			}
		})
	}
}

// countingTracer counts the statements a pgx pool runs.
type countingTracer struct{ n atomic.Int64 }

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *countingTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *countingTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.n.Add(1)
}
func (c *countingTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestReplayFromRedisReadsNoDatabase: a replay served from Redis makes no
// PostgreSQL query (the client cache answers client authentication), and
// a token revoked through /oauth2/revoke is never replayed afterwards,
// from Redis or from the record.
func TestReplayFromRedisReadsNoDatabase(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	tracer := &countingTracer{}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	cache, client, prefix := redisCache(t, redistest.Addr(t))
	h := newHarness(t, harnessOpts{backend: "postgres", pool: pool, cache: cache,
		clientCacheTTL: time.Minute})
	h.seed()

	code, v := h.code(t, publicClient)
	first := h.redeem(t, code, v)
	before := tracer.n.Load()
	for range 5 {
		if r := h.exchange(t, publicClient, code, v, publicRedirect); r.status != 200 || r.str("access_token") != first.str("access_token") {
			t.Fatalf("replay: %d %v", r.status, r.body)
		}
	}
	if n := tracer.n.Load() - before; n != 0 {
		t.Fatalf("5 replays served from Redis ran %d PostgreSQL statements, want 0", n)
	}

	rev := h.postForm(t, "/oauth2/revoke", url.Values{"token": {first.str("refresh_token")}, "client_id": {publicClient}}, "", "")
	if rev.status != 200 {
		t.Fatalf("revoke: %d %v", rev.status, rev.body)
	}
	if r := h.exchange(t, publicClient, code, v, publicRedirect); r.status == 200 {
		t.Fatalf("a revoked response was replayed: %v", r.body)
	}
	// From the record too (this test's Redis keys deleted).
	deletePrefix(t, client, prefix)
	if r := h.exchange(t, publicClient, code, v, publicRedirect); r.status == 200 {
		t.Fatalf("a revoked response was replayed from the record: %v", r.body)
	}
}

// sqlTracer records the statements a pgx pool runs.
type sqlTracer struct {
	mu  sync.Mutex
	sql []string
}

func (c *sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	c.sql = append(c.sql, strings.ToLower(strings.Join(strings.Fields(d.SQL), " ")))
	c.mu.Unlock()
	return ctx
}
func (c *sqlTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A batch's statements count one by one (pgx.BatchTracer).
func (c *sqlTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *sqlTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.mu.Lock()
	c.sql = append(c.sql, strings.ToLower(strings.Join(strings.Fields(d.SQL), " ")))
	c.mu.Unlock()
}
func (c *sqlTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *sqlTracer) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sql
	c.sql = nil
	return s
}

// TestExchangeIsOneWriteTransaction: whatever the client cache setting, a
// code exchange and a refresh each run exactly one transaction, in which
// the code is redeemed (or the refresh token rotated), the tokens are
// stored and the replay record is written; nothing is written outside it,
// and no statement touches the PKCE session table (the code's row is its
// PKCE session).
func TestExchangeIsOneWriteTransaction(t *testing.T) {
	t.Parallel()
	for _, ttl := range []time.Duration{0, time.Minute} {
		t.Run(fmt.Sprintf("client cache %v", ttl), func(t *testing.T) {
			t.Parallel()
			cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			tracer := &sqlTracer{}
			cfg.ConnConfig.Tracer = tracer
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			h := newHarness(t, harnessOpts{backend: "postgres", pool: pool, clientCacheTTL: ttl})
			h.seed()
			code, v := h.code(t, publicClient)
			tracer.take()
			first := h.redeem(t, code, v)
			stmts := tracer.take()
			checkOneTx(t, "exchange", stmts, "update authorize_codes", "insert into access_tokens", "insert into refresh_tokens", "insert into replay_records")
			for _, q := range stmts {
				// The code's row is its PKCE session (adapter.go).
				if strings.Contains(q, "pkce_sessions") {
					t.Errorf("exchange: a statement on the PKCE session table: %s", q)
				}
			}
			r := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient}, "refresh_token": {first.str("refresh_token")}}, "", "")
			if r.status != 200 {
				t.Fatalf("refresh: %d %v", r.status, r.body)
			}
			checkOneTx(t, "refresh", tracer.take(), "update refresh_tokens", "insert into access_tokens", "insert into refresh_tokens", "insert into replay_records")
		})
	}
}

// checkOneTx checks that stmts hold one begin and one commit, that every
// write is between them, and that each of want is among them.
func checkOneTx(t *testing.T, what string, stmts []string, want ...string) {
	t.Helper()
	begin, commit := -1, -1
	for i, s := range stmts {
		switch {
		case s == "begin" || strings.HasPrefix(s, "begin "):
			if begin >= 0 {
				t.Fatalf("%s: two transactions: %q", what, stmts)
			}
			begin = i
		case s == "commit":
			commit = i
		}
	}
	if begin < 0 || commit < begin {
		t.Fatalf("%s: no single transaction: %q", what, stmts)
	}
	for i, s := range stmts {
		write := strings.HasPrefix(s, "insert") || strings.HasPrefix(s, "update") || strings.HasPrefix(s, "delete") || strings.HasPrefix(s, "with ")
		if write && (i < begin || i > commit) {
			t.Errorf("%s: a write outside the transaction: %q", what, s)
		}
	}
	inTx := strings.Join(stmts[begin:commit+1], "\n")
	for _, w := range want {
		if !strings.Contains(inTx, w) {
			t.Errorf("%s: the transaction does not %q: %q", what, w, stmts[begin:commit+1])
		}
	}
}

// TestUserRevocationNeverReplayed: disabling a user or withdrawing their
// consent, through the revocation path the CLI and the server use
// (revocation.Store over the replay cache), ends replays of their token
// responses at once, from Redis and from the record.
func TestUserRevocationNeverReplayed(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"disable", "withdraw consent"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			cache, client, prefix := redisCache(t, redistest.Addr(t))
			h := newHarness(t, harnessOpts{backend: "postgres", cache: cache})
			people := identity.New(revocation.Store{Store: h.store, Cache: cache}, identity.Options{})
			var codes, verifiers []string
			for range 2 {
				c, v := h.code(t, confClient) // shows consent: remembered for the user
				codes, verifiers = append(codes, c), append(verifiers, v)
			}
			exchange := func(i int) tokenResult {
				return h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"authorization_code"},
					"code": {codes[i]}, "code_verifier": {verifiers[i]}, "redirect_uri": {confRedirect}}, confClient, confSecret)
			}
			for i := range codes {
				first := exchange(i)
				if r := exchange(i); first.status != 200 || r.str("access_token") != first.str("access_token") {
					t.Fatalf("exchange and replay %d: %d %v / %d %v", i, first.status, first.body, r.status, r.body)
				}
			}
			var err error
			if how == "disable" {
				_, err = people.Disable(context.Background(), testUser)
			} else {
				err = people.RevokeConsent(context.Background(), testUser, confClient)
			}
			if err != nil {
				t.Fatal(err)
			}
			if r := exchange(0); r.status == 200 {
				t.Fatalf("after %s, a replay from Redis returned tokens: %v", how, r.body)
			}
			deletePrefix(t, client, prefix)
			if r := exchange(1); r.status == 200 {
				t.Fatalf("after %s, a replay from the record returned tokens: %v", how, r.body)
			}
		})
	}
}

// deletePrefix deletes this test's keys from a Redis that other tests
// share (a FLUSHDB of its own would be theirs too).
func deletePrefix(t *testing.T, client *redis.Client, prefix string) {
	t.Helper()
	ctx := context.Background()
	keys, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		if err := client.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}
