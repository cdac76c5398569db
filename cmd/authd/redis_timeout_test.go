package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/exchangecache/redistest"
)

// TestServeRedisCallsBounded: authd serve's replay cache, on the automatic
// pipeliner that ignores per-command contexts, still gives up on a Redis
// that does not answer within about exchangecache.DefaultRedisTimeout
// (150 ms), so a stalled Redis cannot stall a token exchange: it fails
// open to PostgreSQL. The same holds for the DPoP jti store on the same
// pipeliner.
func TestServeRedisCallsBounded(t *testing.T) {
	t.Parallel()
	addr, _ := redistest.Start(t)
	cache, jtis, closeRedis, err := openRedisStores("redis://"+addr+"/0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer closeRedis()
	ctx := t.Context()
	if _, err := cache.Claim(ctx, "warm", "fp", time.Minute); err != nil {
		t.Fatalf("Claim on a healthy Redis: %v", err)
	}
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", 3000, "ALL").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
	start := time.Now()
	_, err = cache.Claim(ctx, "k", "fp", time.Minute)
	d := time.Since(start)
	if err == nil {
		t.Fatal("Claim against a paused Redis succeeded")
	}
	if d > 4*exchangecache.DefaultRedisTimeout {
		t.Fatalf("Claim against a paused Redis took %v, want about %v", d, exchangecache.DefaultRedisTimeout)
	}
	// The DPoP jti store shares the pipeliner (and fails open, package dpop).
	start = time.Now()
	_, err = jtis.Use(ctx, "jti", time.Minute)
	if d := time.Since(start); err == nil || d > 4*exchangecache.DefaultRedisTimeout {
		t.Fatalf("jti Use against a paused Redis: %v after %v", err, d)
	}
}
