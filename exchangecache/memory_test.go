package exchangecache_test

import (
	"sync"
	"testing"
	"time"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/exchangecache/exchangecachetest"
)

func TestMemory(t *testing.T) {
	exchangecachetest.Run(t, func(*testing.T) exchangecache.Cache {
		return exchangecache.NewMemory()
	})
}

// fakeClock is a manually advanced clock, safe for concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestMemoryExpiryUsesClock(t *testing.T) {
	ctx := t.Context()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := exchangecache.NewMemory()
	exchangecache.SetMemoryClock(m, clock.Now)

	res, err := m.Claim(ctx, "k", "fp", 10*time.Second)
	if err != nil || res.Outcome != exchangecache.Claimed {
		t.Fatalf("Claim = %v, %v", res.Outcome, err)
	}
	clock.Advance(10*time.Second - time.Nanosecond)
	if res, _ := m.Lookup(ctx, "k", "fp"); res.Outcome != exchangecache.InFlight {
		t.Fatalf("just before expiry: %v, want in_flight", res.Outcome)
	}
	clock.Advance(time.Nanosecond)
	if res, _ := m.Lookup(ctx, "k", "fp"); res.Outcome != exchangecache.Absent {
		t.Fatalf("at expiry: %v, want absent", res.Outcome)
	}
}

func TestMemorySweepDropsExpiredEntries(t *testing.T) {
	ctx := t.Context()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := exchangecache.NewMemory()
	exchangecache.SetMemoryClock(m, clock.Now)

	for _, k := range []string{"a", "b", "c"} {
		if _, err := m.Claim(ctx, k, "fp", time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Claim(ctx, "keep", "fp", time.Hour); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	// Claiming an unrelated key sweeps the expired ones it never touched.
	if _, err := m.Claim(ctx, "new", "fp", time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := exchangecache.MemoryLen(m); n != 2 {
		t.Fatalf("after sweep: %d entries, want 2 (keep, new)", n)
	}
}
