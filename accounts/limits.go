package accounts

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The limits (issue 26, "Limits"). Guesses at one code are bounded in the
// database (MaxCodeAttempts); these bound the rest.
const (
	LimitSignupSource = "signup_source" // sign-ups per source address
	LimitMailAddress  = "mail_address"  // messages per recipient address
	LimitMailSource   = "mail_source"   // messages per source address
	LimitCodeAccount  = "code_account"  // guesses per address, across its codes
)

// Budget is N events per window.
type Budget struct {
	N   int
	Per time.Duration
}

// LimitConfig sets the budgets; a zero Budget takes the default, a
// negative N turns that limit off.
type LimitConfig struct {
	SignupSource, MailAddress, MailSource, CodeAccount Budget
	// Registerer receives authd_account_limited_total (nil: none).
	Registerer prometheus.Registerer
}

// LimitError is a refusal: too many of something; RetryAfter says when
// the window ends.
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

// Limits counts events per (limit, key) in fixed windows, in this
// process. Keys are addresses: they are never logged.
type Limits struct {
	budgets map[string]Budget
	limited *prometheus.CounterVec
	now     func() time.Time

	mu      sync.Mutex
	windows map[string]*window
}

type window struct {
	start time.Time
	n     int
}

// maxKeys bounds the memory a flood of distinct keys can take: beyond it,
// expired windows are swept first, then the map starts afresh.
const maxKeys = 100_000

// NewLimits returns the limits of cfg.
func NewLimits(cfg LimitConfig) *Limits {
	def := func(b Budget, n int, per time.Duration) Budget {
		if b.N == 0 {
			return Budget{N: n, Per: per}
		}
		if b.Per <= 0 {
			b.Per = per
		}
		return b
	}
	l := &Limits{
		budgets: map[string]Budget{
			LimitSignupSource: def(cfg.SignupSource, 20, time.Hour),
			LimitMailAddress:  def(cfg.MailAddress, 5, time.Hour),
			LimitMailSource:   def(cfg.MailSource, 30, time.Hour),
			LimitCodeAccount:  def(cfg.CodeAccount, 20, time.Hour),
		},
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "authd_account_limited_total",
			Help: "Self-service requests refused by a limit, by limit."}, []string{"limit"}),
		now:     time.Now,
		windows: map[string]*window{},
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(l.limited)
	}
	return l
}

// Allow counts one event of limit for key, or returns a *LimitError when
// the budget of the current window is spent (the refused event is not
// counted). An empty key is not limited.
func (l *Limits) Allow(_ context.Context, limit, key string) error {
	b, ok := l.budgets[limit]
	if !ok || b.N < 0 || key == "" {
		return nil
	}
	now := l.now()
	k := limit + "\x00" + key
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.windows[k]
	if w == nil || now.Sub(w.start) >= b.Per {
		if w == nil && len(l.windows) >= maxKeys {
			l.sweep(now)
		}
		w = &window{start: now}
		l.windows[k] = w
	}
	if w.n >= b.N {
		l.limited.WithLabelValues(limit).Inc()
		return &LimitError{Limit: limit, RetryAfter: w.start.Add(b.Per).Sub(now)}
	}
	w.n++
	return nil
}

// sweep drops expired windows, or all of them if none expired.
func (l *Limits) sweep(now time.Time) {
	longest := time.Duration(0)
	for _, b := range l.budgets {
		longest = max(longest, b.Per)
	}
	for k, w := range l.windows {
		if now.Sub(w.start) >= longest {
			delete(l.windows, k)
		}
	}
	if len(l.windows) >= maxKeys {
		l.windows = map[string]*window{}
	}
}
