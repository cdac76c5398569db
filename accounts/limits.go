package accounts

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/limits"
)

// The limits (issue 26, "Limits"). Guesses at one code are bounded in the
// database (MaxCodeAttempts); these bound the rest, as budgets of package
// limits: shared by every replica through Redis when the limiter has it,
// per process otherwise.
const (
	LimitSignupSource = "signup_source" // sign-ups per source address
	LimitMailAddress  = "mail_address"  // messages per recipient address
	LimitMailSource   = "mail_source"   // messages per source address
	LimitCodeAccount  = "code_account"  // guesses per address, across its codes
	LimitReauth       = "reauth"        // password re-entries per user (deletion)
)

// Budget is N events per window (a token bucket of N refilled over Per).
type Budget struct {
	N   int
	Per time.Duration
}

// LimitConfig sets the budgets; a zero Budget takes the default, a
// negative N turns that limit off.
type LimitConfig struct {
	SignupSource, MailAddress, MailSource, CodeAccount, Reauth Budget
	// Limiter keeps the budgets (the server's, shared through Redis);
	// nil: one of this process's own.
	Limiter *limits.Limiter
	// Registerer receives authd_account_limited_total (nil: none).
	Registerer prometheus.Registerer
}

// LimitError is a refusal: too many of something; RetryAfter says when to
// try again.
type LimitError struct {
	Limit      string
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	m := int(math.Ceil(e.RetryAfter.Minutes()))
	if m <= 1 {
		return "Too many attempts. Try again in a minute."
	}
	return fmt.Sprintf("Too many attempts. Try again in %d minutes.", m)
}

// Limits are the self-service budgets.
type Limits struct {
	rates   map[string]limits.Rate
	lim     *limits.Limiter
	limited *prometheus.CounterVec
}

// NewLimits returns the limits of cfg.
func NewLimits(cfg LimitConfig) *Limits {
	rate := func(b Budget, n int, per time.Duration) limits.Rate {
		if b.N == 0 {
			b = Budget{N: n, Per: per}
		}
		if b.N < 0 {
			return limits.Rate{} // off
		}
		if b.Per <= 0 {
			b.Per = per
		}
		return limits.Rate{PerSecond: float64(b.N) / b.Per.Seconds(), Burst: b.N}
	}
	l := &Limits{
		rates: map[string]limits.Rate{
			LimitSignupSource: rate(cfg.SignupSource, 20, time.Hour),
			LimitMailAddress:  rate(cfg.MailAddress, 5, time.Hour),
			LimitMailSource:   rate(cfg.MailSource, 30, time.Hour),
			LimitCodeAccount:  rate(cfg.CodeAccount, 20, time.Hour),
			LimitReauth:       rate(cfg.Reauth, 10, time.Hour),
		},
		lim: cfg.Limiter,
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "authd_account_limited_total",
			Help: "Self-service requests refused by a limit, by limit."}, []string{"limit"}),
	}
	if l.lim == nil {
		l.lim = limits.New(limits.Options{})
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(l.limited)
	}
	return l
}

// Allow spends one unit of limit's budget for key, or returns a
// *LimitError when there is none (nothing spent). An empty key is not
// limited. Keys are addresses: package limits stores only their digest.
func (l *Limits) Allow(ctx context.Context, limit, key string) error {
	r, ok := l.rates[limit]
	if !ok || key == "" {
		return nil
	}
	if ok, wait := l.lim.Take(ctx, "accounts."+limit, key, r); !ok {
		l.limited.WithLabelValues(limit).Inc()
		return &LimitError{Limit: limit, RetryAfter: max(wait, time.Second)}
	}
	return nil
}

// Check returns the *LimitError Allow would return now, spending nothing
// (a refusal is counted in the metric), or nil.
func (l *Limits) Check(ctx context.Context, limit, key string) error {
	r, ok := l.rates[limit]
	if !ok || key == "" {
		return nil
	}
	if wait := l.lim.Wait(ctx, "accounts."+limit, key, r); wait > 0 {
		l.limited.WithLabelValues(limit).Inc()
		return &LimitError{Limit: limit, RetryAfter: max(wait, time.Second)}
	}
	return nil
}
