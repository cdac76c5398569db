package oauth_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/oauth2"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// brkDownCache is a replay cache whose Claim always fails: every exchange
// fails open to PostgreSQL, which must arbitrate alone (row lock).
type brkDownCache struct{ exchangecache.Cache }

func (brkDownCache) Claim(context.Context, string, string, time.Duration) (exchangecache.Result, error) {
	return exchangecache.Result{}, errors.New("cache down")
}

func smallPoolHarness(t *testing.T, maxConns int32) *harness {
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h := newHarness(t, harnessOpts{backend: "postgres", pool: pool, cache: brkDownCache{exchangecache.NewMemory()}})
	h.seed()
	return h
}

func idleInTx(t *testing.T, h *harness) int {
	var n int
	if err := h.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitPoolIdle(t *testing.T, h *harness) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if h.pool.Stat().AcquiredConns() == 0 && idleInTx(t, h) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("pool not idle: acquired %d, idle in transaction %d", h.pool.Stat().AcquiredConns(), idleInTx(t, h))
}

// Mixed race: same-verifier and wrong-verifier racers of one code, with
// PostgreSQL as the only arbiter. No wrong-verifier racer gets tokens; at
// most one token pair exists; a wrong-verifier racer that ran first did not
// consume the code.
func TestBreakMixedVerifierRace(t *testing.T) {
	h := smallPoolHarness(t, 4)
	for round := range 5 {
		code, v := h.code(t, publicClient)
		const same, wrong = 8, 8
		res := make([]tokenResult, same+wrong)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range same + wrong {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				vv := v
				if i >= same {
					vv = oauth2.GenerateVerifier()
				}
				res[i] = h.exchange(t, publicClient, code, vv, publicRedirect)
			}()
		}
		close(start)
		wg.Wait()
		var at string
		for i, r := range res {
			if r.status >= 500 {
				t.Errorf("round %d racer %d: %d %v", round, i, r.status, r.body)
			}
			if i >= same && r.status == 200 {
				t.Errorf("round %d: wrong verifier racer %d got tokens", round, i)
			}
			if i < same && r.status == 200 {
				if at != "" && r.str("access_token") != at {
					t.Errorf("round %d: two different token pairs", round)
				}
				at = r.str("access_token")
			}
		}
		waitPoolIdle(t, h)
	}
	// Wrong verifier alone first: the code stays.
	code, v := h.code(t, publicClient)
	for range 3 {
		if r := h.exchange(t, publicClient, code, oauth2.GenerateVerifier(), publicRedirect); r.status != 400 {
			t.Fatalf("wrong verifier: %d %v", r.status, r.body)
		}
	}
	if r := h.exchange(t, publicClient, code, v, publicRedirect); r.status != 200 {
		t.Fatalf("after wrong verifiers the right one: %d %v", r.status, r.body)
	}
}

// Many duplicates on a pool of 2: no deadlock, all 200 with one pair.
func TestBreakSmallPoolDuplicates(t *testing.T) {
	h := smallPoolHarness(t, 2)
	for round := range 3 {
		code, v := h.code(t, publicClient)
		done := make(chan []tokenResult)
		go func() { done <- h.raceExchange(t, 24, code, v) }()
		select {
		case res := <-done:
			for i, r := range res {
				if r.status != 200 || r.str("access_token") != res[0].str("access_token") {
					t.Errorf("round %d racer %d: %d %v", round, i, r.status, r.body)
				}
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: deadlock? pool %+v", round, h.pool.Stat())
		}
		waitPoolIdle(t, h)
	}
	if a, r := countTokens(t, h); a != 3 || r != 3 {
		t.Errorf("%d access, %d refresh tokens; want 3, 3", a, r)
	}
}

// Clients that hang up at various points of an exchange: afterwards no
// connection is leaked or idle in transaction, and a retry works (the
// original answer, or a fresh one if nothing committed).
func TestBreakDisconnects(t *testing.T) {
	h := smallPoolHarness(t, 3)
	for _, d := range []time.Duration{0, 200 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 5 * time.Millisecond, 8 * time.Millisecond, 12 * time.Millisecond} {
		for rep := range 3 {
			code, v := h.code(t, publicClient)
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), d)
					defer cancel()
					form := url.Values{"grant_type": {"authorization_code"}, "client_id": {publicClient}, "code": {code},
						"code_verifier": {v}, "redirect_uri": {publicRedirect}}
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+"/oauth2/token", strings.NewReader(form.Encode()))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					tr := &http.Transport{}
					defer tr.CloseIdleConnections()
					if resp, err := (&http.Client{Transport: tr}).Do(req); err == nil {
						resp.Body.Close()
					}
				}()
			}
			wg.Wait()
			time.Sleep(30 * time.Millisecond)
			waitPoolIdle(t, h)
			r := h.exchange(t, publicClient, code, v, publicRedirect)
			if r.status != 200 {
				t.Errorf("delay %v rep %d: retry after hang-ups: %d %v", d, rep, r.status, r.body)
			}
			if r2 := h.exchange(t, publicClient, code, v, publicRedirect); r2.status != 200 || r2.str("access_token") != r.str("access_token") {
				t.Errorf("delay %v rep %d: second retry %d %v", d, rep, r2.status, r2.body)
			}
		}
	}
}

// A duplicate exchange (the client's retry) whose client hangs up while
// the server reads the replay record: the canceled read is taken for "no
// matching record", i.e. reuse, and the grant the first exchange issued is
// revoked (with a context detached from the request).
func TestBreakHangUpDuringRecordReadRevokesGrant(t *testing.T) {
	h := smallPoolHarness(t, 4)
	code, v := h.code(t, publicClient)
	first := h.redeem(t, code, v)
	if !h.introspect(t, first.str("access_token")) {
		t.Fatal("token inactive right after the exchange")
	}
	// Hold replay_records so that the duplicate's record read waits.
	ctx := context.Background()
	locker, err := h.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Exec(ctx, "LOCK TABLE replay_records IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	form := url.Values{"grant_type": {"authorization_code"}, "client_id": {publicClient}, "code": {code},
		"code_verifier": {v}, "redirect_uri": {publicRedirect}}
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, h.srv.URL+"/oauth2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Logf("duplicate answered %d before the hang-up", resp.StatusCode)
	}
	cancel()
	time.Sleep(300 * time.Millisecond) // the server sees the hang-up
	_ = locker.Rollback(ctx)
	waitPoolIdle(t, h)
	if !h.introspect(t, first.str("access_token")) {
		t.Error("the first exchange's access token was revoked because a retry of the same request hung up")
	}
	if r := h.exchange(t, publicClient, code, v, publicRedirect); r.status != 200 {
		t.Errorf("retry after the hang-up: %d %v", r.status, r.body)
	}
}

// Refresh rotation racing revocation (RFC 7009): once the revocation
// answered 200, no token of the grant is active, whatever the refreshes got.
func TestBreakRefreshRacingRevoke(t *testing.T) {
	h := smallPoolHarness(t, 4)
	for round := range 5 {
		code, v := h.code(t, publicClient)
		first := h.redeem(t, code, v)
		rt := first.str("refresh_token")
		res := make([]tokenResult, 8)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range res {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res[i] = h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient}, "refresh_token": {rt}}, "", "")
			}()
		}
		var rev tokenResult
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			time.Sleep(time.Duration(round) * time.Millisecond)
			rev = h.postForm(t, "/oauth2/revoke", url.Values{"client_id": {publicClient}, "token": {rt}}, "", "")
		}()
		close(start)
		wg.Wait()
		if rev.status != 200 {
			t.Fatalf("revoke: %d %v", rev.status, rev.body)
		}
		for i, r := range res {
			if r.status >= 500 {
				t.Errorf("round %d refresh %d: %d %v", round, i, r.status, r.body)
			}
			if r.status == 200 {
				if h.introspect(t, r.str("access_token")) || h.introspect(t, r.str("refresh_token")) {
					t.Errorf("round %d: a token from a refresh is active after the revocation", round)
				}
			}
		}
		if h.introspect(t, first.str("access_token")) {
			t.Errorf("round %d: first access token active after revocation", round)
		}
		waitPoolIdle(t, h)
	}
}
