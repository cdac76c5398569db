package oauth_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/oauth2"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/exchangecache/redistest"
	"github.com/authd/authd/oauth"
)

// redisCache returns a replay cache on the Redis at addr, isolated by a
// unique key prefix, and the raw client (to inspect what is stored).
func redisCache(t testing.TB, addr string) (*exchangecache.Redis, *redis.Client, string) {
	t.Helper()
	client := redistest.NewClient(t, addr)
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "authd:test:" + hex.EncodeToString(b[:]) + ":"
	return exchangecache.NewRedis(client, exchangecache.RedisOptions{Prefix: prefix, Timeout: time.Second}), client, prefix
}

// newReplayHarness is authd on PostgreSQL + Redis, as in production.
func newReplayHarness(t *testing.T, cfg func(*oauth.Config)) (*harness, *redis.Client, string) {
	t.Helper()
	cache, client, prefix := redisCache(t, redistest.Addr(t))
	return newHarness(t, harnessOpts{backend: "postgres", cache: cache, cfg: cfg}), client, prefix
}

// TestReplaySequential: the same exchange sent twice returns the same
// tokens twice, with no-store, and expires_in counting the remaining life.
func TestReplaySequential(t *testing.T) {
	t.Parallel()
	h, _, _ := newReplayHarness(t, nil)
	code, v := h.code(t, publicClient)
	first := h.exchange(t, publicClient, code, v, publicRedirect)
	second := h.exchange(t, publicClient, code, v, publicRedirect)
	if first.status != 200 || second.status != 200 {
		t.Fatalf("statuses %d %d: %v %v", first.status, second.status, first.body, second.body)
	}
	for _, k := range []string{"access_token", "refresh_token", "scope", "token_type"} {
		if first.str(k) != second.str(k) {
			t.Errorf("%s differs: %q vs %q", k, first.str(k), second.str(k))
		}
	}
	if second.header.Get("Cache-Control") != "no-store" {
		t.Errorf("replay Cache-Control = %q", second.header.Get("Cache-Control"))
	}
	e1, e2 := first.body["expires_in"].(float64), second.body["expires_in"].(float64)
	if e2 > e1 || e2 < e1-5 {
		t.Errorf("expires_in %v then %v", e1, e2)
	}
	if !h.introspect(t, first.str("access_token")) {
		t.Fatal("access token inactive after replay")
	}
	if a, r := countTokens(t, h); a != 1 || r != 1 {
		t.Fatalf("database holds %d access, %d refresh tokens; want one pair", a, r)
	}
}

// TestReplayConcurrent: 16 concurrent identical exchanges all get 200 with
// one access_token, and the database holds one token pair.
func TestReplayConcurrent(t *testing.T) {
	t.Parallel()
	h, _, _ := newReplayHarness(t, nil)
	code, v := h.code(t, publicClient)
	results := h.raceExchange(t, 16, code, v)
	tokens := map[string]bool{}
	for _, r := range results {
		if r.status != 200 {
			t.Fatalf("answer %d %v", r.status, r.body)
		}
		tokens[r.str("access_token")] = true
	}
	if len(tokens) != 1 {
		t.Fatalf("%d distinct access tokens, want 1", len(tokens))
	}
	if a, r := countTokens(t, h); a != 1 || r != 1 {
		t.Fatalf("database holds %d access, %d refresh tokens; want one pair", a, r)
	}
}

// TestReplayMismatch: the same code with another verifier, client_id or
// redirect_uri is code reuse: invalid_grant, and the first tokens are
// revoked (RFC 6749 §4.1.2). The cache entry is dropped, so even the
// original request no longer gets the (revoked) tokens.
func TestReplayMismatch(t *testing.T) {
	t.Parallel()
	h, _, _ := newReplayHarness(t, nil)
	tests := []struct {
		name                     string
		clientID, redirect, verf func(v string) string
	}{
		{name: "other verifier", verf: func(string) string { return oauth2.GenerateVerifier() }},
		{name: "no verifier", verf: func(string) string { return "" }},
		{name: "other client", clientID: func(string) string { return "other-app" }},
		{name: "other redirect_uri", redirect: func(string) string { return "http://127.0.0.1/callback" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, v := h.code(t, publicClient)
			first := h.redeem(t, code, v)
			client, redirect, verifier := publicClient, publicRedirect, v
			if tt.clientID != nil {
				client = tt.clientID(v)
			}
			if tt.redirect != nil {
				redirect = tt.redirect(v)
			}
			if tt.verf != nil {
				verifier = tt.verf(v)
			}
			res := h.exchange(t, client, code, verifier, redirect)
			if res.status != 400 || res.str("error") != "invalid_grant" {
				t.Fatalf("mismatch: %d %v", res.status, res.body)
			}
			if h.introspect(t, first.str("access_token")) || h.introspect(t, first.str("refresh_token")) {
				t.Fatal("first tokens still active after code reuse")
			}
			again := h.exchange(t, publicClient, code, v, publicRedirect)
			if again.status != 400 || again.str("error") != "invalid_grant" {
				t.Fatalf("original after reuse: %d %v (must not replay revoked tokens)", again.status, again.body)
			}
		})
	}
}

// TestReplayWindowExpiry: with a 2s window, a replay after 3s is code
// reuse: invalid_grant, and the first tokens are revoked.
func TestReplayWindowExpiry(t *testing.T) {
	t.Parallel()
	h, _, _ := newReplayHarness(t, func(c *oauth.Config) { c.ReplayWindow = 2 * time.Second })
	code, v := h.code(t, publicClient)
	first := h.redeem(t, code, v)
	if r := h.exchange(t, publicClient, code, v, publicRedirect); r.status != 200 || r.str("access_token") != first.str("access_token") {
		t.Fatalf("replay inside the window: %d %v", r.status, r.body)
	}
	time.Sleep(3 * time.Second)
	late := h.exchange(t, publicClient, code, v, publicRedirect)
	if late.status != 400 || late.str("error") != "invalid_grant" {
		t.Fatalf("replay after the window: %d %v", late.status, late.body)
	}
	if h.introspect(t, first.str("access_token")) {
		t.Fatal("first access token still active after a late replay")
	}
}

// TestReplayRefresh: a duplicate refresh within the window returns the same
// new pair; after the window, reuse revokes the family.
func TestReplayRefresh(t *testing.T) {
	t.Parallel()
	h, _, _ := newReplayHarness(t, func(c *oauth.Config) { c.ReplayWindow = 2 * time.Second })
	code, v := h.code(t, publicClient)
	first := h.exchange(t, publicClient, code, v, publicRedirect)
	refresh := func() tokenResult {
		return h.postForm(t, "/oauth2/token", url.Values{
			"grant_type": {"refresh_token"}, "client_id": {publicClient}, "refresh_token": {first.str("refresh_token")},
		}, "", "")
	}
	r1, r2 := refresh(), refresh()
	if r1.status != 200 || r2.status != 200 {
		t.Fatalf("refresh: %d %v / %d %v", r1.status, r1.body, r2.status, r2.body)
	}
	if r1.str("access_token") != r2.str("access_token") || r1.str("refresh_token") != r2.str("refresh_token") {
		t.Fatal("duplicate refresh inside the window got a different pair")
	}
	if r1.str("refresh_token") == first.str("refresh_token") {
		t.Fatal("refresh token was not rotated")
	}
	time.Sleep(3 * time.Second)
	late := refresh()
	if late.status != 400 || late.str("error") != "invalid_grant" {
		t.Fatalf("reuse after the window: %d %v", late.status, late.body)
	}
	for _, tok := range []string{r1.str("access_token"), r1.str("refresh_token")} {
		if h.introspect(t, tok) {
			t.Fatal("token family still active after refresh token reuse")
		}
	}
}

// TestReplayConfidentialClientMustAuthenticate: a replay for a confidential
// client is served only with its credentials.
func TestReplayConfidentialClientMustAuthenticate(t *testing.T) {
	t.Parallel()
	h, _, _ := newReplayHarness(t, nil)
	code, v := h.code(t, confClient)
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {v}, "redirect_uri": {confRedirect}}
	first := h.postForm(t, "/oauth2/token", form, confClient, confSecret)
	if first.status != 200 {
		t.Fatalf("first: %d %v", first.status, first.body)
	}
	bad := h.postForm(t, "/oauth2/token", form, confClient, "wrong-secret")
	if bad.status != http.StatusUnauthorized || bad.str("error") != "invalid_client" || bad.header.Get("WWW-Authenticate") == "" {
		t.Fatalf("replay with a wrong secret: %d %v %v", bad.status, bad.body, bad.header)
	}
	if bad.str("access_token") != "" {
		t.Fatal("tokens leaked to an unauthenticated replay")
	}
	good := h.postForm(t, "/oauth2/token", form, confClient, confSecret)
	if good.status != 200 || good.str("access_token") != first.str("access_token") {
		t.Fatalf("replay with credentials: %d %v", good.status, good.body)
	}
}

// TestReplayAcrossInstances: two authd instances on one PostgreSQL and one
// Redis; an exchange on one and its duplicate on the other get the same
// tokens.
func TestReplayAcrossInstances(t *testing.T) {
	t.Parallel()
	addr := redistest.Addr(t)
	cacheA, clientA, prefix := redisCache(t, addr)
	a := newHarness(t, harnessOpts{backend: "postgres", cache: cacheA})
	_ = clientA
	cacheB := exchangecache.NewRedis(redistest.NewClient(t, addr), exchangecache.RedisOptions{Prefix: prefix, Timeout: time.Second})
	b := newHarness(t, harnessOpts{backend: "postgres", cache: cacheB, pool: a.pool})

	code, v := a.code(t, publicClient)
	ra := a.exchange(t, publicClient, code, v, publicRedirect)
	rb := b.exchange(t, publicClient, code, v, publicRedirect)
	if ra.status != 200 || rb.status != 200 || ra.str("access_token") != rb.str("access_token") || ra.str("refresh_token") != rb.str("refresh_token") {
		t.Fatalf("A: %d %v\nB: %d %v", ra.status, ra.body, rb.status, rb.body)
	}
	// And concurrently, split across the two instances.
	code, v = a.code(t, publicClient)
	var wg sync.WaitGroup
	results := make([]tokenResult, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := a
			if i%2 == 1 {
				h = b
			}
			results[i] = h.exchange(t, publicClient, code, v, publicRedirect)
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r.status != 200 || r.str("access_token") != results[0].str("access_token") {
			t.Fatalf("split duplicate: %d %v", r.status, r.body)
		}
	}
}

// TestRedisDown: with Redis killed mid-test, logins still succeed, a
// duplicate exchange gets the original response from the durable record
// in PostgreSQL, and nothing answers 500.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	addr, stop := redistest.Start(t)
	cache, _, _ := redisCache(t, addr)
	h := newHarness(t, harnessOpts{backend: "postgres", cache: cache})

	code, v := h.code(t, publicClient)
	if r1, r2 := h.exchange(t, publicClient, code, v, publicRedirect), h.exchange(t, publicClient, code, v, publicRedirect); r1.status != 200 || r2.status != 200 {
		t.Fatalf("with Redis: %d %d", r1.status, r2.status)
	}

	stop()
	for range 3 {
		code, v = h.code(t, publicClient)
		first := h.redeem(t, code, v) // a login still succeeds
		dup := h.exchange(t, publicClient, code, v, publicRedirect)
		if dup.status != 200 || dup.str("access_token") != first.str("access_token") || dup.str("refresh_token") != first.str("refresh_token") {
			t.Fatalf("duplicate with Redis down: %d %v, want the first response", dup.status, dup.body)
		}
	}
	resp, err := http.Get(h.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := new(strings.Builder)
	_, _ = io.Copy(buf, resp.Body)
	if !strings.Contains(buf.String(), `authd_replay_cache_events_total{event="fail_open"}`) {
		t.Fatal("fail_open not counted in /metrics")
	}
}

// TestRawRedisValueHasNoToken: what Redis stores for a completed exchange
// contains neither token (it is sealed under the code_verifier).
func TestRawRedisValueHasNoToken(t *testing.T) {
	t.Parallel()
	h, client, prefix := newReplayHarness(t, nil)
	code, v := h.code(t, publicClient)
	res := h.exchange(t, publicClient, code, v, publicRedirect)
	if res.status != 200 {
		t.Fatalf("%d %v", res.status, res.body)
	}
	ctx := context.Background()
	keys, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %v %v", keys, err)
	}
	if strings.Contains(keys[0], code) {
		t.Fatal("the Redis key contains the code itself")
	}
	raw, err := client.Get(ctx, keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{res.str("access_token"), res.str("refresh_token"), v, code} {
		// Also the token's parts: the key part and the signature part.
		for _, part := range append([]string{secret}, strings.Split(secret, ".")...) {
			if len(part) >= 16 && strings.Contains(raw, part) {
				t.Fatalf("raw Redis value contains %q", part)
			}
		}
	}
}
