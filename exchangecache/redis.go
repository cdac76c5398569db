package exchangecache

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/authd/authd/rediscall"
)

// Defaults for [RedisOptions].
const (
	// DefaultRedisPrefix is the default key prefix.
	DefaultRedisPrefix = "authd:xc:"
	// DefaultRedisTimeout is the default bound on one Redis round trip.
	DefaultRedisTimeout = 150 * time.Millisecond
	// DefaultRedisPollInterval is the default interval between Wait polls.
	DefaultRedisPollInterval = 5 * time.Millisecond
)

// Entry layout: one Redis string per key,
//
//	state  one byte: 'i' (in flight) or 'c' (completed)
//	n      the fingerprint's length in bytes, four lowercase hex digits
//	fp     the fingerprint (n bytes)
//	rest   the owner token while in flight, the sealed response once completed
//
// with a PX expiry: the in-flight TTL, then the replay window. A string, not
// a hash, so that a claim is one native command (SET … NX GET, Redis 7.0 or
// later) instead of a script: a replay's claim costs Redis about 2 µs of
// CPU instead of the script's 16 (docs/benchmarks.md, fifth session).
//
// Versions of authd before this layout stored a hash under the same key.
// While nodes of both versions share a Redis, each meets the other's entries
// as WRONGTYPE, a cache error: it fails open, and PostgreSQL's replay record
// answers. The key stays the same on purpose: Forget (DEL) from a node of
// either version removes an entry of either layout, so a revocation is never
// left behind in the other layout.

// maxFingerprint bounds a fingerprint's length, which the entry stores in
// four hex digits. Fingerprint and BoundFingerprint return 64 (hex SHA-256).
const maxFingerprint = 0xffff

// claimScript is Claim on a Redis older than 7.0, which refuses NX with
// GET: it creates the in-flight entry if the key is absent, or returns the
// existing entry, in one atomic step. KEYS[1] entry key; ARGV[1] the new
// entry, ARGV[2] TTL in ms. Returns false when claimed (nil to go-redis),
// else the existing entry.
var claimScript = rediscall.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
  return v
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
`)

// ownedScriptHead reads the entry into v and returns 0 unless it is in
// flight and owned by ARGV[1]; n is the header and fingerprint's length.
const ownedScriptHead = `
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 1) ~= 'i' then
  return 0
end
local h = string.sub(v, 2, 5)
if not string.match(h, '^%x%x%x%x$') then
  return 0
end
local n = 5 + tonumber(h, 16)
if string.sub(v, n + 1) ~= ARGV[1] then
  return 0
end
`

// completeScript stores the sealed response if ARGV[1] owns the in-flight
// entry. KEYS[1] entry key; ARGV[1] owner, ARGV[2] sealed, ARGV[3] TTL in ms.
// Returns 1 if stored, 0 if the claim is not held.
var completeScript = rediscall.NewScript(ownedScriptHead + `
redis.call('SET', KEYS[1], 'c' .. string.sub(v, 2, n) .. ARGV[2], 'PX', ARGV[3])
return 1
`)

// releaseScript deletes the entry if ARGV[1] owns it and it is in flight.
// KEYS[1] entry key; ARGV[1] owner. Returns 1 if deleted, 0 otherwise.
var releaseScript = rediscall.NewScript(ownedScriptHead + `
redis.call('DEL', KEYS[1])
return 1
`)

// RedisOptions configures [NewRedis]. The zero value uses the defaults.
type RedisOptions struct {
	// Prefix is prepended to every Redis key; the full key is
	// Prefix + "{" + key + "}" so that Redis Cluster hashes on the cache key
	// alone. It must not contain '{' or '}'. Default DefaultRedisPrefix
	// ("authd:xc:"). Tests use a unique prefix per test for isolation.
	Prefix string
	// Timeout bounds the wait for each Redis call (a Wait poll counts as
	// one), so a slow Redis cannot stall a login: the call's context, which
	// package rediscall honours on the automatic pipeliner too. Default
	// DefaultRedisTimeout (150 ms).
	Timeout time.Duration
	// PollInterval is the time between two checks in Wait. Default
	// DefaultRedisPollInterval (5 ms).
	PollInterval time.Duration
	// Logger, when set, receives one warning when Redis cannot be reached,
	// at most once per WarnEvery (default 10 s) however many calls fail:
	// the one place that reports the cache's health in the log.
	Logger *slog.Logger
	// WarnEvery bounds the rate of that warning; default 10 s.
	WarnEvery time.Duration
}

// Redis is a [Cache] in Redis, shared by every authd node. Each operation is
// a single command or Lua script on a single key, so it is atomic and works
// on a standalone server, Sentinel or Cluster.
type Redis struct {
	client redis.Cmdable
	opts   RedisOptions
	// scriptClaim: Redis refused SET with both NX and GET (older than
	// 7.0), so Claim runs claimScript instead; set on the first refusal.
	scriptClaim atomic.Bool
	lastWarn    atomic.Int64 // Unix nanoseconds of the last warning
}

var _ Cache = (*Redis)(nil)

// NewRedis returns a Cache backed by client, which may be a *redis.Client,
// *redis.ClusterClient or failover client, or the deferred automatic
// pipeliner of one (redis.Client.AsyncAutoPipelineWithOptions: concurrent
// requests' commands share round trips, which is how authd serve uses it).
//
// Every call waits at most RedisOptions.Timeout (package rediscall: on the
// pipeliner the wait is abandoned at the deadline). A client other than
// the pipeliner should be created with ContextTimeoutEnabled: true, so that
// go-redis also stops its socket reads and writes there. NewRedis panics if
// opts.Prefix contains '{' or '}' (a programming error at wiring time).
func NewRedis(client redis.Cmdable, opts RedisOptions) *Redis {
	if opts.Prefix == "" {
		opts.Prefix = DefaultRedisPrefix
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		panic("exchangecache: RedisOptions.Prefix must not contain '{' or '}'")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultRedisTimeout
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultRedisPollInterval
	}
	if opts.WarnEvery <= 0 {
		opts.WarnEvery = 10 * time.Second
	}
	return &Redis{client: client, opts: opts}
}

// bound returns ctx bounded by RedisOptions.Timeout for one call.
func (r *Redis) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.opts.Timeout)
}

// fail reports err, a failed round trip, to the log at most once per
// WarnEvery, and returns it.
func (r *Redis) fail(err error) error {
	if r.opts.Logger == nil {
		return err
	}
	now := time.Now().UnixNano()
	last := r.lastWarn.Load()
	if now-last >= int64(r.opts.WarnEvery) && r.lastWarn.CompareAndSwap(last, now) {
		r.opts.Logger.Warn("replay cache (Redis) unreachable: authd keeps serving and answers retried exchanges from PostgreSQL",
			"error", err.Error(), "every_s", r.opts.WarnEvery.Seconds())
	}
	return err
}

// ReportFailure reports err, a failure of Redis found outside the cache's
// own calls (authd's readiness check, ops.RedisHealth), through the same
// warning as the cache's calls: at most one per WarnEvery for both. It
// returns err.
func (r *Redis) ReportFailure(err error) error { return r.fail(err) }

// redisKey returns the Redis key for a cache key.
func (r *Redis) redisKey(key string) string {
	return r.opts.Prefix + "{" + key + "}"
}

// millis converts d to whole milliseconds, rounding up, at least 1.
func millis(d time.Duration) int64 {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return max(int64(ms), 1)
}

// inFlightEntry returns the entry Claim writes: state 'i', fingerprint and
// owner, in the layout above.
func inFlightEntry(fingerprint, owner string) string {
	const hex = "0123456789abcdef"
	n := len(fingerprint)
	b := make([]byte, 0, 5+n+len(owner))
	b = append(b, 'i', hex[n>>12&15], hex[n>>8&15], hex[n>>4&15], hex[n&15])
	b = append(b, fingerprint...)
	b = append(b, owner...)
	return string(b)
}

// report turns a stored entry into a Result for a caller presenting
// fingerprint: Mismatch unless the stored fingerprint equals it (compared in
// constant time), else InFlight or Completed with the sealed response.
func report(entry, fingerprint string) (Result, error) {
	if len(entry) < 5 {
		return Result{}, fmt.Errorf("exchangecache: corrupt entry of %d bytes", len(entry))
	}
	n, err := strconv.ParseUint(entry[1:5], 16, 16)
	if err != nil || len(entry) < 5+int(n) {
		return Result{}, errors.New("exchangecache: corrupt entry: bad fingerprint length")
	}
	storedFP, rest := entry[5:5+n], entry[5+n:]
	if subtle.ConstantTimeCompare([]byte(storedFP), []byte(fingerprint)) != 1 {
		return Result{Outcome: Mismatch}, nil
	}
	switch entry[0] {
	case 'i':
		return Result{Outcome: InFlight}, nil
	case 'c':
		return Result{Outcome: Completed, Sealed: []byte(rest)}, nil
	default:
		return Result{}, fmt.Errorf("exchangecache: corrupt entry: unknown state %q", entry[0])
	}
}

// refusesNXGet reports whether err is Redis refusing SET with both NX and
// GET, which Redis accepts from 7.0 on (older versions answer "syntax
// error").
func refusesNXGet(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.Contains(rerr.Error(), "syntax error")
}

// Claim implements [Cache.Claim] with one command: SET key entry NX GET PX
// ttl sets the in-flight entry if the key is absent and returns nil, or
// changes nothing and returns the existing entry. On a Redis older than 7.0
// the same step is claimScript. A fingerprint longer than 65,535 bytes is
// an ErrInvalidArgument.
func (r *Redis) Claim(ctx context.Context, key, fingerprint string, inflightTTL time.Duration) (Result, error) {
	if err := checkKeyFP("claim", key, fingerprint); err != nil {
		return Result{}, err
	}
	if len(fingerprint) > maxFingerprint {
		return Result{}, invalid("claim", "fingerprint over 65535 bytes")
	}
	if err := checkTTL("claim", inflightTTL); err != nil {
		return Result{}, err
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()
	owner := rand.Text()
	old, err := r.setNXGet(ctx, r.redisKey(key), inFlightEntry(fingerprint, owner), millis(inflightTTL))
	switch {
	case errors.Is(err, redis.Nil):
		return Result{Outcome: Claimed, Owner: owner}, nil
	case err != nil:
		return Result{}, r.fail(fmt.Errorf("exchangecache: claim: %w", err))
	}
	return report(old, fingerprint)
}

// setNXGet sets rkey to entry, expiring in ms milliseconds, if rkey is
// absent, and then returns redis.Nil; otherwise it changes nothing and
// returns the existing entry. It is SET … NX GET, or claimScript once Redis
// has refused that (older than 7.0).
func (r *Redis) setNXGet(ctx context.Context, rkey, entry string, ms int64) (string, error) {
	if !r.scriptClaim.Load() {
		cmd := redis.NewStringCmd(ctx, "set", rkey, entry, "px", ms, "nx", "get")
		err := rediscall.Do(ctx, r.client, cmd)
		if err == nil {
			return cmd.Val(), nil
		}
		if !refusesNXGet(err) {
			return "", err
		}
		r.scriptClaim.Store(true)
	}
	return claimScript.Run(ctx, r.client, []string{rkey}, entry, ms).Text()
}

// Lookup implements [Cache.Lookup] with one GET.
func (r *Redis) Lookup(ctx context.Context, key, fingerprint string) (Result, error) {
	if err := checkKeyFP("lookup", key, fingerprint); err != nil {
		return Result{}, err
	}
	return r.lookup(ctx, key, fingerprint)
}

// lookup is Lookup without argument checks.
func (r *Redis) lookup(ctx context.Context, key, fingerprint string) (Result, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	cmd := redis.NewStringCmd(ctx, "get", r.redisKey(key))
	err := rediscall.Do(ctx, r.client, cmd)
	if errors.Is(err, redis.Nil) {
		return Result{Outcome: Absent}, nil
	}
	if err != nil {
		return Result{}, r.fail(fmt.Errorf("exchangecache: lookup: %w", err))
	}
	return report(cmd.Val(), fingerprint)
}

// Complete implements [Cache.Complete] with one Lua compare-and-set script.
func (r *Redis) Complete(ctx context.Context, key, owner string, sealed []byte, ttl time.Duration) error {
	if key == "" || owner == "" {
		return invalid("complete", "empty key or owner")
	}
	if err := checkTTL("complete", ttl); err != nil {
		return err
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()
	n, err := completeScript.Run(ctx, r.client, []string{r.redisKey(key)}, owner, sealed, millis(ttl)).Int()
	if err != nil {
		return r.fail(fmt.Errorf("exchangecache: complete: %w", err))
	}
	if n != 1 {
		return ErrNotOwner
	}
	return nil
}

// Release implements [Cache.Release] with one Lua compare-and-delete script.
func (r *Redis) Release(ctx context.Context, key, owner string) error {
	if key == "" || owner == "" {
		return invalid("release", "empty key or owner")
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()
	n, err := releaseScript.Run(ctx, r.client, []string{r.redisKey(key)}, owner).Int()
	if err != nil {
		return r.fail(fmt.Errorf("exchangecache: release: %w", err))
	}
	if n != 1 {
		return ErrNotOwner
	}
	return nil
}

// Wait implements [Cache.Wait] by polling with GET every
// RedisOptions.PollInterval; each poll is bounded by RedisOptions.Timeout.
func (r *Redis) Wait(ctx context.Context, key, fingerprint string, timeout time.Duration) (Result, error) {
	if err := checkKeyFP("wait", key, fingerprint); err != nil {
		return Result{}, err
	}
	if err := checkTTL("wait", timeout); err != nil {
		return Result{}, err
	}
	return waitPoll(ctx, timeout, r.opts.PollInterval, func(ctx context.Context) (Result, error) {
		return r.lookup(ctx, key, fingerprint)
	})
}

// Forget implements [Cache.Forget] with one DEL.
func (r *Redis) Forget(ctx context.Context, key string) error {
	if key == "" {
		return invalid("forget", "empty key")
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()
	if err := rediscall.Do(ctx, r.client, redis.NewIntCmd(ctx, "del", r.redisKey(key))); err != nil {
		return r.fail(fmt.Errorf("exchangecache: forget: %w", err))
	}
	return nil
}

// Ping reports whether Redis answers within the per-call timeout; authd's
// /readyz uses it.
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	if err := rediscall.Do(ctx, r.client, redis.NewStatusCmd(ctx, "ping")); err != nil {
		return r.fail(fmt.Errorf("exchangecache: ping: %w", err))
	}
	return nil
}
