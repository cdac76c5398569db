package revocation

import (
	"context"
	"sync"
	"time"

	"github.com/authd/authd/exchangecache"
)

// maxPending bounds the keys a Retrier holds: a Redis that stays down
// through a mass revocation must not grow the process without end. A key
// beyond it is reported and expires with its window, as before.
const maxPending = 100_000

// Retrier keeps trying to drop the replay cache entries a revocation could
// not reach (a Redis Cluster master down), until the replay window ends.
// Without it, a replica promoted with those entries replays the revoked
// responses for the rest of the window; with it, they go within about
// Interval of the promotion. It lives in the process that revoked: one
// that exits meanwhile leaves its keys to the window (SECURITY.md).
type Retrier struct {
	cache    exchangecache.Cache
	window   time.Duration
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	pending map[string]time.Time // key → when its entry expires anyway
}

// NewRetrier returns a Retrier for cache, whose entries live at most
// window (the replay window), trying every interval (default 250 ms).
func NewRetrier(cache exchangecache.Cache, window, interval time.Duration) *Retrier {
	if interval <= 0 {
		interval = 250 * time.Millisecond
	}
	return &Retrier{cache: cache, window: window, interval: interval, now: time.Now, pending: map[string]time.Time{}}
}

// add schedules key's drop; false when the Retrier is full.
func (r *Retrier) add(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.pending[key]; !ok && len(r.pending) >= maxPending {
		return false
	}
	r.pending[key] = r.now().Add(r.window)
	return true
}

// Pending returns how many drops are still to be made.
func (r *Retrier) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}

// Retry makes one pass: every pending key is tried once; a dropped key,
// or one whose entry has expired by now anyway, is done.
func (r *Retrier) Retry(ctx context.Context) {
	r.mu.Lock()
	now := r.now()
	keys := make([]string, 0, len(r.pending))
	for k, until := range r.pending {
		if now.After(until) {
			delete(r.pending, k)
			continue
		}
		keys = append(keys, k)
	}
	r.mu.Unlock()
	for _, k := range keys {
		if ctx.Err() != nil {
			return
		}
		if r.cache.Forget(ctx, k) == nil {
			r.mu.Lock()
			delete(r.pending, k)
			r.mu.Unlock()
		}
	}
}

// Run retries every interval until ctx ends.
func (r *Retrier) Run(ctx context.Context) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Retry(ctx)
		}
	}
}
