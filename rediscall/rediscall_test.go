package rediscall_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/authd/authd/exchangecache/redistest"
	"github.com/authd/authd/rediscall"
)

// TestDoBoundsThePipeliner: on the automatic pipeliner, which ignores the
// caller's context, Do still returns at the caller's deadline when Redis
// stalls (CLIENT PAUSE), and works when it answers.
func TestDoBoundsThePipeliner(t *testing.T) {
	t.Parallel()
	addr, _ := redistest.Start(t)
	// A read timeout far above the bound: only Do's wait can be the bound.
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	defer client.Close()
	ap, err := client.AsyncAutoPipelineWithOptions(&redis.AutoPipelineOptions{MaxConcurrentBatches: 4, Unordered: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	script := rediscall.NewScript(`return redis.call('INCR', KEYS[1])`)
	for _, c := range []redis.Cmdable{client, ap} {
		n, err := script.Run(ctx, c, []string{"rediscall:n"}).Int()
		if err != nil || n < 1 {
			t.Fatalf("script on %T: %d, %v", c, n, err)
		}
		get := redis.NewStringCmd(ctx, "get", "rediscall:n")
		if err := rediscall.Do(ctx, c, get); err != nil || get.Val() == "" {
			t.Fatalf("GET on %T: %q, %v", c, get.Val(), err)
		}
	}
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := script.Run(ctx, ap, []string{"rediscall:n"}).Int(); err != nil {
		t.Fatalf("script after SCRIPT FLUSH (EVAL in place of EVALSHA): %v", err)
	}

	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", 2000, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	for _, run := range []func(ctx context.Context) error{
		func(ctx context.Context) error {
			return rediscall.Do(ctx, ap, redis.NewStringCmd(ctx, "get", "rediscall:n"))
		},
		func(ctx context.Context) error { return script.Run(ctx, ap, []string{"rediscall:n"}).Err() },
	} {
		bctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		start := time.Now()
		err := run(bctx)
		d := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || d > 600*time.Millisecond {
			t.Fatalf("against a paused Redis: %v after %v, want the deadline after about 100ms", err, d)
		}
	}
}
