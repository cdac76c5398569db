package revocation_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/revocation"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
)

// failoverCache refuses one key until promoted is set: its master is
// down, then its replica (holding the entry) takes over.
type failoverCache struct {
	exchangecache.Cache
	down     string
	promoted *atomic.Bool
}

func (c failoverCache) Forget(ctx context.Context, key string) error {
	if key == c.down && !c.promoted.Load() {
		return errors.New("dial tcp: connection refused")
	}
	return c.Cache.Forget(ctx, key)
}

// TestRetrierDropsAfterPromotion: an entry a revocation could not reach
// is dropped by the Retrier once its node answers again, and the Retrier
// forgets keys whose window has ended.
func TestRetrierDropsAfterPromotion(t *testing.T) {
	ctx := t.Context()
	store := memory.New()
	if err := store.CreateClient(ctx, &storage.Client{ID: "app", TokenEndpointAuthMethod: "none"}); err != nil {
		t.Fatal(err)
	}
	mem := exchangecache.NewMemory()
	for _, k := range []string{"c:code", "r:first"} {
		if _, err := store.PutReplayRecord(ctx, &storage.ReplayRecord{Key: k, RequestID: "grant", ClientID: "app",
			Fingerprint: "fp", Sealed: []byte("sealed"), WindowEnd: time.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		res, _ := mem.Claim(ctx, k, "fp", time.Minute)
		if err := mem.Complete(ctx, k, res.Owner, []byte("sealed"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	var promoted atomic.Bool
	cache := failoverCache{Cache: mem, down: "r:first", promoted: &promoted}
	retry := revocation.NewRetrier(cache, time.Minute, time.Millisecond)
	s := revocation.Store{Store: store, Cache: cache, Retry: retry}
	if err := s.RevokeRefreshToken(ctx, "grant"); err != nil {
		t.Fatal(err)
	}
	if n := retry.Pending(); n != 1 {
		t.Fatalf("%d drops pending after the revocation, want 1", n)
	}
	retry.Retry(ctx) // the node is still down
	if res, _ := mem.Lookup(ctx, "r:first", "fp"); res.Outcome != exchangecache.Completed || retry.Pending() != 1 {
		t.Fatalf("before the promotion: %v, %d pending", res.Outcome, retry.Pending())
	}
	promoted.Store(true)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { retry.Run(runCtx); close(done) }()
	for i := 0; i < 2000 && retry.Pending() > 0; i++ {
		time.Sleep(time.Millisecond)
	}
	stop()
	<-done
	if res, _ := mem.Lookup(ctx, "r:first", "fp"); res.Outcome != exchangecache.Absent || retry.Pending() != 0 {
		t.Fatalf("after the promotion: %v, %d pending; want the revoked entry gone", res.Outcome, retry.Pending())
	}

	// A key whose window has ended is given up: its entry expired anyway.
	short := revocation.NewRetrier(failoverCache{Cache: mem, down: "k", promoted: new(atomic.Bool)}, -time.Second, 0)
	s = revocation.Store{Store: store, Cache: failoverCache{Cache: mem, down: "c:other", promoted: new(atomic.Bool)}, Retry: short}
	if _, err := store.PutReplayRecord(ctx, &storage.ReplayRecord{Key: "c:other", RequestID: "grant2", ClientID: "app",
		Fingerprint: "fp", Sealed: []byte("sealed"), WindowEnd: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeAccessToken(ctx, "grant2"); err != nil {
		t.Fatal(err)
	}
	if short.Pending() != 1 {
		t.Fatalf("%d pending, want 1", short.Pending())
	}
	short.Retry(ctx)
	if short.Pending() != 0 {
		t.Fatalf("%d pending after the window, want 0", short.Pending())
	}
}
