package pwd

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/authd/authd/limits"
)

// Limits configures how failed sign-ins are slowed down. Only failures
// count: an address doing hundreds of successful logins a minute (a
// corporate NAT, a load test) is never slowed.
type Limits struct {
	// Disabled turns the limits off (tests, load generators).
	Disabled bool
	// FreeFailures is how many consecutive failures of a username from one
	// source address start its back-off (default 5).
	FreeFailures int
	// Backoff is the first back-off; it doubles with each further failure
	// (default 1s).
	Backoff time.Duration
	// MaxBackoff caps the back-off (default 5m): nobody is locked out of
	// an account by someone else's guesses for longer than this.
	MaxBackoff time.Duration
	// UserFreeFailures is how many failures of a username from all
	// sources together start its back-off (default 4×FreeFailures); a
	// browser that signed in as that username before is exempt.
	UserFreeFailures int
	// IPFailuresPerMinute and IPBurst bound failures per client IP with a
	// token bucket (defaults 30/min, burst 60).
	IPFailuresPerMinute float64
	IPBurst             int
}

func (l *Limits) applyDefaults() {
	if l.FreeFailures == 0 {
		l.FreeFailures = 5
	}
	if l.UserFreeFailures == 0 {
		l.UserFreeFailures = 4 * l.FreeFailures
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

// The budgets, kept in a limits.Limiter (shared by every replica through
// Redis, or per process):
//
//   - per (username, source address), strictly: FreeFailures, then a
//     doubling back-off; what one source can guess at one account;
//   - per username, loosely: UserFreeFailures, then the same back-off;
//     what everyone together can guess at one account. A browser that
//     has signed in as that username before (the device cookie) is not
//     held back by it: an attack from elsewhere does not lock the person
//     out on their own phone;
//   - per source address: a bucket of failures (IPFailuresPerMinute,
//     IPBurst), whatever the usernames.
//
// Only failures are charged; a success ends the username's runs.
const (
	budgetUserSource = "pwd-user-source"
	budgetUser       = "pwd-user"
	budgetSource     = "pwd-source"
)

// loginLimiter applies the budgets.
type loginLimiter struct {
	cfg Limits
	b   *limits.Limiter
}

func newLoginLimiter(cfg Limits, b *limits.Limiter, now func() time.Time) *loginLimiter {
	cfg.applyDefaults()
	if b == nil {
		b = limits.New(limits.Options{Now: now})
	}
	return &loginLimiter{cfg: cfg, b: b}
}

func (l *loginLimiter) strict() limits.Backoff {
	return limits.Backoff{Free: l.cfg.FreeFailures, First: l.cfg.Backoff, Max: l.cfg.MaxBackoff}
}

func (l *loginLimiter) loose() limits.Backoff {
	return limits.Backoff{Free: l.cfg.UserFreeFailures, First: l.cfg.Backoff, Max: l.cfg.MaxBackoff}
}

func (l *loginLimiter) sourceRate() limits.Rate {
	return limits.Rate{PerSecond: l.cfg.IPFailuresPerMinute / 60, Burst: l.cfg.IPBurst}
}

func userSource(username, ip string) string { return username + "\x00" + ip }

// allow reports whether a sign-in attempt for username from ip may be
// checked now, and if not, how long the caller must wait. known: the
// browser has signed in as username before.
func (l *loginLimiter) allow(ctx context.Context, username, ip string, known bool) (bool, time.Duration) {
	if l.cfg.Disabled {
		return true, 0
	}
	wait := l.b.Blocked(ctx, budgetUserSource, userSource(username, ip))
	if !known {
		wait = max(wait, l.b.Blocked(ctx, budgetUser, username))
	}
	wait = max(wait, l.b.Wait(ctx, budgetSource, ip, l.sourceRate()))
	return wait <= 0, wait
}

// failed records a failed attempt.
func (l *loginLimiter) failed(ctx context.Context, username, ip string) {
	if l.cfg.Disabled {
		return
	}
	l.b.Fail(ctx, budgetUserSource, userSource(username, ip), l.strict())
	l.b.Fail(ctx, budgetUser, username, l.loose())
	l.b.Charge(ctx, budgetSource, ip, l.sourceRate())
}

// succeeded ends the username's runs of failures (the source's bucket
// refills by itself).
func (l *loginLimiter) succeeded(ctx context.Context, username, ip string) {
	if l.cfg.Disabled {
		return
	}
	l.b.Reset(ctx, budgetUserSource, userSource(username, ip))
	l.b.Reset(ctx, budgetUser, username)
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
