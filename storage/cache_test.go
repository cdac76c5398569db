package storage_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
	"github.com/authd/authd/storage/storagetest"
)

// The decorator keeps the whole storage contract, on both backends.
func TestCachingStoreConformance(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) storage.Store { return storage.NewCachingStore(memory.New(), time.Minute) })
	})
	t.Run("postgres", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) storage.Store {
			return storage.NewCachingStore(postgres.New(pgtest.New(t)), time.Minute)
		})
	})
}

// counting counts backend reads.
type counting struct {
	storage.Store
	clients, codes atomic.Int64
}

func (c *counting) GetClient(ctx context.Context, id string) (fosite.Client, error) {
	c.clients.Add(1)
	return c.Store.GetClient(ctx, id)
}

func (c *counting) GetAuthorizeCodeSession(ctx context.Context, sig string, s fosite.Session) (fosite.Requester, error) {
	c.codes.Add(1)
	return c.Store.GetAuthorizeCodeSession(ctx, sig, s)
}

func TestCachingStoreClients(t *testing.T) {
	ctx := t.Context()
	backend := &counting{Store: memory.New()}
	s := storage.NewCachingStore(backend, time.Minute)
	if err := s.CreateClient(ctx, &storage.Client{ID: "app", Scopes: []string{"openid"}, TokenEndpointAuthMethod: "none"}); err != nil {
		t.Fatal(err)
	}
	get := func() *storage.Client {
		t.Helper()
		c, err := s.GetClient(ctx, "app")
		if err != nil {
			t.Fatal(err)
		}
		return c.(*storage.Client)
	}
	// Just written through the cache: read from the backend for one TTL.
	get()
	if backend.clients.Load() != 1 {
		t.Fatalf("backend reads = %d", backend.clients.Load())
	}

	// Once cached, reads stay in process; each caller gets its own copy.
	s2 := storage.NewCachingStore(backend, time.Minute)
	c1, _ := s2.GetClient(ctx, "app")
	c2, _ := s2.GetClient(ctx, "app")
	if n := backend.clients.Load(); n != 2 {
		t.Fatalf("backend reads = %d, want 2 (second read cached)", n)
	}
	c1.(*storage.Client).Scopes[0] = "changed"
	if c2.GetScopes()[0] != "openid" {
		t.Fatal("callers share the cached client")
	}
	if c3, _ := s2.GetClient(ctx, "app"); c3.GetScopes()[0] != "openid" {
		t.Fatal("a caller's change reached the cache")
	}

	// An update through the store is seen at once.
	upd := c2.(*storage.Client)
	upd.Scopes = []string{"openid", "offline_access"}
	if err := s2.UpdateClient(ctx, upd); err != nil {
		t.Fatal(err)
	}
	if c, _ := s2.GetClient(ctx, "app"); len(c.GetScopes()) != 2 {
		t.Fatalf("stale client after update: %v", c.GetScopes())
	}

	// Inside a transaction the backend is read.
	tx, err := s2.BeginTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := backend.clients.Load()
	if _, err := s2.GetClient(tx, "app"); err != nil {
		t.Fatal(err)
	}
	if backend.clients.Load() != before+1 {
		t.Error("GetClient in a transaction was answered from the cache")
	}
	_ = s2.Rollback(tx)

	// A delete is seen at once; absence is never cached.
	if err := s2.DeleteClient(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.GetClient(ctx, "app"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := s2.CreateClient(ctx, &storage.Client{ID: "app", TokenEndpointAuthMethod: "none"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.GetClient(ctx, "app"); err != nil {
		t.Fatalf("after re-create: %v", err)
	}
}

func TestCachingStoreExpiry(t *testing.T) {
	ctx := t.Context()
	backend := &counting{Store: memory.New()}
	if err := backend.CreateClient(ctx, &storage.Client{ID: "app", TokenEndpointAuthMethod: "none"}); err != nil {
		t.Fatal(err)
	}
	s := storage.NewCachingStore(backend, 20*time.Millisecond)
	s.GetClient(ctx, "app")
	s.GetClient(ctx, "app")
	time.Sleep(30 * time.Millisecond)
	s.GetClient(ctx, "app")
	if n := backend.clients.Load(); n != 2 {
		t.Errorf("backend reads = %d, want 2 (one cached, one after expiry)", n)
	}
}

// Within one request memo, the second read of a code comes from the first;
// the conditional invalidation still goes to the backend and decides.
func TestCachingStoreRequestMemo(t *testing.T) {
	ctx := t.Context()
	backend := &counting{Store: memory.New()}
	s := storage.NewCachingStore(backend, time.Minute)
	if err := s.CreateClient(ctx, &storage.Client{ID: "app", TokenEndpointAuthMethod: "none"}); err != nil {
		t.Fatal(err)
	}
	sess := &fosite.DefaultSession{Subject: "alice"}
	sess.SetExpiresAt(fosite.AuthorizeCode, time.Now().Add(time.Minute))
	req := fosite.NewRequest()
	req.ID = "req-1"
	req.Client = &storage.Client{ID: "app"}
	req.GrantedScope = fosite.Arguments{"openid"}
	req.Session = sess
	if err := s.CreateAuthorizeCodeSession(ctx, "sig", req); err != nil {
		t.Fatal(err)
	}

	// Without a memo, every read goes to the backend.
	s.GetAuthorizeCodeSession(ctx, "sig", &fosite.DefaultSession{})
	s.GetAuthorizeCodeSession(ctx, "sig", &fosite.DefaultSession{})
	if backend.codes.Load() != 2 {
		t.Fatalf("reads = %d", backend.codes.Load())
	}

	mctx := storage.WithRequestMemo(ctx)
	first, err := s.GetAuthorizeCodeSession(mctx, "sig", &fosite.DefaultSession{})
	if err != nil {
		t.Fatal(err)
	}
	// fosite changes the session between the reads; the second read
	// decodes the stored session again into what it is given.
	first.GetSession().SetExpiresAt(fosite.AccessToken, time.Now().Add(time.Hour))
	first.GetSession().(*fosite.DefaultSession).Subject = "mallory"
	second, err := s.GetAuthorizeCodeSession(mctx, "sig", first.GetSession())
	if err != nil {
		t.Fatal(err)
	}
	if backend.codes.Load() != 3 {
		t.Errorf("reads = %d, want 3: the repeated read came from the memo", backend.codes.Load())
	}
	if second.GetID() != "req-1" || second.GetClient().GetID() != "app" || second.GetGrantedScopes()[0] != "openid" {
		t.Errorf("memo answer %+v", second)
	}
	if got := second.GetSession().GetSubject(); got != "alice" {
		t.Errorf("subject = %q, want the stored alice", got)
	}
	if second.GetSession().GetExpiresAt(fosite.AccessToken).IsZero() {
		t.Error("the memo dropped a session field fosite set between the reads")
	}

	// Redemption goes to the backend: of two, one wins.
	if err := s.InvalidateAuthorizeCodeSession(mctx, "sig"); err != nil {
		t.Fatal(err)
	}
	if err := s.InvalidateAuthorizeCodeSession(storage.WithRequestMemo(ctx), "sig"); !errors.Is(err, storage.ErrInvalidatedAuthorizeCode) {
		t.Fatalf("second redemption: %v", err)
	}
	// After redemption the memo no longer answers: the backend reports
	// the code as used.
	if _, err := s.GetAuthorizeCodeSession(mctx, "sig", &fosite.DefaultSession{}); !errors.Is(err, storage.ErrInvalidatedAuthorizeCode) {
		t.Errorf("read after redemption: %v", err)
	}
}

// countingPKCE counts PKCE deletes that reach the backend.
type countingPKCE struct {
	storage.Store
	deletes atomic.Int64
}

func (c *countingPKCE) DeletePKCERequestSession(ctx context.Context, sig string) error {
	c.deletes.Add(1)
	return c.Store.DeletePKCERequestSession(ctx, sig)
}

// Within a request memo, redeeming the code in a transaction deletes its
// PKCE session in that transaction; a rollback brings both back.
func TestCachingStorePKCEInRedemption(t *testing.T) {
	backends := map[string]func(t *testing.T) storage.Store{
		"memory":   func(*testing.T) storage.Store { return memory.New() },
		"postgres": func(t *testing.T) storage.Store { return postgres.New(pgtest.New(t)) },
	}
	for name, newBackend := range backends {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			backend := &countingPKCE{Store: newBackend(t)}
			s := storage.NewCachingStore(backend, time.Minute)
			if err := s.CreateClient(ctx, &storage.Client{ID: "app", TokenEndpointAuthMethod: "none"}); err != nil {
				t.Fatal(err)
			}
			for _, sig := range []string{"kept", "redeemed"} {
				req := fosite.NewRequest()
				req.ID = "req-" + sig
				req.Client = &storage.Client{ID: "app"}
				req.Session = &fosite.DefaultSession{Subject: "alice"}
				req.Form.Set("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
				if err := s.CreateAuthorizeCodeSession(ctx, sig, req); err != nil {
					t.Fatal(err)
				}
				if err := s.CreatePKCERequestSession(ctx, sig, req); err != nil {
					t.Fatal(err)
				}
			}

			// Rolled back: code and PKCE session are both still there.
			mctx := storage.WithRequestMemo(ctx)
			tx, err := s.BeginTX(mctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.InvalidateAuthorizeCodeSession(tx, "kept"); err != nil {
				t.Fatal(err)
			}
			if err := s.Rollback(tx); err != nil {
				t.Fatal(err)
			}
			if name == "postgres" { // the memory store's rollback is not transactional for every table
				if _, err := s.GetAuthorizeCodeSession(ctx, "kept", &fosite.DefaultSession{}); err != nil {
					t.Errorf("code after rollback: %v", err)
				}
				if _, err := s.GetPKCERequestSession(ctx, "kept", &fosite.DefaultSession{}); err != nil {
					t.Errorf("PKCE session after rollback: %v", err)
				}
			}

			// Committed: the PKCE session went with the code, and the PKCE
			// handler's delete afterwards costs no round trip.
			mctx = storage.WithRequestMemo(ctx)
			tx, err = s.BeginTX(mctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.InvalidateAuthorizeCodeSession(tx, "redeemed"); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(tx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.GetPKCERequestSession(ctx, "redeemed", &fosite.DefaultSession{}); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("PKCE session after redemption: %v", err)
			}
			before := backend.deletes.Load()
			if err := s.DeletePKCERequestSession(mctx, "redeemed"); err != nil {
				t.Errorf("PKCE handler's delete: %v", err)
			}
			if backend.deletes.Load() != before {
				t.Error("the PKCE handler's delete went to the backend again")
			}
			// Outside a memo the contract is unchanged: nothing left to delete.
			if err := s.DeletePKCERequestSession(ctx, "redeemed"); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("second delete: %v", err)
			}
		})
	}
}
