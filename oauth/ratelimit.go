package oauth

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/authd/authd/limits"
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

// rate is the budget as package limits keeps it (shared by every replica
// through Deps.Limits); PerSecond ≤ 0 is no limit.
func (t TokenLimits) rate() limits.Rate {
	if t.PerSecond <= 0 {
		return limits.Rate{}
	}
	burst := t.Burst
	if burst <= 0 {
		burst = int(math.Max(1, 2*t.PerSecond))
	}
	return limits.Rate{PerSecond: t.PerSecond, Burst: burst}
}
