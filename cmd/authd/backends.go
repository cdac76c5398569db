package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/authd/authd/dpop"
	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/ops"
	"github.com/authd/authd/revocation"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/postgres"
)

// openStore opens the configured store. For PostgreSQL it refuses a schema
// that is behind the binary's migrations.
func openStore(ctx context.Context, dbURL string, checkSchema bool) (storage.Store, func(), error) {
	return openStoreTraced(ctx, dbURL, checkSchema, nil)
}

// openStoreTraced is openStore with a pgx tracer on every connection of the
// pool (authd serve: ops.DBCounter); nil traces nothing.
func openStoreTraced(ctx context.Context, dbURL string, checkSchema bool, tracer pgx.QueryTracer) (storage.Store, func(), error) {
	if dbURL == "memory" {
		return memory.New(), func() {}, nil
	}
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, nil, usagef("AUTHD_DATABASE_URL: %v", err)
	}
	if !strings.Contains(dbURL, "pool_max_conns") {
		pcfg.MaxConns = defaultPoolMaxConns()
	}
	if tracer != nil {
		pcfg.ConnConfig.Tracer = tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("AUTHD_DATABASE_URL: cannot connect: %s", firstLine(err))
	}
	if checkSchema {
		cur, latest, err := postgres.SchemaStatus(ctx, pool)
		if err != nil {
			pool.Close()
			return nil, nil, fmt.Errorf("AUTHD_DATABASE_URL: cannot read the schema version: %s", firstLine(err))
		}
		if cur < latest {
			pool.Close()
			return nil, nil, fmt.Errorf("the database schema is at version %d, this authd needs %d: run \"authd migrate up\" with the same AUTHD_DATABASE_URL", cur, latest)
		}
	}
	return postgres.New(pool), pool.Close, nil
}

// openCache opens the replay cache. go-redis's own log lines go to log
// (as JSON under serve), at info level, one per 10 s (redisLogger).
func openCache(redisURL string, log *slog.Logger) (exchangecache.Cache, func(), error) {
	cache, _, closeFn, err := openRedisStores(redisURL, log)
	return cache, closeFn, err
}

// openRedisStores opens the replay cache and the DPoP jti store (package
// dpop, which fails open) on one Redis client, or both in memory. hooks are
// added to the Redis client (authd serve: ops.RedisCounter). The Redis
// cache's Ping is readiness's (ops.RedisHealth: every master of a Cluster,
// and the calls' own failures).
func openRedisStores(redisURL string, log *slog.Logger, hooks ...redis.Hook) (exchangecache.Cache, dpop.ReplayStore, func(), error) {
	if redisURL == "" || redisURL == "memory" {
		return exchangecache.NewMemory(), dpop.NewMemory(), func() {}, nil
	}
	redis.SetLogger(&redisLogger{log: log})
	opts, err := parseRedisURL(redisURL)
	if err != nil {
		return nil, nil, nil, usagef("AUTHD_REDIS_URL: %v", err)
	}
	client := newRedisClient(opts)
	for _, h := range hooks {
		client.AddHook(h)
	}
	health := ops.NewRedisHealth(client, 0)
	client.AddHook(health)
	// The replay cache's commands go through go-redis's automatic
	// pipeliner: under load, concurrent exchanges share one write and one
	// read instead of a round trip each (the replay fast path is one
	// command, so its system calls were most of its cost). Each command
	// still blocks its caller until its own reply, in order per caller.
	// Its deferred face, whose Submit lets package rediscall stop waiting
	// at the call's deadline.
	//
	// On a single node (or a Sentinel master) only: a Cluster's pipeliner keeps commands in order
	// behind a node that stopped answering (found by the scale-out test:
	// a refresh took 6–9 s while the cluster failed over).
	var replay redis.Cmdable = client
	if single, ok := client.(*redis.Client); ok {
		ap, err := single.AsyncAutoPipelineWithOptions(&redis.AutoPipelineOptions{
			// Each caller waits for its reply before its next command, so
			// the batches need no order among them: a batch stuck on a
			// slow reply does not hold up the next ones.
			MaxConcurrentBatches: 4, Unordered: true,
		})
		if err != nil {
			_ = client.Close()
			return nil, nil, nil, fmt.Errorf("redis: %w", err)
		}
		replay = ap
	}
	// The DPoP jti store (one SET NX per proof) shares the pipeliner.
	cache := exchangecache.NewRedis(replay, exchangecache.RedisOptions{Logger: log})
	return healthyCache{Redis: cache, health: health}, dpop.NewRedis(replay, 0), func() { _ = client.Close() }, nil
}

// newRedisClient returns a client for opts (parseRedisURL); a Cluster
// client follows failovers (clusterFollower). Every Redis client of
// authd serve is made here.
func newRedisClient(opts *redis.UniversalOptions) redis.UniversalClient {
	client := redis.NewUniversalClient(opts)
	if cluster, ok := client.(*redis.ClusterClient); ok {
		client.AddHook(&clusterFollower{client: cluster, every: clusterReloadEvery})
	}
	return client
}

// healthyCache is the Redis replay cache whose Ping is ops.RedisHealth's:
// /readyz and authd_dependency_up read it (startOps), and so does the
// first ping at startup. A failure is logged by the cache's own warning,
// so that readiness and exchanges share one warning per 10 s.
type healthyCache struct {
	*exchangecache.Redis
	health *ops.RedisHealth
}

// Ping implements ops.Pinger.
func (c healthyCache) Ping(ctx context.Context) error {
	if err := c.health.Ping(ctx); err != nil {
		return c.ReportFailure(err)
	}
	return nil
}

// parseRedisURL reads AUTHD_REDIS_URL into go-redis's universal options, so
// one setting chooses the topology:
//
//	redis://[user:pass@]host:6379/0                  a single node
//	redis://host1:6379,host2:6379,host3:6379         Redis Cluster (several hosts)
//	redis://host1:26379,host2:26379/0?master_name=m  Sentinel (master_name set)
//	rediss://…                                       the same over TLS
//
// These are the client's options in one place. Every call is bounded and
// never retried, so a Redis that refuses, stalls, drops packets or cannot
// be resolved cannot stall a login: the cache fails open. The bound,
// exchangecache.DefaultRedisTimeout (150 ms), is the call's context, which
// package rediscall honours on the automatic pipeliner too (it stops
// waiting at the deadline). Underneath, each step of go-redis is bounded
// by the same figure so that work abandoned at the deadline also ends
// there: one dial attempt (DialerRetries 1: go-redis's default is 5
// attempts 100 ms apart, which made each call against a refusing Redis
// take 0.43 s and a token request of several calls up to 1.7 s), the wait
// for a pooled connection, and each read and write.
// TestRedisCallsBoundedEveryFailure, TestRedisRefusedTokenLatency and
// TestServeRedisCallsBounded measure it.
func parseRedisURL(raw string) (*redis.UniversalOptions, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("scheme must be redis:// or rediss://")
	}
	if u.Host == "" {
		return nil, fmt.Errorf("no host")
	}
	o := &redis.UniversalOptions{
		Addrs:                 strings.Split(u.Host, ","),
		MasterName:            u.Query().Get("master_name"),
		ContextTimeoutEnabled: true,
		DialTimeout:           exchangecache.DefaultRedisTimeout,
		DialerRetries:         1,
		PoolTimeout:           exchangecache.DefaultRedisTimeout,
		ReadTimeout:           exchangecache.DefaultRedisTimeout,
		WriteTimeout:          exchangecache.DefaultRedisTimeout,
		MaxRetries:            -1,
	}
	for i, a := range o.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			o.Addrs[i] = net.JoinHostPort(a, "6379")
		}
	}
	if u.User != nil {
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("database %q is not a number", db)
		}
		if len(o.Addrs) > 1 && o.MasterName == "" && n != 0 {
			return nil, fmt.Errorf("Redis Cluster has only database 0")
		}
		o.DB = n
	}
	if u.Scheme == "rediss" {
		host := u.Hostname()
		if i := strings.IndexByte(host, ','); i >= 0 {
			host = host[:i]
		}
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	}
	return o, nil
}

// firstLine returns an error's message on one line: pgx puts the cause
// (per host tried) on further lines, which are joined, without repeats.
func firstLine(err error) string {
	var parts []string
	seen := map[string]bool{}
	for _, l := range strings.Split(err.Error(), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !seen[l] {
			seen[l] = true
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}

// redisLogger adapts slog to go-redis's logger interface. go-redis logs
// from inside its connection pool, so while Redis is down it could write a
// line per call (per readiness probe, per login): redisLogger lets one line
// through per redisLogEvery and counts the others. Its lines are info: the
// warning that Redis is down is authd's own (the readiness probe's, and the
// replay cache's fail-open), at most one of each per 10 s.
type redisLogger struct {
	log *slog.Logger

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// redisLogEvery is the README's promise: one Redis warning per 10 s.
const redisLogEvery = 10 * time.Second

// Printf logs one go-redis message at info level, unless one was logged
// within redisLogEvery.
func (l *redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < redisLogEvery {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	l.log.InfoContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)), "source", "go-redis", "suppressed", n)
}

// openRevokingStore opens the store for a command that may revoke (users,
// clients): revocations through it also drop the replay cache entries in
// AUTHD_REDIS_URL, so a revoked response is never replayed from Redis
// (revocation.Store). With no Redis configured it is the plain store.
func openRevokingStore(ctx context.Context, c config, log *slog.Logger) (storage.Store, func(), error) {
	store, closeStore, err := openStore(ctx, c.DatabaseURL, true)
	if err != nil {
		return nil, nil, err
	}
	if c.RedisURL == "" || c.RedisURL == "memory" {
		return store, closeStore, nil
	}
	cache, closeCache, err := openCache(c.RedisURL, log)
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	onError := func(err error) {
		log.Warn("a revoked grant's replay cache entry was not dropped; it expires with the replay window", "error", err.Error())
	}
	return revocation.Store{Store: store, Cache: cache, OnError: onError}, func() { closeCache(); closeStore() }, nil
}
