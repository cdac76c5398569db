package dpop

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/authd/authd/rediscall"
)

// ReplayStore records the jti of every accepted proof for as long as the
// proof could be accepted (RFC 9449 §11.1), so a proof is used once.
//
// Fail mode: open. When the store cannot answer, Verifier accepts the
// proof and reports the error (Options.OnStoreError). Why: a DPoP proof is
// worth nothing without the private key it was signed with, the tokens a
// replayed token request could obtain are bound to that key (and the
// replay cache answers a repeated exchange with the very same tokens), and
// the proof's iat window (60 s) and, when on, the server nonce still bound
// it. Failing closed would instead make Redis a hard dependency of every
// DPoP sign-in and refresh, which authd does not have anywhere else (the
// replay cache fails open to PostgreSQL). An operator who prefers the
// other trade would wrap the store to return a fresh=false on error.
type ReplayStore interface {
	// Use records id for ttl. fresh is false when id was recorded before
	// and has not expired. An error means the store did not answer.
	Use(ctx context.Context, id string, ttl time.Duration) (fresh bool, err error)
}

// Memory is an in-process ReplayStore, for one process (dev, tests).
type Memory struct {
	mu    sync.Mutex
	seen  map[string]time.Time
	now   func() time.Time
	sweep time.Time
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{seen: map[string]time.Time{}, now: time.Now} }

// Use implements ReplayStore.
func (m *Memory) Use(_ context.Context, id string, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if now.After(m.sweep) {
		for k, exp := range m.seen {
			if now.After(exp) {
				delete(m.seen, k)
			}
		}
		m.sweep = now.Add(ttl)
	}
	if exp, ok := m.seen[id]; ok && now.Before(exp) {
		return false, nil
	}
	m.seen[id] = now.Add(ttl)
	return true, nil
}

// DefaultRedisPrefix prefixes the Redis keys of jti values.
const DefaultRedisPrefix = "authd:dpop:jti:"

// Redis is a ReplayStore shared by every replica: SET NX with an expiry,
// one round trip bounded by timeout.
type Redis struct {
	client  redis.Cmdable
	prefix  string
	timeout time.Duration
}

// NewRedis returns a Redis store; timeout 0 is 150 ms. The wait for Redis
// is bounded by timeout on any client, the deferred automatic pipeliner
// included (package rediscall).
func NewRedis(client redis.Cmdable, timeout time.Duration) *Redis {
	if timeout <= 0 {
		timeout = 150 * time.Millisecond
	}
	return &Redis{client: client, prefix: DefaultRedisPrefix, timeout: timeout}
}

// Use implements ReplayStore.
func (r *Redis) Use(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	ms := max(ttl.Milliseconds(), 1)
	err := rediscall.Do(ctx, r.client, redis.NewStatusCmd(ctx, "set", r.prefix+id, "1", "px", ms, "nx"))
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}
