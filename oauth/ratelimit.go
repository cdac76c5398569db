package oauth

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// clientIP is the request's peer address. authd does not trust
// X-Forwarded-For: behind a proxy, every client shares the proxy's bucket,
// which only ever makes the limit stricter.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// retryAfter formats a wait as a Retry-After value in whole seconds
// (RFC 9110 §10.2.3), at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(int(math.Ceil(max(d, time.Second).Seconds())))
}

// TokenLimits configures the per-client token endpoint rate limit.
type TokenLimits struct {
	// PerSecond is the sustained rate of token requests per client_id;
	// 0 disables the limit.
	PerSecond float64
	// Burst is the bucket size (default 2×PerSecond).
	Burst int
}

// clientLimiter rate-limits token requests per client_id (token bucket,
// golang.org/x/time/rate).
type clientLimiter struct {
	cfg TokenLimits
	mu  sync.Mutex
	m   map[string]*rate.Limiter
}

func newClientLimiter(cfg TokenLimits) *clientLimiter {
	if cfg.PerSecond <= 0 {
		return nil
	}
	if cfg.Burst <= 0 {
		cfg.Burst = int(math.Max(1, 2*cfg.PerSecond))
	}
	return &clientLimiter{cfg: cfg, m: map[string]*rate.Limiter{}}
}

// allow reports whether clientID may make a token request now, else how
// long to wait.
func (c *clientLimiter) allow(clientID string) (bool, time.Duration) {
	if c == nil {
		return true, 0
	}
	c.mu.Lock()
	lim := c.m[clientID]
	if lim == nil {
		if len(c.m) > 100_000 {
			// Bound memory against floods of made-up client_ids.
			c.m = map[string]*rate.Limiter{}
		}
		lim = rate.NewLimiter(rate.Limit(c.cfg.PerSecond), c.cfg.Burst)
		c.m[clientID] = lim
	}
	c.mu.Unlock()
	r := lim.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return false, d
	}
	return true, 0
}

// failureLimiter bounds failures per key (a source address): each failure
// spends a token, and a failure with none left is reported over budget.
// Successes are never counted or refused. Token bucket, golang.org/x/time/rate.
type failureLimiter struct {
	perSecond float64
	burst     int
	mu        sync.Mutex
	m         map[string]*rate.Limiter
}

func newFailureLimiter(perSecond float64, burst int) *failureLimiter {
	if perSecond <= 0 {
		return nil
	}
	return &failureLimiter{perSecond: perSecond, burst: max(burst, 1), m: map[string]*rate.Limiter{}}
}

// fail records one failure of key and reports whether it is within the
// budget, else how long until it would be.
func (f *failureLimiter) fail(key string) (bool, time.Duration) {
	if f == nil {
		return true, 0
	}
	f.mu.Lock()
	lim := f.m[key]
	if lim == nil {
		if len(f.m) > 100_000 {
			// Bound memory; forgetting counts only lets failures through
			// sooner, it never refuses anyone.
			f.m = map[string]*rate.Limiter{}
		}
		lim = rate.NewLimiter(rate.Limit(f.perSecond), f.burst)
		f.m[key] = lim
	}
	f.mu.Unlock()
	r := lim.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return false, d
	}
	return true, 0
}
