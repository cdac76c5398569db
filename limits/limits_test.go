package limits

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/authd/authd/exchangecache/redistest"
)

func prefix() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "test-limits-" + hex.EncodeToString(b) + ":"
}

// limiters returns the rule under test twice: shared (a real Redis) and
// per process, so every rule is checked on both stores.
func limiters(t *testing.T) map[string]func() *Limiter {
	addr := redistest.Addr(t)
	p := prefix()
	rdb := redistest.NewClient(t, addr)
	return map[string]func() *Limiter{
		"redis": func() *Limiter { return New(Options{Redis: rdb, Prefix: p}) },
		"local": func() *Limiter { return New(Options{}) },
	}
}

func TestTakeBurstThenRefuse(t *testing.T) {
	ctx := context.Background()
	for name, mk := range limiters(t) {
		t.Run(name, func(t *testing.T) {
			l := mk()
			r := Rate{PerSecond: 0.1, Burst: 3}
			for i := range 3 {
				if ok, _ := l.Take(ctx, "tok", "client-"+name, r); !ok {
					t.Fatalf("take %d refused within the burst", i+1)
				}
			}
			ok, wait := l.Take(ctx, "tok", "client-"+name, r)
			if ok || wait <= 0 || wait > 10*time.Second+time.Millisecond*5 {
				t.Fatalf("fourth take: ok=%v wait=%v; want refused with a wait up to 10s", ok, wait)
			}
			if w := l.Wait(ctx, "tok", "client-"+name, r); w <= 0 {
				t.Fatalf("Wait after the burst = %v, want > 0", w)
			}
			// A unit given back can be taken again, once.
			l.Refund(ctx, "tok", "client-"+name, r)
			if ok, _ := l.Take(ctx, "tok", "client-"+name, r); !ok {
				t.Fatal("take after a refund refused")
			}
			if ok, _ := l.Take(ctx, "tok", "client-"+name, r); ok {
				t.Fatal("a refund gave back more than one unit")
			}
			// Another key and another budget are untouched.
			if ok, _ := l.Take(ctx, "tok", "other-"+name, r); !ok {
				t.Fatal("another key refused")
			}
			if ok, _ := l.Take(ctx, "other", "client-"+name, r); !ok {
				t.Fatal("another budget refused")
			}
		})
	}
}

func TestChargeCountsBeyondBudget(t *testing.T) {
	ctx := context.Background()
	for name, mk := range limiters(t) {
		t.Run(name, func(t *testing.T) {
			l := mk()
			r := Rate{PerSecond: 0.01, Burst: 2}
			var within int
			for range 5 {
				if ok, _ := l.Charge(ctx, "fail", "ip-"+name, r); ok {
					within++
				}
			}
			if within != 2 {
				t.Fatalf("%d of 5 charges within a burst of 2", within)
			}
			// Charged beyond the budget: the wait grows with each charge.
			if w := l.Wait(ctx, "fail", "ip-"+name, r); w < 200*time.Second {
				t.Fatalf("wait after 5 charges at 0.01/s burst 2 = %v, want ≥ 200s", w)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	ctx := context.Background()
	b := Backoff{Free: 2, First: time.Second, Max: 4 * time.Second}
	for name, mk := range limiters(t) {
		t.Run(name, func(t *testing.T) {
			l := mk()
			key := "alice-" + name
			want := []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}
			for i, w := range want {
				got := l.Fail(ctx, "user", key, b)
				if got != w {
					t.Fatalf("failure %d: wait %v, want %v", i+1, got, w)
				}
			}
			if d := l.Blocked(ctx, "user", key); d <= 3*time.Second || d > 4*time.Second {
				t.Fatalf("Blocked = %v, want about 4s", d)
			}
			l.Reset(ctx, "user", key)
			if d := l.Blocked(ctx, "user", key); d != 0 {
				t.Fatalf("Blocked after Reset = %v", d)
			}
			if got := l.Fail(ctx, "user", key, b); got != 0 {
				t.Fatalf("first failure after Reset: wait %v", got)
			}
		})
	}
}

// TestSharedAcrossReplicas: three limiters on one Redis (three replicas)
// spend one budget, also when they race.
func TestSharedAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Addr(t)
	p := prefix()
	var ls []*Limiter
	for range 3 {
		ls = append(ls, New(Options{Redis: redistest.NewClient(t, addr), Prefix: p}))
	}
	r := Rate{PerSecond: 0.001, Burst: 10}
	var ok atomic.Int32
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if yes, _ := ls[i%3].Take(ctx, "tok", "shared-client", r); yes {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 10 {
		t.Fatalf("%d of 60 racing takes across 3 replicas succeeded, want the burst of 10", ok.Load())
	}
	b := Backoff{Free: 5, First: time.Second, Max: time.Minute}
	for i := range 4 {
		if d := ls[i%3].Fail(ctx, "user", "bob", b); d != 0 {
			t.Fatalf("failure %d across replicas already waits %v", i+1, d)
		}
	}
	if d := ls[2].Fail(ctx, "user", "bob", b); d != time.Second {
		t.Fatalf("fifth failure across replicas: wait %v, want 1s (the budget is shared)", d)
	}
	if d := ls[0].Blocked(ctx, "user", "bob"); d <= 0 {
		t.Fatal("another replica does not see the back-off")
	}
}

// TestFallbackAndResume: with Redis gone each process keeps its own budget,
// warns once per interval and counts it; when Redis is back the shared
// budget is used again.
func TestFallbackAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a redis-server")
	}
	ctx := context.Background()
	addr, stop := redistest.Start(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	reg := prometheus.NewRegistry()
	l := New(Options{Redis: redistest.NewClient(t, addr), Prefix: prefix(), WarnEvery: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil)), Registerer: reg})
	r := Rate{PerSecond: 0.001, Burst: 2}
	if ok, _ := l.Take(ctx, "tok", "c", r); !ok {
		t.Fatal("first take refused")
	}
	stop()
	start := time.Now()
	for i := range 3 {
		ok, _ := l.Take(ctx, "tok", "c", r)
		if want := i < 2; ok != want {
			t.Fatalf("take %d with Redis down: %v, want %v (the local budget is a fresh one)", i+1, ok, want)
		}
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("three checks with Redis down took %v; each is bounded by the call timeout", el)
	}
	if n := testutil.ToFloat64(l.fallback); n < 3 {
		t.Fatalf("authd_limits_fallback_total = %v, want ≥ 3", n)
	}
	mu.Lock()
	warnings := strings.Count(logs.String(), "budgets are per process")
	mu.Unlock()
	if warnings != 1 {
		t.Fatalf("%d fallback warnings within the interval, want 1:\n%s", warnings, logs.String())
	}
	redistest.Restart(t, addr)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// A fresh shared budget: the take is decided in Redis again.
		before := testutil.ToFloat64(l.checks.WithLabelValues("shared"))
		l.Take(ctx, "tok", "resumed", r)
		if testutil.ToFloat64(l.checks.WithLabelValues("shared")) > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("shared budgets did not resume within 10s of Redis returning")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
