package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/authd/authd/ops"
)

// clusterReloadEvery is the floor between two slot-map reloads that
// failures ask for: a few a second at most, however many calls fail.
const clusterReloadEvery = 500 * time.Millisecond

// clusterFollower makes a Redis Cluster client follow a failover. go-redis
// reloads its slot map on MOVED, on READONLY, and once a minute; but a
// master that died answers nothing, so after its replica is promoted the
// client kept calling the dead address (23–33 s in an operator's trial)
// until the next periodic reload. clusterFollower asks for a reload after
// any call that failed to reach Redis (ops.Failed: a dial error, a
// timeout, CLUSTERDOWN), at most once per every; go-redis coalesces
// reloads too. A promotion is then followed within one reload of
// happening.
type clusterFollower struct {
	client *redis.ClusterClient
	every  time.Duration
	last   atomic.Int64 // Unix nanoseconds of the last reload asked for
}

func (f *clusterFollower) failed(err error) {
	if !ops.Failed(err) {
		return
	}
	now := time.Now().UnixNano()
	last := f.last.Load()
	if now-last < int64(f.every) || !f.last.CompareAndSwap(last, now) {
		return
	}
	f.client.ReloadState(context.Background()) // asynchronous (LazyReload)
}

// DialHook implements redis.Hook.
func (f *clusterFollower) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (f *clusterFollower) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		f.failed(err)
		return err
	}
}

// ProcessPipelineHook implements redis.Hook.
func (f *clusterFollower) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			f.failed(c.Err())
		}
		return err
	}
}
