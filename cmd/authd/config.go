package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
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
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/revocation"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/postgres"
)

// config is every setting of serve/dev and the database commands.
type config struct {
	Addr            string
	Issuer          string
	DatabaseURL     string
	RedisURL        string
	Secret          string
	AdminToken      string
	CodeTTL         time.Duration
	AccessTokenTTL  time.Duration
	RefreshTokenTTL time.Duration
	ReplayWindow    time.Duration
	LogLevel        string
	TokenRateLimit  float64
	DPoPNonce       string
	RequirePAR      bool
	PKCERows        bool
	jobs            jobsConfig   // job worker and janitor (janitor.go)
	perf            perfConfig   // client cache (perf.go)
	ops             opsConfig    // operations listener (ops.go)
	people          peopleConfig // sessions and consent (people.go)
	keys            keysConfig   // ID token signing keys (keys.go)

	// demoVerifier is set by dev: the callback page shows a ready token request.
	demoVerifier string
}

// flags registers the settings on fs with their defaults.
func (c *config) flags(fs *flag.FlagSet, server bool) {
	fs.StringVar(&c.DatabaseURL, "database-url", "", "PostgreSQL URL (postgres://…), or \"memory\" for a throwaway single node (AUTHD_DATABASE_URL; required by every command but dev, which always runs in memory)")
	fs.StringVar(&c.Secret, "secret", "", "system secret, at least 32 bytes (AUTHD_SECRET)")
	if !server {
		return
	}
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "listen address (AUTHD_ADDR)")
	fs.StringVar(&c.Issuer, "issuer", "", "issuer URL (AUTHD_ISSUER); default http://ADDR")
	fs.StringVar(&c.RedisURL, "redis-url", "memory", "Redis URL (redis://…) for the replay cache, or \"memory\" (AUTHD_REDIS_URL)")
	fs.StringVar(&c.AdminToken, "admin-token", "", "admin bearer token(s), comma-separated (AUTHD_ADMIN_TOKEN)")
	fs.DurationVar(&c.CodeTTL, "code-ttl", 60*time.Second, "authorization code lifetime (AUTHD_CODE_TTL)")
	fs.DurationVar(&c.AccessTokenTTL, "access-token-ttl", time.Hour, "access token lifetime (AUTHD_ACCESS_TOKEN_TTL)")
	fs.DurationVar(&c.RefreshTokenTTL, "refresh-token-ttl", 720*time.Hour, "refresh token lifetime (AUTHD_REFRESH_TOKEN_TTL)")
	fs.DurationVar(&c.ReplayWindow, "replay-window", 30*time.Second, "how long a duplicate token exchange gets the original response; 0 disables (AUTHD_REPLAY_WINDOW)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error (AUTHD_LOG_LEVEL)")
	fs.StringVar(&c.DPoPNonce, "dpop-nonce", "on", "on: DPoP proofs at the token endpoint must carry a server nonce (RFC 9449 Section 8); off (AUTHD_DPOP_NONCE)")
	fs.BoolVar(&c.RequirePAR, "require-par", false, "every authorization request must be pushed to /oauth2/par first (RFC 9126 Section 6) (AUTHD_REQUIRE_PAR)")
	fs.BoolVar(&c.PKCERows, "pkce-rows", false, "also write each code's PKCE session to the pkce_sessions table, where authd before 2026-12 reads it: true during a rolling upgrade from such a version, then false (AUTHD_PKCE_ROWS)")
	fs.Float64Var(&c.TokenRateLimit, "token-rate-limit", 5000, "token requests per second per client_id (burst 2x); 0 disables (AUTHD_TOKEN_RATE_LIMIT)")
	c.jobs.flags(fs, true)
	c.perf.flags(fs)
	c.ops.flags(fs)
	c.people.flags(fs)
	c.keys.flags(fs)
}

// parse parses args, then fills every flag not given on the command line
// from its AUTHD_* variable (flag -database-url ← AUTHD_DATABASE_URL): a flag
// wins over the environment. The environment comes from getenv, so tests
// inject it. Errors name the setting; -h prints usage (the command's text)
// and the flags to stdout and returns errHelp.
func parse(fs *flag.FlagSet, usage string, args []string, getenv func(string) string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, usage, stdout)
			return errHelp
		}
		return usagef("%s: %v (run \"authd help %s\")", fs.Name(), strings.ReplaceAll(err.Error(), "parse error", "invalid value (durations look like 60s, 15m or 1h)"), commandOf(fs))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = usagef("%s: %q is not valid%s", envName(f.Name), v, expectedForm(f))
			}
		}
	})
	return err
}

// parseNoArgs is parse for a command that takes no positional argument:
// one is a usage error (Go's flag package stops at the first non-flag, so
// "serve extra -addr x" would otherwise ignore "-addr x" silently).
func parseNoArgs(fs *flag.FlagSet, usage string, args []string, getenv func(string) string, stdout io.Writer) error {
	if err := parse(fs, usage, args, getenv, stdout); err != nil {
		return err
	}
	return noArgs(fs)
}

// noArgs refuses the arguments left after the flags of fs.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q (run \"authd help %s\")", fs.Name(), fs.Arg(0), commandOf(fs))
	}
	return nil
}

// commandOf is the top-level command of a flag set ("clients get" → clients).
func commandOf(fs *flag.FlagSet) string {
	name, _, _ := strings.Cut(fs.Name(), " ")
	return name
}

// printUsage writes a command's usage text and its flags.
func printUsage(fs *flag.FlagSet, usage string, w io.Writer) {
	io.WriteString(w, usage)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	io.WriteString(w, "\nFlags (each also an AUTHD_* variable, e.g. -database-url is AUTHD_DATABASE_URL):\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// envName is the AUTHD_* variable of a flag.
func envName(flagName string) string {
	return "AUTHD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// expectedForm says what a flag's value should look like.
func expectedForm(f *flag.Flag) string {
	switch f.Value.(type) {
	case interface{ Get() any }:
		switch f.Value.(flag.Getter).Get().(type) {
		case time.Duration:
			return ": expected a duration such as 60s, 15m or 1h"
		case float64:
			return ": expected a number"
		case bool:
			return ": expected true or false"
		}
	}
	return ""
}

// errHelp reports that -h was handled; the command exits 0.
var errHelp = errors.New("help requested")

// validate checks the server settings; errors name the setting.
func (c *config) validate(requireSecret bool) error {
	if requireSecret && len(c.Secret) < 32 {
		return usagef("AUTHD_SECRET: must be at least 32 bytes (got %d); generate one with: openssl rand -base64 48", len(c.Secret))
	}
	if c.DatabaseURL == "" {
		return usagef("AUTHD_DATABASE_URL: required: a postgres:// URL, or \"memory\" for a throwaway single node (authd dev uses memory)")
	}
	if c.Issuer != "" {
		c.Issuer = strings.TrimRight(c.Issuer, "/")
		if u, err := url.Parse(c.Issuer); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.RawQuery != "" || u.Fragment != "" {
			return usagef("AUTHD_ISSUER: %q must be an absolute https:// (or http:// for local use) URL without query or fragment (RFC 8414 §2)", c.Issuer)
		}
	}
	if c.DatabaseURL != "memory" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		return usagef("AUTHD_DATABASE_URL: must be a postgres:// URL or \"memory\"")
	}
	if c.RedisURL != "" && c.RedisURL != "memory" && !strings.HasPrefix(c.RedisURL, "redis://") && !strings.HasPrefix(c.RedisURL, "rediss://") {
		return usagef("AUTHD_REDIS_URL: must be a redis:// or rediss:// URL or \"memory\"")
	}
	for name, d := range map[string]time.Duration{"AUTHD_CODE_TTL": c.CodeTTL, "AUTHD_ACCESS_TOKEN_TTL": c.AccessTokenTTL, "AUTHD_REFRESH_TOKEN_TTL": c.RefreshTokenTTL} {
		if d < time.Second {
			return usagef("%s: must be at least 1s (got %s)", name, d)
		}
	}
	if c.TokenRateLimit < 0 {
		return usagef("AUTHD_TOKEN_RATE_LIMIT: must not be negative (got %g); 0 disables", c.TokenRateLimit)
	}
	if c.DPoPNonce != "" && c.DPoPNonce != "on" && c.DPoPNonce != "off" {
		return usagef("AUTHD_DPOP_NONCE: must be on or off (got %q)", c.DPoPNonce)
	}
	if c.ReplayWindow < 0 {
		return usagef("AUTHD_REPLAY_WINDOW: must not be negative (got %s); 0 disables", c.ReplayWindow)
	}
	if c.people.SessionTTL != 0 { // the server commands register these flags
		if err := c.people.validate(); err != nil {
			return err
		}
	}
	if c.keys.Rotation != 0 {
		return c.keys.validate()
	}
	return nil
}

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
// added to the Redis client (authd serve: ops.RedisCounter).
func openRedisStores(redisURL string, log *slog.Logger, hooks ...redis.Hook) (exchangecache.Cache, dpop.ReplayStore, func(), error) {
	if redisURL == "" || redisURL == "memory" {
		return exchangecache.NewMemory(), dpop.NewMemory(), func() {}, nil
	}
	redis.SetLogger(&redisLogger{log: log})
	opts, err := parseRedisURL(redisURL)
	if err != nil {
		return nil, nil, nil, usagef("AUTHD_REDIS_URL: %v", err)
	}
	client := redis.NewUniversalClient(opts)
	for _, h := range hooks {
		client.AddHook(h)
	}
	// The replay cache's commands go through go-redis's automatic
	// pipeliner: under load, concurrent exchanges share one write and one
	// read instead of a round trip each (the replay fast path is one
	// command, so its system calls were most of its cost). Each command
	// still blocks its caller until its own reply, in order per caller.
	//
	// On a single node (or a Sentinel master) only: a Cluster's pipeliner keeps commands in order
	// behind a node that stopped answering (found by the scale-out test:
	// a refresh took 6–9 s while the cluster failed over).
	var replay redis.Cmdable = client
	if single, ok := client.(*redis.Client); ok {
		ap, err := single.AutoPipelineWithOptions(&redis.AutoPipelineOptions{
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
	return exchangecache.NewRedis(replay, exchangecache.RedisOptions{Logger: log}), dpop.NewRedis(replay, 0), func() { _ = client.Close() }, nil
}

// parseRedisURL reads AUTHD_REDIS_URL into go-redis's universal options, so
// one setting chooses the topology:
//
//	redis://[user:pass@]host:6379/0                  a single node
//	redis://host1:6379,host2:6379,host3:6379         Redis Cluster (several hosts)
//	redis://host1:26379,host2:26379/0?master_name=m  Sentinel (master_name set)
//	rediss://…                                       the same over TLS
//
// Every call is bounded and never retried, so a Redis that stops answering
// cannot stall a login: the cache fails open. The bound is the read and
// write timeouts, exchangecache.DefaultRedisTimeout (150 ms), on the
// automatic pipeliner of a single node or a Sentinel master (both are a
// *redis.Client), which ignores per-command contexts; on a Cluster client
// also the call's context (ContextTimeoutEnabled). A call that finds its
// connection closed by an earlier timeout redials, and the new
// connection's handshake has the same bound: about 150 ms for the first
// call to a stalled Redis, 300 ms for the next ones (TestServeRedisCallsBounded).
// A Redis that refuses connections costs go-redis's dial retries (about
// 0.8 s a call, more when packets are dropped) until its pool has failed
// PoolSize dials (10 per core); the pool then fails at once and probes
// once a second, as before.
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
		DialTimeout:           500 * time.Millisecond,
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

// oauthConfig maps the CLI settings to the server's.
func (c *config) oauthConfig() oauth.Config {
	oc := oauth.Config{
		Issuer:           c.Issuer,
		Secret:           []byte(c.Secret),
		AuthorizeCodeTTL: c.CodeTTL,
		AccessTokenTTL:   c.AccessTokenTTL,
		RefreshTokenTTL:  c.RefreshTokenTTL,
		ReplayWindow:     c.ReplayWindow,
		TokenLimits:      oauth.TokenLimits{PerSecond: c.TokenRateLimit},
		DemoVerifier:     c.demoVerifier,
		ClientCacheTTL:   c.perf.ClientCacheTTL,
		DPoPNonce:        c.DPoPNonce,
		RequirePAR:       c.RequirePAR,
		PKCERows:         c.PKCERows,
	}
	c.people.apply(&oc)
	c.keys.apply(&oc)
	if c.ReplayWindow == 0 {
		oc.DisableReplay = true
		oc.ReplayWindow = -1
	}
	for _, t := range strings.Split(c.AdminToken, ",") {
		if t = strings.TrimSpace(t); t != "" {
			oc.AdminTokens = append(oc.AdminTokens, t)
		}
	}
	return oc
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, usagef("AUTHD_LOG_LEVEL: %q is not one of debug, info, warn, error", s)
	}
	return l, nil
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
