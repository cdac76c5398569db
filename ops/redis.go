package ops

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisHealth is the replay cache's Pinger for readiness: it tells the
// truth about a Redis that a single PING would hide. Add it to the client
// as a hook (redis.UniversalClient.AddHook) and pass it as Config.Cache.
//
// Ping fails while either holds:
//   - a call of authd's failed within Window (a connection error, a timeout,
//     CLUSTERDOWN and the like; not a missing key or another answer Redis
//     gave on purpose): the requests themselves are failing open;
//   - on a Redis Cluster, a master of the current slot map does not answer
//     PING (every master is asked, and the error names it), so a slot whose
//     master died reads "degraded" before any request meets it.
type RedisHealth struct {
	client redis.UniversalClient
	window time.Duration
	now    func() time.Time

	failures atomic.Uint64
	lastFail atomic.Int64 // Unix nanoseconds of the last failed call
	mu       sync.Mutex
	lastErr  string
}

// DefaultRedisHealthWindow is how long a failed call keeps readiness
// degraded: longer than a probe interval, so that a probe sees every
// stretch of failures.
const DefaultRedisHealthWindow = 2 * time.Second

// NewRedisHealth returns the health of client; window 0 is
// DefaultRedisHealthWindow.
func NewRedisHealth(client redis.UniversalClient, window time.Duration) *RedisHealth {
	if window <= 0 {
		window = DefaultRedisHealthWindow
	}
	return &RedisHealth{client: client, window: window, now: time.Now}
}

// Failures returns the number of failed calls counted so far.
func (h *RedisHealth) Failures() uint64 { return h.failures.Load() }

// Ping implements Pinger.
func (h *RedisHealth) Ping(ctx context.Context) error {
	if last := h.lastFail.Load(); last != 0 && h.now().Sub(time.Unix(0, last)) < h.window {
		h.mu.Lock()
		msg := h.lastErr
		h.mu.Unlock()
		return fmt.Errorf("Redis calls failing (%d so far; the last within %s: %s)", h.failures.Load(), h.window, msg)
	}
	cluster, ok := h.client.(*redis.ClusterClient)
	if !ok {
		return h.client.Ping(ctx).Err()
	}
	var (
		mu     sync.Mutex
		failed []string
	)
	err := cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		if err := c.Ping(ctx).Err(); err != nil {
			mu.Lock()
			failed = append(failed, "master "+c.Options().Addr+": "+err.Error())
			mu.Unlock()
		}
		return nil
	})
	if len(failed) > 0 {
		sort.Strings(failed)
		return errors.New(strings.Join(failed, "; "))
	}
	return err // the slot map could not be read
}

// Failed reports whether err, the outcome of a call, means Redis could not
// serve it (rather than answering it: a missing key, a script's reply).
func Failed(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		for _, p := range []string{"CLUSTERDOWN", "MASTERDOWN", "LOADING", "TRYAGAIN", "READONLY", "NOREPLICAS", "BUSY "} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	return true
}

func (h *RedisHealth) record(err error) {
	if !Failed(err) {
		return
	}
	h.failures.Add(1)
	h.mu.Lock()
	h.lastErr = err.Error()
	h.mu.Unlock()
	h.lastFail.Store(h.now().UnixNano())
}

// DialHook implements redis.Hook.
func (h *RedisHealth) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *RedisHealth) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.record(err)
		return err
	}
}

// ProcessPipelineHook implements redis.Hook: each command's outcome counts.
// A pipeline that returned no error has no failed command (go-redis
// returns its commands' first error).
func (h *RedisHealth) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err == nil {
			return nil
		}
		for _, c := range cmds {
			if cerr := settledErr(c); Failed(cerr) {
				h.record(cerr)
				break
			}
		}
		return err
	}
}

// settledErr is the error of a command that has run, read without waiting:
// on the pipeliner's deferred face Err first checks whether the caller is
// the batch's own dispatch goroutine, where this hook runs, by parsing
// runtime.Stack (go-redis's self-deadlock guard: microseconds a command).
// A clone carries the error and no batch.
func settledErr(c redis.Cmder) error { return c.Clone().Err() }

var (
	_ redis.Hook = (*RedisHealth)(nil)
	_ Pinger     = (*RedisHealth)(nil)
)
