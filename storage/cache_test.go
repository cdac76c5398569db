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
		storagetest.Run(t, func(t *testing.T) storagetest.Store { return cached(memory.New()) })
	})
	t.Run("postgres", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) storagetest.Store { return cached(postgres.New(pgtest.New(t))) })
	})
}

// cached is the decorator over backend, with the backend's own methods
// that the suite also checks.
func cached(backend storagetest.Store) storagetest.Store {
	return struct {
		*storage.CachingStore
		storagetest.BackendMethods
	}{storage.NewCachingStore(backend, time.Minute), backend}
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
