package oauth_test

import (
	"context"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// roundTripTracer counts the round trips a pgx pool makes: a statement
// alone is one, a batch is one.
type roundTripTracer struct{ n atomic.Int64 }

func (c *roundTripTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *roundTripTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *roundTripTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *roundTripTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *roundTripTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestReturningSignInRoundTrips: with both second factors on (the
// authenticator app, and passkeys on a domain-name issuer), a returning
// user's authorization request reads the session, its user, the consent
// and the user's factors in one round trip, and the code's issue is one
// more (docs/architecture.md "Round trips"); a factor or the operator's
// requirement read that way still asks the second factor.
func TestReturningSignInRoundTrips(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	tracer := &roundTripTracer{}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h := newHarness(t, harnessOpts{backend: "postgres", pool: pool, clientCacheTTL: time.Minute, cfg: func(c *oauth.Config) {
		c.Issuer = strings.Replace(c.Issuer, "127.0.0.1", "localhost", 1)
	}})
	h.seed()
	base := strings.Replace(h.srv.URL, "127.0.0.1", "localhost", 1)
	authURL := func() string {
		return strings.Replace(h.authURL(publicClient, publicRedirect), h.srv.URL, base, 1)
	}

	b := newBrowser(t)
	p := get(t, b, authURL())
	if !strings.Contains(p.body, "/signin/passkey/options") {
		t.Fatalf("passkeys are not offered on the login page: %d %s", p.status, p.body)
	}
	p = submit(t, b, base, p, url.Values{"step": {"login"}, "username": {testUser}, "password": {testPassword}})
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		t.Fatalf("want the code after signing in, got %d: %s", p.status, p.body)
	}

	// A returning user: the one-tap page (a private-use redirect), then
	// the code.
	before := tracer.n.Load()
	p = get(t, b, authURL())
	if n := tracer.n.Load() - before; n != 1 || !strings.Contains(p.body, `value="continue"`) {
		t.Fatalf("returning user's request: %d round trips, want 1 (page %d: %s)", n, p.status, p.body)
	}
	before = tracer.n.Load()
	p = submit(t, b, base, p, url.Values{"step": {"continue"}})
	if n := tracer.n.Load() - before; n != 2 || p.loc == nil || p.loc.Query().Get("code") == "" {
		t.Fatalf("one tap: %d round trips, want 2 (the read, the code's issue); got %d %v", n, p.status, p.loc)
	}

	// Each factor, read with the session, asks for the second factor.
	ctx := t.Context()
	u, err := h.store.GetUser(ctx, testUser)
	if err != nil {
		t.Fatal(err)
	}
	ps := h.store.(storage.PasskeyStore)
	for _, tc := range []struct {
		name       string
		set, unset func() error
		want       string
	}{
		{"passkey", func() error {
			return ps.CreatePasskey(ctx, &storage.Passkey{ID: []byte{1}, Subject: u.Subject, PublicKey: []byte("x"),
				AAGUID: make([]byte, 16), Name: "a", CreatedAt: time.Now()})
		}, func() error { return ps.DeletePasskey(ctx, u.Subject, []byte{1}) }, `name="factor" value="passkey"`},
		{"operator's requirement", func() error { return h.store.SetMFARequired(ctx, u.Subject, true, time.Now()) },
			func() error { return h.store.SetMFARequired(ctx, u.Subject, false, time.Now()) }, `name="step" value="factor-setup"`},
		{"authenticator app", func() error {
			if err := h.store.PutPendingTOTP(ctx, u.Subject, []byte("sealed"), time.Now()); err != nil {
				return err
			}
			return h.store.ConfirmTOTP(ctx, u.Subject, 1, nil, time.Now())
		}, func() error { _, err := h.store.DeleteFactors(ctx, u.Subject); return err }, `name="factor" value="otp"`},
	} {
		if err := tc.set(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		p = get(t, b, authURL())
		if p.loc != nil || !strings.Contains(p.body, tc.want) {
			t.Errorf("%s: want the second-factor step (%s), got %d %v: %s", tc.name, tc.want, p.status, p.loc, p.body)
		}
		if err := tc.unset(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		p = get(t, b, authURL())
		if !strings.Contains(p.body, `value="continue"`) {
			t.Errorf("%s removed: want the one-tap page, got %d: %s", tc.name, p.status, p.body)
		}
	}
}
