package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterNode is one node of a Redis Cluster started by [StartCluster] or
// [StartReplicatedCluster].
type ClusterNode struct {
	// Addr is the node's client address, 127.0.0.1:port.
	Addr string
	// Kill stops the node with SIGKILL, like a crash, and waits for it to
	// exit. It is idempotent and also runs in t.Cleanup.
	Kill func()
}

// ClusterNodeTimeout is the cluster-node-timeout of the nodes StartCluster
// launches: after a node has been unreachable this long, the others mark it
// failed and (with every slot required, Redis's default) the cluster
// refuses commands until it returns.
const ClusterNodeTimeout = 3 * time.Second

// StartCluster launches a private three-master Redis Cluster on loopback
// ports (redis-server --cluster-enabled yes, without persistence or
// replicas), creates it with redis-cli --cluster create, and waits until
// every node reports cluster_state:ok and knows all three. It returns the
// nodes in the order of their slot ranges; each can be killed mid-test.
// If redis-server or redis-cli is not on PATH, StartCluster skips the test
// (or fails it when backends are required, as in CI).
func StartCluster(t testing.TB) []ClusterNode {
	t.Helper()
	masters, _ := startCluster(t, false)
	return masters
}

// StartReplicatedCluster is StartCluster with a replica for each master:
// six nodes, replicas[i] replicating masters[i] (CLUSTER REPLICATE) and in
// sync with it when StartReplicatedCluster returns. Kill a master and,
// after ClusterNodeTimeout and an election, its replica is promoted
// (WaitPromoted).
func StartReplicatedCluster(t testing.TB) (masters, replicas []ClusterNode) {
	t.Helper()
	return startCluster(t, true)
}

func startCluster(t testing.TB, withReplicas bool) (masters, replicas []ClusterNode) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		skipOrFail(t, "redis-server is not on PATH; install it to run tests that start a Redis Cluster")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		skipOrFail(t, "redis-cli is not on PATH; install it (it comes with redis-server) to run tests that start a Redis Cluster")
	}
	dir := t.TempDir()
	n := 3
	if withReplicas {
		n = 6
	}
	nodes := make([]ClusterNode, 0, n)
	for i := range n {
		var lastErr error
		for range 5 { // a free port may be taken between probing and binding
			port, err := clusterPort()
			if err != nil {
				lastErr = err
				continue
			}
			addr, kill, err := startOn(t, server, port,
				"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port)),
				"--cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout/time.Millisecond)),
				"--repl-diskless-sync-delay", "0", // a replica syncs at once
			)
			if err != nil {
				lastErr = err
				continue
			}
			t.Cleanup(kill)
			nodes = append(nodes, ClusterNode{Addr: addr, Kill: kill})
			lastErr = nil
			break
		}
		if lastErr != nil {
			t.Fatalf("redistest: start cluster node %d: %v", i, lastErr)
		}
	}
	masters, replicas = nodes[:3], nodes[3:]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"--cluster", "create"}
	for _, n := range masters {
		args = append(args, n.Addr)
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, n := range masters {
		if err := waitClusterOK(ctx, n.Addr, 3); err != nil {
			t.Fatalf("redistest: cluster node %s: %v", n.Addr, err)
		}
	}
	if !withReplicas {
		return masters, nil
	}
	// Each replica meets the cluster and replicates its master: explicit,
	// so that replicas[i] belongs to masters[i].
	for i, r := range replicas {
		if err := replicate(ctx, r.Addr, masters[i].Addr); err != nil {
			t.Fatalf("redistest: replica %s of %s: %v", r.Addr, masters[i].Addr, err)
		}
	}
	for _, n := range nodes {
		if err := waitClusterOK(ctx, n.Addr, 6); err != nil {
			t.Fatalf("redistest: cluster node %s: %v", n.Addr, err)
		}
	}
	return masters, replicas
}

// replicate makes the node at addr a replica of the master at master and
// waits until its replication link is up.
func replicate(ctx context.Context, addr, master string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	m := redis.NewClient(&redis.Options{Addr: master, MaxRetries: -1, DialTimeout: time.Second})
	defer m.Close()
	id, err := m.ClusterMyID(ctx).Result()
	if err != nil {
		return fmt.Errorf("CLUSTER MYID: %w", err)
	}
	host, port, _ := net.SplitHostPort(master)
	p, _ := strconv.Atoi(port)
	if err := c.ClusterMeet(ctx, host, strconv.Itoa(p)).Err(); err != nil {
		return fmt.Errorf("CLUSTER MEET: %w", err)
	}
	// The replica must know the master before it can replicate it; once
	// it does, REPLICATE is sent once (again would restart the sync).
	var last error
	replicating := false
	for {
		if !replicating {
			if last = c.Do(ctx, "CLUSTER", "REPLICATE", id).Err(); last == nil {
				replicating = true
			}
		}
		if replicating {
			info, err := c.Info(ctx, "replication").Result()
			if err == nil && strings.Contains(info, "master_link_status:up") {
				return nil
			}
			last = fmt.Errorf("replication link not up yet (%v)", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not replicating: %v", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitPromoted waits (bounded by ctx) until the node at addr reports
// role:master, and returns when it first saw it so.
func WaitPromoted(ctx context.Context, addr string) (time.Time, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "role:master") {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("redistest: %s not promoted: %w", addr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// clusterPort picks a port p in 20000–44999 such that p and its cluster
// bus port p+10000 are both free on 127.0.0.1 at the moment (redis-server
// before 7.0 always takes p+10000 for the bus). The range stays clear of
// Linux's default ephemeral ports (32768–60999) for p+10000 as far as it
// can and below 65535 always.
func clusterPort() (int, error) {
	for range 50 {
		p := 20000 + rand.IntN(25000)
		if free(p) && free(p+10000) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port pair (p, p+10000) found")
}

// free reports whether port can be bound on 127.0.0.1 now.
func free(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// waitClusterOK polls CLUSTER INFO on addr until it reports
// cluster_state:ok with known nodes and every slot assigned.
func waitClusterOK(ctx context.Context, addr string, known int) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	var last string
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") &&
			strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r", known)) && strings.Contains(info, "cluster_slots_assigned:16384") {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = strings.Join(strings.Fields(info), " ")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no cluster_state:ok: %s", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
