package oauth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
)

// outageStore is a memory store whose reads fail with
// storage.ErrUnavailable while down is set, as PostgreSQL's do when it
// cannot be reached.
type outageStore struct {
	*memory.Store
	down *atomic.Bool
	// recordDown fails only GetReplayRecord (nil: never).
	recordDown *atomic.Bool
}

func (s outageStore) GetReplayRecord(ctx context.Context, key string) (*storage.ReplayRecord, error) {
	if s.recordDown != nil && s.recordDown.Load() {
		return nil, fmt.Errorf("postgres: get replay record: %w: unexpected EOF", storage.ErrUnavailable)
	}
	return s.Store.GetReplayRecord(ctx, key)
}

func (s outageStore) err(op string) error {
	if s.down.Load() {
		return fmt.Errorf("postgres: %s: %w: unexpected EOF", op, storage.ErrUnavailable)
	}
	return nil
}

func (s outageStore) GetClient(ctx context.Context, id string) (fosite.Client, error) {
	if err := s.err("get client"); err != nil {
		return nil, err
	}
	return s.Store.GetClient(ctx, id)
}

func (s outageStore) GetAccessTokenSession(ctx context.Context, sig string, sess fosite.Session) (fosite.Requester, error) {
	if err := s.err("get access token"); err != nil {
		return nil, err
	}
	return s.Store.GetAccessTokenSession(ctx, sig, sess)
}

func (s outageStore) GetUser(ctx context.Context, username string) (*storage.User, error) {
	if err := s.err("get user"); err != nil {
		return nil, err
	}
	return s.Store.GetUser(ctx, username)
}

// TestStorageOutageIs503: while the database cannot be reached, the token
// and introspection endpoints answer 503 temporarily_unavailable with
// Retry-After (not 500 server_error, not "inactive"), the authorization
// page a 503 page (not "unknown app"); nothing is consumed, and once the
// database is back the same code redeems.
func TestStorageOutageIs503(t *testing.T) {
	var down atomic.Bool
	h := newHarness(t, harnessOpts{backend: "custom", store: outageStore{Store: memory.New(), down: &down}})
	code, verifier := h.code(t, publicClient)
	other, otherVerifier := h.code(t, publicClient)
	tok := h.redeem(t, other, otherVerifier)

	down.Store(true)
	res := h.exchange(t, publicClient, code, verifier, publicRedirect)
	if res.status != http.StatusServiceUnavailable || res.str("error") != "temporarily_unavailable" ||
		res.header.Get("Retry-After") == "" || res.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("exchange with the database down: %d %v %v, want 503 temporarily_unavailable with Retry-After", res.status, res.header, res.body)
	}
	res = h.postForm(t, "/oauth2/introspect", map[string][]string{"token": {tok.str("access_token")}}, "", "")
	if res.status != http.StatusUnauthorized { // no credentials: refused before any lookup
		t.Fatalf("introspection without credentials: %d", res.status)
	}
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/introspect", strings.NewReader("token="+tok.str("access_token")))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("introspection with the database down: %d, want 503 (not active:false)", resp.StatusCode)
	}
	p := get(t, newBrowser(t), h.oauthConfig(publicClient).AuthCodeURL("state-0123"))
	if p.status != http.StatusServiceUnavailable || !strings.Contains(p.body, "unavailable") {
		t.Fatalf("authorization page with the database down: %d %s", p.status, p.body)
	}

	down.Store(false)
	if res := h.redeem(t, code, verifier); res.str("access_token") == "" {
		t.Fatalf("after the outage: %v", res.body)
	}
	if !h.introspect(t, tok.str("access_token")) {
		t.Fatal("the token is not active after the outage")
	}
}

// downCache is a replay cache that cannot be reached: every retry goes to
// the durable record.
type downCache struct{}

var errCacheDown = errors.New("redis: connection refused")

func (downCache) Claim(context.Context, string, string, time.Duration) (exchangecache.Result, error) {
	return exchangecache.Result{}, errCacheDown
}
func (downCache) Lookup(context.Context, string, string) (exchangecache.Result, error) {
	return exchangecache.Result{}, errCacheDown
}
func (downCache) Complete(context.Context, string, string, []byte, time.Duration) error {
	return errCacheDown
}
func (downCache) Release(context.Context, string, string) error { return errCacheDown }
func (downCache) Wait(context.Context, string, string, time.Duration) (exchangecache.Result, error) {
	return exchangecache.Result{}, errCacheDown
}
func (downCache) Forget(context.Context, string) error { return errCacheDown }

// TestRetryDuringOutageIsNotReuse: a retried exchange whose replay record
// cannot be read because the database is unreachable is 503, not reuse
// (invalid_grant, tokens revoked); once the database answers, the retry
// gets the original tokens.
func TestRetryDuringOutageIsNotReuse(t *testing.T) {
	var down, recordDown atomic.Bool
	h := newHarness(t, harnessOpts{backend: "custom", cache: downCache{},
		store: outageStore{Store: memory.New(), down: &down, recordDown: &recordDown}})
	code, verifier := h.code(t, publicClient)
	first := h.redeem(t, code, verifier)

	recordDown.Store(true)
	res := h.exchange(t, publicClient, code, verifier, publicRedirect)
	if res.status != http.StatusServiceUnavailable || res.str("error") != "temporarily_unavailable" {
		t.Fatalf("retry with the record unreadable: %d %v, want 503 temporarily_unavailable", res.status, res.body)
	}
	recordDown.Store(false)
	again := h.redeem(t, code, verifier)
	if again.str("access_token") != first.str("access_token") || !h.introspect(t, first.str("access_token")) {
		t.Fatalf("retry after the outage: %v, want the original, active tokens %v", again.body, first.body)
	}
}

// TestRevokeRetryDropsReplayEntry: a revocation that committed on a
// process that died before dropping the grant's replay cache entries is
// retried by the client; fosite answers the retry 200 without revoking
// (the token is already inactive), and the entries must go all the same,
// or the exchange's retry would be answered with the revoked tokens from
// the cache.
func TestRevokeRetryDropsReplayEntry(t *testing.T) {
	store := memory.New()
	h := newHarness(t, harnessOpts{backend: "custom", store: store})
	code, verifier := h.code(t, publicClient)
	tok := h.redeem(t, code, verifier)
	// The first revocation: committed in the store, the cache untouched.
	rt := tok.str("refresh_token")
	req, err := store.GetRefreshTokenSession(t.Context(), rt[strings.LastIndex(rt, ".")+1:], nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.RevokeRefreshToken(t.Context(), req.GetID()); err != nil {
		t.Fatal(err)
	}
	if err := store.RevokeAccessToken(t.Context(), req.GetID()); err != nil {
		t.Fatal(err)
	}
	// The client's retry of the revocation.
	if res := h.postForm(t, "/oauth2/revoke", map[string][]string{"client_id": {publicClient}, "token": {rt}}, "", ""); res.status != 200 {
		t.Fatalf("retried revocation: %d %v", res.status, res.body)
	}
	res := h.exchange(t, publicClient, code, verifier, publicRedirect)
	if res.status != http.StatusBadRequest || res.str("error") != "invalid_grant" || res.str("access_token") != "" {
		t.Fatalf("exchange retry after the revocation: %d %v, want invalid_grant (not the revoked tokens)", res.status, res.body)
	}
}
