package dpop_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/authd/authd/dpop"
	"github.com/authd/authd/exchangecache/redistest"
)

func testStore(t *testing.T, s dpop.ReplayStore) {
	ctx := context.Background()
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	if fresh, err := s.Use(ctx, id, time.Minute); err != nil || !fresh {
		t.Fatalf("first use: %v %v", fresh, err)
	}
	if fresh, err := s.Use(ctx, id, time.Minute); err != nil || fresh {
		t.Fatalf("second use: %v %v", fresh, err)
	}
	if fresh, err := s.Use(ctx, id+"x", time.Minute); err != nil || !fresh {
		t.Fatalf("another id: %v %v", fresh, err)
	}
}

func TestMemoryStore(t *testing.T) { testStore(t, dpop.NewMemory()) }

func TestRedisStore(t *testing.T) {
	addr := redistest.Addr(t)
	testStore(t, dpop.NewRedis(redistest.NewClient(t, addr), 0))
}
