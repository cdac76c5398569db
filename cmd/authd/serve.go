package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"time"

	"golang.org/x/oauth2"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/ops"
	"github.com/authd/authd/password"
	"github.com/authd/authd/storage"
)

const serveUsage = `usage: authd serve [flags]

Runs the server: the OAuth endpoints, pages and admin API on AUTHD_ADDR, and
/metrics, /healthz, /readyz (and pprof, when enabled) on AUTHD_OPS_ADDR.
Needs AUTHD_DATABASE_URL (migrated with "authd migrate up") and AUTHD_SECRET.
Logs are JSON on stderr. SIGTERM or SIGINT: readiness turns 503, in-flight
requests finish, then the process exits.
`

const devUsage = `usage: authd dev [flags]

Runs authd on in-memory storage and replay cache with a generated secret, a
demo user (demo / demo-password) and a demo public client, and prints a ready
authorization URL. Nothing is kept. Logs are text on stderr.
`

// cmdServe runs the server until ctx ends (SIGINT/SIGTERM), then shuts down
// gracefully: in-flight requests finish, connections close.
func cmdServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.flags(fs, true)
	envErr, err := envErrors(parseNoArgs(fs, serveUsage, args, getenv, stdout))
	if err != nil {
		return helpOK(err)
	}
	if err := c.validate(ctx, getenv, envErr); err != nil {
		return err
	}
	level, _ := parseLevel(c.LogLevel)
	sink := newLogSink(stderr)
	defer sink.Flush()
	log := newLogger(sink, true, level)
	ownLimit := getenv("GOMEMLIMIT") == ""
	if ownLimit {
		// A password hash allocates 7 MiB (argon2id, package password),
		// all garbage once it returns; without a limit the heap grows by
		// several hashes before the collector runs (peak RSS near 100 MiB
		// under a sign-in burst on two cores, measured with 19 MiB
		// hashes). A soft limit makes it collect sooner; steady-state
		// token traffic stays far below it.
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	if getenv("GOGC") == "" {
		// Under that limit, collect at nine times the live heap rather
		// than twice. authd's live heap is small: 4.5 MiB during a run of
		// replays, where GOGC 200 collected 13.6 times a second. At
		// GOGC 800 the heap target is about 40 MiB, so the soft limit
		// rather than the live heap's size decides when to collect. With
		// a limit of the operator's (perhaps none, or a large one), a
		// sign-in burst's live heap times nine could be far more memory:
		// GOGC 200 then.
		gc := defaultGCPercent
		if !ownLimit {
			gc = operatorLimitGCPercent
		}
		debug.SetGCPercent(gc)
	}
	return serve(ctx, c, log, newAccessLogger(sink.deferred(), level), nil, stdout)
}

// defaultMemoryLimit is authd serve's soft memory limit (Go's GOMEMLIMIT,
// which overrides it): bytes.
const defaultMemoryLimit = 48 << 20

// defaultGCPercent is authd serve's GOGC under its own memory limit, and
// operatorLimitGCPercent under a GOMEMLIMIT set in the environment (a GOGC
// there overrides both).
const (
	defaultGCPercent       = 800
	operatorLimitGCPercent = 200
)

// serve opens the backends, builds the server (newServer) and runs the
// HTTP listener; c has been validated. ready, if set, is called with the
// server, the store, the issuer and the operations listener's address once
// it listens (dev seeding). accessLog, if set, receives the one line per
// HTTP request (default log).
func serve(ctx context.Context, c config, log, accessLog *slog.Logger, ready func(srv *oauth.Server, store storage.Store, issuer, opsAddr string) error, stdout io.Writer) error {
	for _, w := range c.warnings {
		log.Warn(w.msg, w.args...)
	}
	// Statements and round trips to PostgreSQL and Redis, on /metrics
	// (authd_db_*, authd_redis_*): what authbench reports per iteration.
	dbCount, redisCount := ops.NewDBCounter(), ops.NewRedisCounter()
	store, closeStore, err := openStoreTraced(ctx, c.DatabaseURL, true, dbCount)
	if err != nil {
		return err
	}
	defer closeStore()
	cache, dpopReplay, closeCache, err := openRedisStores(c.RedisURL, log, redisCount)
	if err != nil {
		return err
	}
	defer closeCache()

	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return usagef("AUTHD_ADDR (-addr): %v", err)
	}
	if c.Issuer == "" {
		c.Issuer = "http://" + ln.Addr().String()
	}
	for _, w := range issuerWarnings(c.Issuer) {
		log.Warn(w.msg, w.args...)
	}
	warnIfRedisDown(ctx, cache, c.RedisURL, log)
	srv, keys, err := newServer(ctx, c, backends{store: store, cache: cache, dpopReplay: dpopReplay}, log, accessLog)
	if err != nil {
		ln.Close()
		return err
	}
	if dbKind(c.DatabaseURL) == "postgres" {
		srv.Registry().MustRegister(dbCount)
	}
	if cacheKind(c.RedisURL) == "redis" {
		srv.Registry().MustRegister(redisCount)
	}
	stopJobs, err := startJobs(ctx, c.jobs, store, srv.Registry(), log, keys)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopJobs()
	stopBackchannel, err := startBackchannel(ctx, c.backchannel, c.jobs.Lease, c.Issuer, store, keys, srv.Registry(), log)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopBackchannel()
	stopMail, err := startMail(ctx, c, store, srv.Registry(), log)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopMail()
	opsl, err := startOps(c.ops, store, cache, srv.Registry(), log)
	if err != nil {
		ln.Close()
		return err
	}
	defer opsl.stop()
	if ready != nil {
		if err := ready(srv, store, c.Issuer, opsl.addr); err != nil {
			ln.Close()
			return err
		}
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("authd listening", "addr", ln.Addr().String(), "issuer", c.Issuer, "database", dbKind(c.DatabaseURL), "replay_cache", cacheKind(c.RedisURL))

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Draining: readiness turns 503 first, so load balancers stop sending
	// new requests while this process still serves them; then the listener
	// closes and in-flight requests finish; the operations listener closes
	// last (deferred).
	opsl.health.Drain()
	log.Info("draining: readiness is 503; serving for the drain delay", "drain_delay", c.ops.DrainDelay)
	if c.ops.DrainDelay > 0 {
		select {
		case err := <-errc:
			return err
		case <-time.After(c.ops.DrainDelay):
		}
	}
	log.Info("shutting down: finishing in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func dbKind(u string) string {
	if u == "memory" {
		return "memory"
	}
	return "postgres"
}

func cacheKind(u string) string {
	if u == "" || u == "memory" {
		return "memory"
	}
	return "redis"
}

func helpOK(err error) error {
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// Demo credentials of "authd dev".
const (
	demoUser     = "demo"
	demoPassword = "demo-password"
	demoClientID = "demo-app"
)

// cmdDev runs authd on its embedded default: in-memory storage and cache, a
// generated secret, a demo user and a demo public client, and prints a
// ready authorization URL.
func cmdDev(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c config
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	c.flags(fs, true)
	envErr, err := envErrors(parseNoArgs(fs, devUsage, args, getenv, stdout))
	if err != nil {
		return helpOK(err)
	}
	if c.Secret == "" {
		c.Secret = oauth.NewClientSecret() + oauth.NewClientSecret()
	}
	// dev is self-contained: it never touches a real database or Redis,
	// whatever the environment says (its banner says nothing is kept).
	for _, v := range []struct {
		name string
		val  *string
	}{{"AUTHD_DATABASE_URL", &c.DatabaseURL}, {"AUTHD_REDIS_URL", &c.RedisURL}} {
		if *v.val != "" && *v.val != "memory" {
			fmt.Fprintf(stderr, "authd dev: ignoring %s: dev always runs in memory (use authd serve for a real database)\n", v.name)
		}
		*v.val = "memory"
	}
	if !flagSet(fs, "token-rate-limit") && getenv("AUTHD_TOKEN_RATE_LIMIT") == "" {
		c.TokenRateLimit = 0 // off in dev
	}
	if !flagSet(fs, "drain-delay") && getenv("AUTHD_DRAIN_DELAY") == "" {
		c.ops.DrainDelay = 0 // Ctrl-C stops dev at once
	}
	c.accounts.dev = true // mail goes to the log (mail.LogSender)
	if !flagSet(fs, "ops-addr") && getenv("AUTHD_OPS_ADDR") == "" {
		c.ops.fallback = true // the default port may be taken (Prometheus's)
	}
	if err := c.validate(ctx, getenv, envErr); err != nil {
		return err
	}
	log := newLogger(stderr, false, slog.LevelInfo)
	verifier := oauth2.GenerateVerifier()
	c.demoVerifier = verifier
	return serve(ctx, c, log, nil, func(srv *oauth.Server, store storage.Store, issuer, opsAddr string) error {
		hash, err := password.Default().Hash(ctx, []byte(demoPassword))
		if err != nil {
			return err
		}
		if err := store.CreateUser(ctx, &storage.User{Username: demoUser, PasswordHash: hash, CreatedAt: time.Now().UTC()}); err != nil && !errors.Is(err, storage.ErrAlreadyExists) {
			return fmt.Errorf("seed demo user: %w", err)
		}
		redirect := issuer + "/demo/callback"
		if err := store.CreateClient(ctx, &storage.Client{
			ID: demoClientID, Name: "authd demo app", RedirectURIs: []string{redirect},
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
			Scopes: []string{"openid", "offline_access"}, TokenEndpointAuthMethod: "none",
			CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC(),
		}); err != nil && !errors.Is(err, storage.ErrAlreadyExists) {
			return fmt.Errorf("seed demo client: %w", err)
		}
		q := url.Values{
			"response_type":         {"code"},
			"client_id":             {demoClientID},
			"redirect_uri":          {redirect},
			"scope":                 {"openid offline_access"},
			"state":                 {"demo-" + oauth.NewClientID()[:8]},
			"code_challenge":        {oauth2.S256ChallengeFromVerifier(verifier)},
			"code_challenge_method": {"S256"},
		}
		fmt.Fprintf(stdout, `
authd dev is running (in-memory storage and replay cache; nothing is kept).

  issuer         %s
  operations     %s
  demo user      %s / %s
  demo client    %s (public, PKCE S256)
  code_verifier  %s

Open this authorization URL in a browser and sign in:

  %s/oauth2/authorize?%s

The callback page shows the code and the exact token request to redeem it.
Press Ctrl-C to stop.

`, issuer, opsURLs(opsAddr), demoUser, demoPassword, demoClientID, verifier, issuer, q.Encode())
		return nil
	}, stdout)
}

// opsURLs describes the operations listener for dev's banner.
func opsURLs(addr string) string {
	if addr == "off" {
		return "off (AUTHD_OPS_ADDR)"
	}
	return "http://" + addr + "  (/metrics, /healthz, /readyz)"
}

// flagSet reports whether the flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
