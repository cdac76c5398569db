// Package limits keeps authd's abuse budgets (failed sign-ins per username
// and per source, token requests per client, client-authentication
// failures, and the budgets later entry points add) in Redis, so that every
// replica spends the same budget: three replicas behind a load balancer
// give an attacker the guesses one would, not three times as many.
//
// Each check is one atomic Redis operation (a small Lua script run with the
// server's clock, so replicas' clocks do not matter). A script touches one
// key, named with a hash tag, so the package works on Redis Cluster. Keys
// are HMAC-free SHA-256 digests of the budget name and the caller's key: no
// username or address is stored in Redis in the clear.
//
// When Redis cannot answer within the call's bound, the check falls back to
// an in-process copy of the same rule (the per-process limits authd had
// before), the fallback is counted (authd_limits_fallback_total) and logged
// at most once per interval; the shared budgets resume when Redis answers.
package limits

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Rate is a token bucket: Burst units at once, refilled at PerSecond. It is
// enforced as GCRA (the generic cell rate algorithm), one timestamp per key.
type Rate struct {
	PerSecond float64
	Burst     int
}

func (r Rate) valid() bool { return r.PerSecond > 0 && r.Burst > 0 }

// Backoff is a run of consecutive failures: the Free-th failure imposes a
// wait of First, each further one doubles it up to Max; a success ends the
// run (the rule authd's sign-in back-off has always had).
type Backoff struct {
	Free  int
	First time.Duration
	Max   time.Duration
}

// wait is the wait after count failures (0 within the free ones).
func (b Backoff) wait(count int64) time.Duration {
	over := count - int64(b.Free)
	if over < 0 {
		return 0
	}
	d := float64(b.First) * math.Pow(2, float64(min(over, 30)))
	return min(time.Duration(d), b.Max)
}

// Options configure a Limiter.
type Options struct {
	// Redis is the shared store; nil keeps every budget in this process.
	Redis redis.UniversalClient
	// Prefix starts every key (tests give each their own).
	Prefix string
	// CallTimeout bounds one Redis call (default 150ms) before falling
	// back to the process's own budget.
	CallTimeout time.Duration
	// WarnEvery is the interval of the fallback warning (default 10s).
	WarnEvery time.Duration
	Logger    *slog.Logger
	// Registerer receives authd_limits_fallback_total and
	// authd_limits_checks_total (nil: not registered).
	Registerer prometheus.Registerer
	// Now is the in-process clock (tests); Redis uses its own.
	Now func() time.Time
}

// Limiter checks and spends budgets, shared through Redis when it can be.
type Limiter struct {
	rdb      redis.UniversalClient
	prefix   string
	timeout  time.Duration
	warnGap  time.Duration
	log      *slog.Logger
	local    *local
	fallback *prometheus.CounterVec
	checks   *prometheus.CounterVec

	mu       sync.Mutex
	lastWarn time.Time
	now      func() time.Time
}

// New returns a Limiter.
func New(o Options) *Limiter {
	if o.CallTimeout <= 0 {
		o.CallTimeout = 150 * time.Millisecond
	}
	if o.WarnEvery <= 0 {
		o.WarnEvery = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	l := &Limiter{rdb: o.Redis, prefix: o.Prefix, timeout: o.CallTimeout, warnGap: o.WarnEvery,
		log: o.Logger, local: newLocal(o.Now), now: o.Now,
		fallback: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "authd_limits_fallback_total",
			Help: "Budget checks answered by the process's own limits because Redis did not answer, by operation."}, []string{"op"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "authd_limits_checks_total",
			Help: "Budget checks, by where they were decided (shared or local)."}, []string{"where"}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(l.fallback, l.checks)
	}
	return l
}

// Shared reports whether budgets are kept in Redis (false: per process).
func (l *Limiter) Shared() bool { return l.rdb != nil }

// key is the Redis key of a budget's entry: the digest in a hash tag, so a
// script's one key has one slot on a cluster.
func (l *Limiter) key(budget, key string) string {
	sum := sha256.Sum256([]byte(budget + "\x00" + key))
	return l.prefix + "limit:{" + hex.EncodeToString(sum[:16]) + "}"
}

// run evaluates a script, or reports false when Redis did not answer (the
// caller then decides locally).
func (l *Limiter) run(ctx context.Context, op string, s *redis.Script, key string, args ...any) ([]int64, bool) {
	if l.rdb == nil {
		l.checks.WithLabelValues("local").Inc()
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer cancel()
	v, err := s.Run(ctx, l.rdb, []string{key}, args...).Int64Slice()
	if err != nil {
		l.fallback.WithLabelValues(op).Inc()
		l.checks.WithLabelValues("local").Inc()
		l.warn(err)
		return nil, false
	}
	l.checks.WithLabelValues("shared").Inc()
	return v, true
}

func (l *Limiter) warn(err error) {
	l.mu.Lock()
	now := l.now()
	due := now.Sub(l.lastWarn) >= l.warnGap
	if due {
		l.lastWarn = now
	}
	l.mu.Unlock()
	if due {
		l.log.Warn("limits: Redis did not answer; budgets are per process until it does", "error", err)
	}
}

func ms(d time.Duration) int64 { return int64(math.Ceil(float64(d) / float64(time.Millisecond))) }

// Take spends one unit of key's budget if it has one; otherwise it spends
// nothing and reports how long until one is available.
func (l *Limiter) Take(ctx context.Context, budget, key string, r Rate) (bool, time.Duration) {
	if !r.valid() {
		return true, 0
	}
	k := l.key(budget, key)
	if v, ok := l.run(ctx, "take", gcraScript, k, gcraInterval(r), r.Burst, 1); ok {
		return v[0] == 1, time.Duration(v[1]) * time.Millisecond
	}
	return l.local.take(k, r, true)
}

// Charge spends one unit of key's budget whether or not it has one (a
// failure that already happened), and reports whether it was within it.
func (l *Limiter) Charge(ctx context.Context, budget, key string, r Rate) (bool, time.Duration) {
	if !r.valid() {
		return true, 0
	}
	k := l.key(budget, key)
	if v, ok := l.run(ctx, "charge", gcraScript, k, gcraInterval(r), r.Burst, 2); ok {
		return v[0] == 1, time.Duration(v[1]) * time.Millisecond
	}
	return l.local.charge(k, r)
}

// Refund gives back one unit Take spent for a request that turned out not
// to count (a public client's failed grant, charged elsewhere).
func (l *Limiter) Refund(ctx context.Context, budget, key string, r Rate) {
	if !r.valid() {
		return
	}
	k := l.key(budget, key)
	if _, ok := l.run(ctx, "refund", gcraScript, k, gcraInterval(r), r.Burst, 3); ok {
		return
	}
	l.local.refund(k, r)
}

// Wait reports how long until key's budget has a unit, spending nothing.
func (l *Limiter) Wait(ctx context.Context, budget, key string, r Rate) time.Duration {
	if !r.valid() {
		return 0
	}
	k := l.key(budget, key)
	if v, ok := l.run(ctx, "wait", gcraScript, k, gcraInterval(r), r.Burst, 0); ok {
		return time.Duration(v[1]) * time.Millisecond
	}
	_, d := l.local.take(k, r, false)
	return d
}

// gcraInterval is the emission interval in milliseconds (at least 1).
func gcraInterval(r Rate) int64 { return max(1, ms(time.Duration(float64(time.Second)/r.PerSecond))) }

// Fail records one more consecutive failure of key and returns the wait it
// now imposes (0 while within b.Free).
func (l *Limiter) Fail(ctx context.Context, budget, key string, b Backoff) time.Duration {
	k := l.key(budget, key)
	if v, ok := l.run(ctx, "fail", failScript, k, b.Free, ms(b.First), ms(b.Max)); ok {
		return time.Duration(v[0]) * time.Millisecond
	}
	return l.local.fail(k, b)
}

// Blocked reports how long key must still wait after its failures (0: it
// may try now).
func (l *Limiter) Blocked(ctx context.Context, budget, key string) time.Duration {
	k := l.key(budget, key)
	if v, ok := l.run(ctx, "blocked", blockedScript, k); ok {
		return time.Duration(v[0]) * time.Millisecond
	}
	return l.local.blocked(k)
}

// Reset ends key's run of failures (a success).
func (l *Limiter) Reset(ctx context.Context, budget, key string) {
	k := l.key(budget, key)
	l.local.reset(k)
	if l.rdb == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer cancel()
	if err := l.rdb.Del(ctx, k).Err(); err != nil {
		l.fallback.WithLabelValues("reset").Inc()
		l.warn(err)
	}
}
