package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
	"github.com/authd/authd/storage/storagetest"
)

func TestStore(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storagetest.Store { return postgres.New(pgtest.New(t)) })
}

func TestMigrate(t *testing.T) {
	ctx := t.Context()
	pool := pgtest.NewEmpty(t)

	current, latest, err := postgres.SchemaStatus(ctx, pool)
	if err != nil {
		t.Fatalf("SchemaStatus on empty schema: %v", err)
	}
	if current != 0 || latest < 1 {
		t.Fatalf("SchemaStatus on empty schema = %d, %d; want 0, >= 1", current, latest)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	// Idempotent: a second run (another replica) is a no-op.
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	current, latest2, err := postgres.SchemaStatus(ctx, pool)
	if err != nil {
		t.Fatalf("SchemaStatus: %v", err)
	}
	if current != latest || latest2 != latest {
		t.Fatalf("SchemaStatus after Migrate = %d, %d; want %d, %d", current, latest2, latest, latest)
	}
	if err := postgres.New(pool).Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func TestDSNSharesSchema(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := newPool(t, dsn), newPool(t, dsn)
	ctx := t.Context()
	if err := postgres.New(a).CreateClient(ctx, &storage.Client{ID: "shared", TokenEndpointAuthMethod: "none"}); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.New(b).GetClient(ctx, "shared"); err != nil {
		t.Fatalf("second pool does not see the schema: %v", err)
	}
}

func TestErrorTranslation(t *testing.T) {
	s := postgres.New(pgtest.New(t))
	ctx := t.Context()
	err := s.CreateUser(ctx, &storage.User{Username: "u", PasswordHash: []byte("h")})
	if err != nil {
		t.Fatal(err)
	}
	err = s.CreateUser(ctx, &storage.User{Username: "u", PasswordHash: []byte("h")})
	var pgErr *pgconn.PgError
	if !errors.Is(err, storage.ErrAlreadyExists) || !errors.As(err, &pgErr) {
		t.Errorf("duplicate user: err = %v, want ErrAlreadyExists wrapping the *pgconn.PgError", err)
	}
	if err := s.Commit(ctx); err == nil {
		t.Error("Commit without a transaction succeeded")
	}
}

// BenchmarkExchangeStorage measures the storage calls of one authorization
// code exchange, as fosite makes them: get code, get PKCE session, begin,
// invalidate code, create access token, create refresh token, commit. It also
// deletes the PKCE session, as fosite's PKCE handler does during the exchange.
func BenchmarkExchangeStorage(b *testing.B) {
	s := postgres.New(pgtest.New(b))
	ctx := b.Context()
	if err := s.CreateClient(ctx, &storage.Client{ID: "app", GrantTypes: []string{"authorization_code", "refresh_token"}, TokenEndpointAuthMethod: "none"}); err != nil {
		b.Fatal(err)
	}
	newReq := func(i int) *fosite.Request {
		sess := &fosite.DefaultSession{Subject: "alice", Username: "alice"}
		sess.SetExpiresAt(fosite.AuthorizeCode, time.Now().Add(time.Minute))
		sess.SetExpiresAt(fosite.AccessToken, time.Now().Add(time.Hour))
		sess.SetExpiresAt(fosite.RefreshToken, time.Now().Add(24*time.Hour))
		r := fosite.NewRequest()
		r.ID = fmt.Sprint("req-", i)
		r.Client = &storage.Client{ID: "app"}
		r.RequestedScope = fosite.Arguments{"openid", "offline_access"}
		r.GrantedScope = fosite.Arguments{"openid", "offline_access"}
		r.Form.Set("redirect_uri", "https://app.example/cb")
		r.Form.Set("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
		r.Form.Set("code_challenge_method", "S256")
		r.Session = sess
		return r
	}
	for i := range b.N {
		r := newReq(i)
		if err := s.CreateAuthorizeCodeSession(ctx, fmt.Sprint("code-", i), r); err != nil {
			b.Fatal(err)
		}
		if err := s.CreatePKCERequestSession(ctx, fmt.Sprint("code-", i), r); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		sig := fmt.Sprint("code-", i)
		code, err := s.GetAuthorizeCodeSession(ctx, sig, &fosite.DefaultSession{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.GetPKCERequestSession(ctx, sig, &fosite.DefaultSession{}); err != nil {
			b.Fatal(err)
		}
		if err := s.DeletePKCERequestSession(ctx, sig); err != nil {
			b.Fatal(err)
		}
		tx, err := s.BeginTX(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.InvalidateAuthorizeCodeSession(tx, sig); err != nil {
			b.Fatal(err)
		}
		if err := s.CreateAccessTokenSession(tx, fmt.Sprint("at-", i), code); err != nil {
			b.Fatal(err)
		}
		if err := s.CreateRefreshTokenSession(tx, fmt.Sprint("rt-", i), fmt.Sprint("at-", i), code); err != nil {
			b.Fatal(err)
		}
		if err := s.Commit(tx); err != nil {
			b.Fatal(err)
		}
	}
}

func newPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestPasskeyStore(t *testing.T) {
	storagetest.RunPasskeys(t, func(t *testing.T) storagetest.PasskeyStore { return postgres.New(pgtest.New(t)) })
}
