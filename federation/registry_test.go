package federation_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/authd/authd/federation"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// A provider added, changed or deleted through one replica is in effect on
// another within 10 s (federation.PollInterval, 5 s, plus a query).
func TestRegistryFollowsChanges(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	c := &clock{t: time.Now()}
	secret := []byte("registry-test-secret-0123456789-0123456789")
	replica := federation.NewRegistry(federation.RegistryConfig{Secret: secret, Store: store, Now: c.now})
	if ps, err := replica.List(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("empty: %v %v", ps, err)
	}
	p := &storage.Provider{ID: "corp", Kind: "oidc", Issuer: "https://corp.example", ClientID: "a", DisplayName: "Corp"}
	if err := store.CreateProvider(ctx, p); err != nil {
		t.Fatal(err)
	}
	c.add(federation.PollInterval - time.Second)
	if _, err := replica.Get(ctx, "corp"); !errors.Is(err, federation.ErrNoProvider) {
		t.Fatalf("within the poll interval the old set answers: %v", err)
	}
	c.add(2 * time.Second)
	got, err := replica.Get(ctx, "corp")
	if err != nil || got.DisplayName != "Corp" {
		t.Fatalf("after the poll interval: %v %v", got, err)
	}
	p.DisplayName = "Corp SSO"
	if err := store.UpdateProvider(ctx, p); err != nil {
		t.Fatal(err)
	}
	c.add(federation.PollInterval + time.Second)
	if got, _ := replica.Get(ctx, "corp"); got == nil || got.DisplayName != "Corp SSO" {
		t.Fatalf("update not followed: %v", got)
	}
	if err := store.DeleteProvider(ctx, "corp"); err != nil {
		t.Fatal(err)
	}
	c.add(federation.PollInterval + time.Second)
	if _, err := replica.Get(ctx, "corp"); !errors.Is(err, federation.ErrNoProvider) {
		t.Fatalf("delete not followed: %v", err)
	}
}
