package limits

import (
	"sync"
	"time"
)

// local is the same rules in this process: the fallback when Redis does not
// answer, and the only store when authd runs without Redis.
type local struct {
	now   func() time.Time
	mu    sync.Mutex
	tat   map[string]time.Time
	runs  map[string]*run
	swept time.Time
}

type run struct {
	n     int64
	until time.Time
	last  time.Time
}

// maxEntries bounds memory against floods of made-up keys; forgetting
// only lets attempts through sooner.
const maxEntries = 100_000

func newLocal(now func() time.Time) *local {
	return &local{now: now, tat: map[string]time.Time{}, runs: map[string]*run{}}
}

func (l *local) sweep(now time.Time) {
	if now.Sub(l.swept) < time.Minute && len(l.tat)+len(l.runs) < maxEntries {
		return
	}
	l.swept = now
	for k, t := range l.tat {
		if !t.After(now) {
			delete(l.tat, k)
		}
	}
	for k, r := range l.runs {
		if now.Sub(r.last) > time.Hour && now.After(r.until) {
			delete(l.runs, k)
		}
	}
	if len(l.tat)+len(l.runs) >= maxEntries {
		l.tat, l.runs = map[string]time.Time{}, map[string]*run{}
	}
}

// take is GCRA: spend one unit if it fits (when spend), else the wait.
func (l *local) take(k string, r Rate, spend bool) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	interval := time.Duration(gcraInterval(r)) * time.Millisecond
	tat := l.tat[k]
	if tat.Before(now) {
		tat = now
	}
	allowAt := tat.Add(interval).Add(-time.Duration(r.Burst) * interval)
	if allowAt.After(now) {
		return false, allowAt.Sub(now)
	}
	if spend {
		l.tat[k] = tat.Add(interval)
	}
	return true, 0
}

func (l *local) charge(k string, r Rate) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	interval := time.Duration(gcraInterval(r)) * time.Millisecond
	tat := l.tat[k]
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	l.tat[k] = next
	allowAt := next.Add(-time.Duration(r.Burst) * interval)
	if allowAt.After(now) {
		return false, allowAt.Sub(now)
	}
	return true, 0
}

func (l *local) refund(k string, r Rate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	interval := time.Duration(gcraInterval(r)) * time.Millisecond
	if tat := l.tat[k].Add(-interval); tat.After(now) {
		l.tat[k] = tat
	} else {
		delete(l.tat, k)
	}
}

func (l *local) fail(k string, b Backoff) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	r := l.runs[k]
	if r == nil {
		r = &run{}
		l.runs[k] = r
	}
	r.n++
	r.last = now
	d := b.wait(r.n)
	if d > 0 {
		r.until = now.Add(d)
	}
	return d
}

func (l *local) blocked(k string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.runs[k]; r != nil {
		if d := r.until.Sub(l.now()); d > 0 {
			return d
		}
	}
	return 0
}

func (l *local) reset(k string) {
	l.mu.Lock()
	delete(l.runs, k)
	l.mu.Unlock()
}
