package pwd

import (
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits configures how failed sign-ins are slowed down. Only failures
// count: an address doing hundreds of successful logins a minute (a
// corporate NAT, a load test) is never slowed.
type Limits struct {
	// Disabled turns the limits off (tests, load generators).
	Disabled bool
	// FreeFailures is how many consecutive failures a username gets before
	// back-off starts (default 5).
	FreeFailures int
	// Backoff is the first back-off; it doubles with each further failure
	// (default 1s).
	Backoff time.Duration
	// MaxBackoff caps the back-off (default 5m): nobody is locked out of
	// an account by someone else's guesses for longer than this.
	MaxBackoff time.Duration
	// IPFailuresPerMinute and IPBurst bound failures per client IP with a
	// token bucket (defaults 30/min, burst 60).
	IPFailuresPerMinute float64
	IPBurst             int
}

func (l *Limits) applyDefaults() {
	if l.FreeFailures == 0 {
		l.FreeFailures = 5
	}
	if l.Backoff == 0 {
		l.Backoff = time.Second
	}
	if l.MaxBackoff == 0 {
		l.MaxBackoff = 5 * time.Minute
	}
	if l.IPFailuresPerMinute == 0 {
		l.IPFailuresPerMinute = 30
	}
	if l.IPBurst == 0 {
		l.IPBurst = 60
	}
}

// userFailures is one username's run of consecutive failures.
type userFailures struct {
	count int
	until time.Time // no attempt before this time
	last  time.Time
}

// loginLimiter tracks failed sign-ins per username (exponential back-off,
// reset by a success) and per client IP (a token bucket of failures,
// golang.org/x/time/rate). State is per process; with several replicas each
// enforces its own limits.
type loginLimiter struct {
	cfg   Limits
	now   func() time.Time
	mu    sync.Mutex
	users map[string]*userFailures
	ips   map[string]*rate.Limiter
	swept time.Time
}

func newLoginLimiter(cfg Limits, now func() time.Time) *loginLimiter {
	cfg.applyDefaults()
	return &loginLimiter{cfg: cfg, now: now, users: map[string]*userFailures{}, ips: map[string]*rate.Limiter{}}
}

// allow reports whether a sign-in attempt for username from ip may be
// checked now, and if not, how long the caller must wait.
func (l *loginLimiter) allow(username, ip string) (bool, time.Duration) {
	if l.cfg.Disabled {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	var wait time.Duration
	if u := l.users[username]; u != nil && now.Before(u.until) {
		wait = u.until.Sub(now)
	}
	if lim := l.ips[ip]; lim != nil && lim.TokensAt(now) < 1 {
		r := lim.ReserveN(now, 1)
		if d := r.DelayFrom(now); d > wait {
			wait = d
		}
		r.CancelAt(now)
	}
	return wait <= 0, wait
}

// failed records a failed attempt.
func (l *loginLimiter) failed(username, ip string) {
	if l.cfg.Disabled {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	u := l.users[username]
	if u == nil {
		u = &userFailures{}
		l.users[username] = u
	}
	u.count++
	u.last = now
	if over := u.count - l.cfg.FreeFailures; over >= 0 {
		d := time.Duration(float64(l.cfg.Backoff) * math.Pow(2, float64(min(over, 30))))
		u.until = now.Add(min(d, l.cfg.MaxBackoff))
	}
	lim := l.ips[ip]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(l.cfg.IPFailuresPerMinute/60), l.cfg.IPBurst)
		l.ips[ip] = lim
	}
	lim.AllowN(now, 1)
}

// succeeded clears the username's failures (the IP bucket refills by itself).
func (l *loginLimiter) succeeded(username string) {
	if l.cfg.Disabled {
		return
	}
	l.mu.Lock()
	delete(l.users, username)
	l.mu.Unlock()
}

// sweep drops idle entries once a minute so memory stays bounded.
func (l *loginLimiter) sweep(now time.Time) {
	if now.Sub(l.swept) < time.Minute {
		return
	}
	l.swept = now
	for k, u := range l.users {
		if now.Sub(u.last) > l.cfg.MaxBackoff && now.After(u.until) {
			delete(l.users, k)
		}
	}
	for k, lim := range l.ips {
		if lim.TokensAt(now) >= float64(l.cfg.IPBurst) {
			delete(l.ips, k)
		}
	}
}

// retryAfterSeconds is a wait in whole seconds, at least 1, rounded up as
// Retry-After is (RFC 9110 §10.2.3).
func retryAfterSeconds(d time.Duration) int {
	return int(math.Ceil(max(d, time.Second).Seconds()))
}

// retryAfterWords says how long to wait in words: "1 second", "5 seconds",
// "2 minutes" (rounded up, as Retry-After is).
func retryAfterWords(d time.Duration) string {
	n := retryAfterSeconds(d)
	unit := "second"
	if n >= 120 {
		n, unit = (n+59)/60, "minute"
	}
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}
