package ops_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/authd/authd/exchangecache/redistest"
	"github.com/authd/authd/ops"
)

// TestRedisHealthCluster: on a Redis Cluster, RedisHealth fails while a
// master is dead although PING through the cluster client (a random
// node) may answer: first because the calls themselves fail, then, after
// the window, by naming the master that does not answer PING.
func TestRedisHealthCluster(t *testing.T) {
	t.Parallel()
	nodes := redistest.StartCluster(t)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ContextTimeoutEnabled: true})
	defer client.Close()
	const window = 300 * time.Millisecond
	h := ops.NewRedisHealth(client, window)
	client.AddHook(h)
	ctx := t.Context()
	if err := h.Ping(ctx); err != nil {
		t.Fatalf("healthy cluster: %v", err)
	}
	if err := client.Get(ctx, "absent").Err(); err != redis.Nil {
		t.Fatalf("GET absent: %v", err)
	}
	if err := h.Ping(ctx); err != nil || h.Failures() != 0 {
		t.Fatalf("a missing key is no failure: %v, %d failures", err, h.Failures())
	}
	nodes[1].Kill()
	// Some key lives on the dead master.
	for i := 0; h.Failures() == 0 && i < 100; i++ {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_ = client.Get(cctx, fmt.Sprintf("k%d", i)).Err()
		cancel()
	}
	if h.Failures() == 0 {
		t.Fatal("no call failed with a master dead")
	}
	if err := h.Ping(ctx); err == nil || !strings.Contains(err.Error(), "failing") {
		t.Fatalf("right after a failed call: %v, want the calls' failure", err)
	}
	time.Sleep(window + 50*time.Millisecond)
	err := h.Ping(ctx)
	if err == nil || !strings.Contains(err.Error(), "master "+nodes[1].Addr) {
		t.Fatalf("after the window: %v, want the dead master %s named", err, nodes[1].Addr)
	}
	t.Logf("readiness says: %v", err)
}

// TestRedisHealthPipeline: in a pipeline, and on the pipeliner's deferred
// face, a missing key or a script's answer is no failure, while a command
// Redis could not serve counts even behind a missing key.
func TestRedisHealthPipeline(t *testing.T) {
	t.Parallel()
	addr, _ := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer client.Close()
	h := ops.NewRedisHealth(client, time.Minute)
	client.AddHook(h)
	ap, err := client.AsyncAutoPipelineWithOptions(&redis.AutoPipelineOptions{MaxConcurrentBatches: 4, Unordered: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	busy := `return redis.error_reply('BUSY a script is running')`
	answer := `return redis.error_reply('ERR wrong kind of value')`
	_, _ = client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "ops:absent")
		p.Eval(ctx, answer, nil)
		p.Set(ctx, "ops:k", "v", time.Minute)
		return nil
	})
	for range 20 {
		f := ap.Submit(ctx, redis.NewStringCmd(ctx, "get", "ops:absent"))
		if err := f.WaitContext(ctx); err != redis.Nil {
			t.Fatalf("GET absent on the pipeliner: %v", err)
		}
	}
	if n := h.Failures(); n != 0 {
		t.Fatalf("%d failures counted for answers Redis gave on purpose", n)
	}
	_, _ = client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "ops:absent")
		p.Eval(ctx, busy, nil)
		return nil
	})
	if n := h.Failures(); n != 1 {
		t.Fatalf("a BUSY reply behind a missing key: %d failures, want 1", n)
	}
	if err := h.Ping(ctx); err == nil || !strings.Contains(err.Error(), "BUSY") {
		t.Fatalf("readiness after a BUSY reply: %v", err)
	}
	f := ap.Submit(ctx, redis.NewCmd(ctx, "eval", busy, 0))
	if err := f.WaitContext(ctx); err == nil {
		t.Fatal("BUSY script on the pipeliner answered no error")
	}
	if n := h.Failures(); n != 2 {
		t.Fatalf("a BUSY reply on the pipeliner: %d failures, want 2", n)
	}
}
