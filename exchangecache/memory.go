package exchangecache

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"sync"
	"time"
)

const (
	// memorySweepInterval is how often, at most, Claim scans the whole map
	// for expired entries. Reads and writes also expire entries lazily.
	memorySweepInterval = 10 * time.Second
	// memoryPollInterval is how often Memory.Wait re-checks an entry.
	memoryPollInterval = 2 * time.Millisecond
)

// Memory is an in-process [Cache]: one mutex and a map with expiry. It is for
// tests and single-node development; entries are not shared between
// processes. The zero value is not usable; call [NewMemory].
type Memory struct {
	// now is the clock used for entry expiry; tests may replace it before
	// first use. Wait's timeout always uses real time.
	now func() time.Time

	mu        sync.Mutex
	entries   map[string]*memEntry
	lastSweep time.Time
}

// memEntry is one cache entry.
type memEntry struct {
	completed   bool
	fingerprint string
	owner       string // empty once completed
	sealed      []byte // nil while in flight
	expires     time.Time
}

var _ Cache = (*Memory)(nil)

// NewMemory returns an empty in-process cache using the system clock.
func NewMemory() *Memory {
	return &Memory{now: time.Now, entries: make(map[string]*memEntry)}
}

// get returns the live entry for key, deleting it if expired. m.mu must be
// held.
func (m *Memory) get(key string, now time.Time) *memEntry {
	e, ok := m.entries[key]
	if !ok {
		return nil
	}
	if !now.Before(e.expires) {
		delete(m.entries, key)
		return nil
	}
	return e
}

// sweep drops every expired entry, at most once per memorySweepInterval.
// m.mu must be held.
func (m *Memory) sweep(now time.Time) {
	if now.Sub(m.lastSweep) < memorySweepInterval {
		return
	}
	m.lastSweep = now
	for k, e := range m.entries {
		if !now.Before(e.expires) {
			delete(m.entries, k)
		}
	}
}

// report describes an existing entry as seen by a caller with fingerprint.
func (e *memEntry) report(fingerprint string) Result {
	if subtle.ConstantTimeCompare([]byte(e.fingerprint), []byte(fingerprint)) != 1 {
		return Result{Outcome: Mismatch}
	}
	if !e.completed {
		return Result{Outcome: InFlight}
	}
	return Result{Outcome: Completed, Sealed: append([]byte(nil), e.sealed...)}
}

// Claim implements [Cache.Claim]; the check and the insert happen under one
// lock.
func (m *Memory) Claim(_ context.Context, key, fingerprint string, inflightTTL time.Duration) (Result, error) {
	if err := checkKeyFP("claim", key, fingerprint); err != nil {
		return Result{}, err
	}
	if err := checkTTL("claim", inflightTTL); err != nil {
		return Result{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.sweep(now)
	if e := m.get(key, now); e != nil {
		return e.report(fingerprint), nil
	}
	owner := rand.Text()
	m.entries[key] = &memEntry{fingerprint: fingerprint, owner: owner, expires: now.Add(inflightTTL)}
	return Result{Outcome: Claimed, Owner: owner}, nil
}

// Lookup implements [Cache.Lookup].
func (m *Memory) Lookup(_ context.Context, key, fingerprint string) (Result, error) {
	if err := checkKeyFP("lookup", key, fingerprint); err != nil {
		return Result{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.get(key, m.now()); e != nil {
		return e.report(fingerprint), nil
	}
	return Result{Outcome: Absent}, nil
}

// Complete implements [Cache.Complete]; the owner check and the update happen
// under one lock. sealed is copied.
func (m *Memory) Complete(_ context.Context, key, owner string, sealed []byte, ttl time.Duration) error {
	if key == "" || owner == "" {
		return invalid("complete", "empty key or owner")
	}
	if err := checkTTL("complete", ttl); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	e := m.get(key, now)
	if e == nil || e.completed || subtle.ConstantTimeCompare([]byte(e.owner), []byte(owner)) != 1 {
		return ErrNotOwner
	}
	e.completed = true
	e.owner = ""
	e.sealed = append([]byte(nil), sealed...)
	e.expires = now.Add(ttl)
	return nil
}

// Release implements [Cache.Release]; the owner check and the delete happen
// under one lock.
func (m *Memory) Release(_ context.Context, key, owner string) error {
	if key == "" || owner == "" {
		return invalid("release", "empty key or owner")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.get(key, m.now())
	if e == nil || e.completed || subtle.ConstantTimeCompare([]byte(e.owner), []byte(owner)) != 1 {
		return ErrNotOwner
	}
	delete(m.entries, key)
	return nil
}

// Wait implements [Cache.Wait] by polling every couple of milliseconds.
func (m *Memory) Wait(ctx context.Context, key, fingerprint string, timeout time.Duration) (Result, error) {
	if err := checkKeyFP("wait", key, fingerprint); err != nil {
		return Result{}, err
	}
	if err := checkTTL("wait", timeout); err != nil {
		return Result{}, err
	}
	return waitPoll(ctx, timeout, memoryPollInterval, func(ctx context.Context) (Result, error) {
		return m.Lookup(ctx, key, fingerprint)
	})
}

// Forget implements [Cache.Forget].
func (m *Memory) Forget(_ context.Context, key string) error {
	if key == "" {
		return invalid("forget", "empty key")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, key)
	return nil
}
