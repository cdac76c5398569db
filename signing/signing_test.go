package signing_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/authd/authd/signing"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

var secret = []byte(strings.Repeat("s", 32))

type clock struct{ t atomic.Pointer[time.Time] }

func newClock() *clock          { c := &clock{}; now := time.Now(); c.t.Store(&now); return c }
func (c *clock) now() time.Time { return *c.t.Load() }
func (c *clock) add(d time.Duration) {
	t := c.now().Add(d)
	c.t.Store(&t)
}

func cfg(c *clock) signing.Config {
	return signing.Config{Secret: secret, RotateEvery: 10 * time.Hour, Prepublish: time.Hour,
		TokenTTL: time.Hour, Grace: time.Minute, Reload: time.Nanosecond, Now: c.now}
}

func verify(t *testing.T, set jose.JSONWebKeySet, jws string) {
	t.Helper()
	sig, err := jose.ParseSigned(jws, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	kid := sig.Signatures[0].Header.KeyID
	keys := set.Key(kid)
	if len(keys) != 1 {
		t.Fatalf("kid %s not published (%d keys)", kid, len(set.Keys))
	}
	if _, err := sig.Verify(keys[0]); err != nil {
		t.Fatalf("verify: %v", err)
	}
}

// TestLifecycle: first generation at once; a rotation publishes the next
// generation before it signs; the old one stays published until its tokens
// expired, then it is deleted.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	store := memory.New()
	m, err := signing.New(store, cfg(c))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Prepare(ctx); err != nil { // creates generation 1
		t.Fatal(err)
	}
	rs, err := m.Sign(ctx, signing.RS256, []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	es, err := m.Sign(ctx, signing.ES256, []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := m.JWKS(ctx)
	if len(set.Keys) != 2 {
		t.Fatalf("JWKS has %d keys, want 2", len(set.Keys))
	}
	verify(t, set, rs)
	verify(t, set, es)

	// Not due: nothing added.
	if added, err := m.Rotate(ctx, false, nil); err != nil || added {
		t.Fatalf("Rotate before due = %v, %v", added, err)
	}
	c.add(10 * time.Hour)
	if added, err := m.Rotate(ctx, false, nil); err != nil || !added {
		t.Fatalf("Rotate when due = %v, %v", added, err)
	}
	set, _ = m.JWKS(ctx)
	if len(set.Keys) != 4 {
		t.Fatalf("after rotation JWKS has %d keys, want 4 (next generation prepublished)", len(set.Keys))
	}
	// Still signing with generation 1 during the prepublication.
	rs2, _ := m.Sign(ctx, signing.RS256, []byte(`{}`))
	if kidOf(t, rs2) != kidOf(t, rs) {
		t.Fatal("a prepublished key signed before its time")
	}
	c.add(time.Hour)
	rs3, _ := m.Sign(ctx, signing.RS256, []byte(`{}`))
	if kidOf(t, rs3) == kidOf(t, rs) {
		t.Fatal("the new generation does not sign after the prepublication")
	}
	// The old key verifies until its tokens expire (TokenTTL + Grace).
	c.add(time.Hour)
	set, _ = m.JWKS(ctx)
	verify(t, set, rs)
	c.add(2 * time.Minute)
	set, _ = m.JWKS(ctx)
	if len(set.Key(kidOf(t, rs))) != 0 {
		t.Fatal("retired key still published after every token it signed expired")
	}
	if _, err := m.Rotate(ctx, false, nil); err != nil {
		t.Fatal(err)
	}
	stored, _ := store.ListSigningKeys(ctx)
	if len(stored) != 2 || stored[0].Generation != 2 {
		t.Fatalf("after cleanup %d keys stored (first generation %d), want generation 2 only", len(stored), stored[0].Generation)
	}
	list, _ := m.List(ctx)
	for _, k := range list {
		if k.State != signing.StateCurrent {
			t.Fatalf("key %s state %s", k.ID, k.State)
		}
	}
}

func kidOf(t *testing.T, jws string) string {
	t.Helper()
	sig, err := jose.ParseSigned(jws, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	return sig.Signatures[0].Header.KeyID
}

// TestPrivateKeysSealed: the stored key does not open under another secret.
func TestPrivateKeysSealed(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	m, _ := signing.New(store, signing.Config{Secret: secret})
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	other, _ := signing.New(store, signing.Config{Secret: []byte(strings.Repeat("x", 32))})
	_ = other.Prepare(ctx)
	if _, err := other.Sign(ctx, signing.RS256, []byte(`{}`)); err == nil {
		t.Fatal("a key sealed under one secret signed under another")
	}
	keys, _ := store.ListSigningKeys(ctx)
	for _, k := range keys {
		if strings.Contains(string(k.Sealed), "PRIVATE") || len(k.Sealed) < 64 {
			t.Fatal("stored key looks unsealed")
		}
	}
}

// TestConcurrentRotationOneGeneration: replicas rotating at once on one
// PostgreSQL database add exactly one generation (a conditional write).
func TestConcurrentRotationOneGeneration(t *testing.T) {
	ctx := context.Background()
	store := postgres.New(pgtest.New(t))
	var (
		wg    sync.WaitGroup
		added atomic.Int32
	)
	for range 6 {
		m, err := signing.New(store, signing.Config{Secret: secret})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Not forced: each replica rotates because the key set is due
			// (here: empty), as the leased job does. A forced rotation is
			// an operator's "one more generation now", and two of them
			// racing may legitimately add two.
			ok, err := m.Rotate(ctx, false, nil)
			if err != nil {
				t.Error(err)
			}
			if ok {
				added.Add(1)
			}
		}()
	}
	wg.Wait()
	keys, err := store.ListSigningKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if added.Load() != 1 || len(keys) != 2 {
		t.Fatalf("%d replicas added a generation, %d keys stored; want 1 and 2", added.Load(), len(keys))
	}
	var _ storage.SigningKeyStore = store
}
