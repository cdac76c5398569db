package redistest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/authd/authd/exchangecache/redistest"
)

// TestStartCluster: the three nodes form one cluster that a cluster client
// writes and reads across every node's slots; a killed node stops
// answering while the others still serve their slots.
func TestStartCluster(t *testing.T) {
	start := time.Now()
	nodes := redistest.StartCluster(t)
	t.Logf("cluster up in %s", time.Since(start))
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1, DialTimeout: time.Second, ContextTimeoutEnabled: true})
	defer c.Close()
	ctx := t.Context()
	for i := range 30 {
		k := fmt.Sprintf("k%d", i)
		if err := c.Set(ctx, k, i, time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 30 {
		t.Fatalf("DBSIZE over the cluster: %d, %v", n, err)
	}
	nodes[0].Kill()
	nodes[0].Kill() // idempotent
	var ok, failed int
	for i := range 30 {
		gctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := c.Get(gctx, fmt.Sprintf("k%d", i)).Err()
		cancel()
		if err != nil {
			failed++
		} else {
			ok++
		}
	}
	if ok == 0 || failed == 0 {
		t.Fatalf("after killing one node: %d keys readable, %d not; want some of each", ok, failed)
	}
}

// TestStartReplicatedCluster: six nodes, each replica in sync with its
// master; a killed master's replica is promoted.
func TestStartReplicatedCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six redis-server processes and waits for a failover (-short)")
	}
	start := time.Now()
	masters, replicas := redistest.StartReplicatedCluster(t)
	t.Logf("cluster of 3 masters and 3 replicas up in %s", time.Since(start))
	c := redis.NewClient(&redis.Options{Addr: replicas[1].Addr})
	defer c.Close()
	if role, err := c.Do(t.Context(), "ROLE").Slice(); err != nil || role[0] != "slave" {
		t.Fatalf("replica 1 ROLE: %v, %v", role, err)
	}
	masters[1].Kill()
	killed := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	at, err := redistest.WaitPromoted(ctx, replicas[1].Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replica promoted %s after the kill (cluster-node-timeout %s)", at.Sub(killed).Round(time.Millisecond), redistest.ClusterNodeTimeout)
}
