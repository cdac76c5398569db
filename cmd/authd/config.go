package main

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/authd/authd/oauth"
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
	AuthSessionTTL  time.Duration
	LogLevel        string
	TokenRateLimit  float64
	SignInRateLimit float64
	DPoPNonce       string
	RequirePAR      bool
	PKCERows        bool
	jobs            jobsConfig    // job worker and janitor (janitor.go)
	perf            perfConfig    // client cache (perf.go)
	ops             opsConfig     // operations listener (ops.go)
	people          peopleConfig  // sessions and consent (people.go)
	keys            keysConfig    // ID token signing keys (keys.go)
	passkeys        passkeyConfig // passkeys (passkeys.go)

	// accounts: self-service accounts and their mail (accounts.go).
	accounts accountsConfig
	// backchannel: back-channel logout delivery (backchannel.go).
	backchannel backchannelConfig

	// demoVerifier is set by dev: the callback page shows a ready token request.
	demoVerifier string
	// warnings are what validate found wrong but not invalid; serve logs
	// them at startup.
	warnings []warning
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
	fs.DurationVar(&c.AuthSessionTTL, "auth-session-ttl", 5*time.Minute, "lifetime of an auth_session of the authorization challenge endpoint, a first-party app's native sign-in, 10s to 1h (AUTHD_AUTH_SESSION_TTL)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error (AUTHD_LOG_LEVEL)")
	fs.StringVar(&c.DPoPNonce, "dpop-nonce", "on", "on: DPoP proofs at the token endpoint must carry a server nonce (RFC 9449 Section 8); off (AUTHD_DPOP_NONCE)")
	fs.BoolVar(&c.RequirePAR, "require-par", false, "every authorization request must be pushed to /oauth2/par first (RFC 9126 Section 6) (AUTHD_REQUIRE_PAR)")
	fs.BoolVar(&c.PKCERows, "pkce-rows", false, "also write each code's PKCE session to the pkce_sessions table, where authd before 2026-12 reads it: true during a rolling upgrade from such a version, then false (AUTHD_PKCE_ROWS)")
	fs.Float64Var(&c.TokenRateLimit, "token-rate-limit", 5000, "token requests per second per client_id (burst 2x); 0 disables (AUTHD_TOKEN_RATE_LIMIT)")
	fs.Float64Var(&c.SignInRateLimit, "signin-rate-limit", 10, "requests per second per source address to the sign-in methods' own routes, e.g. passkey options (burst 10x); 0 disables (AUTHD_SIGNIN_RATE_LIMIT)")
	c.jobs.flags(fs, true)
	c.perf.flags(fs)
	c.ops.flags(fs)
	c.people.flags(fs)
	c.keys.flags(fs)
	c.accounts.flags(fs)
	c.backchannel.flags(fs)
	c.passkeys.flags(fs)
}

// validate checks every setting of serve and dev, before any I/O, and
// reports all the invalid ones at once, each naming its setting (envErr:
// the environment's values parse could not read). It normalises the issuer
// (oauth.NormalizeIssuer) and keeps what is wrong but not invalid as
// startup warnings (c.warnings; serve logs them).
func (c *config) validate(ctx context.Context, getenv func(string) string, envErr error) error {
	var errs problems
	errs.add(envErr)
	if len(c.Secret) < 32 {
		errs.addf("AUTHD_SECRET: must be at least 32 bytes (got %d); generate one with: openssl rand -base64 48", len(c.Secret))
	}
	switch {
	case c.DatabaseURL == "":
		errs.addf("AUTHD_DATABASE_URL: required: a postgres:// URL, or \"memory\" for a throwaway single node (authd dev uses memory)")
	case c.DatabaseURL == "memory":
	case !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://"):
		errs.addf("AUTHD_DATABASE_URL: must be a postgres:// URL or \"memory\"")
	default:
		if _, err := pgxpool.ParseConfig(c.DatabaseURL); err != nil {
			errs.addf("AUTHD_DATABASE_URL: %s", firstLine(err))
		}
	}
	if _, port, err := net.SplitHostPort(c.Addr); err != nil {
		errs.addf("AUTHD_ADDR (-addr): %q must be host:port, e.g. 127.0.0.1:8080 (or :8080 in a container)", c.Addr)
	} else if n, err := strconv.ParseUint(port, 10, 64); err == nil && n > 65535 {
		errs.addf("AUTHD_ADDR (-addr): %q: the port must be at most 65535", c.Addr)
	}
	if c.Issuer != "" {
		if n := oauth.NormalizeIssuer(c.Issuer); n != c.Issuer {
			c.warn("AUTHD_ISSUER: trailing slash removed; the issuer is the URL without it", "given", c.Issuer, "issuer", n)
			c.Issuer = n
		}
		if u, err := url.Parse(c.Issuer); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.RawQuery != "" || u.Fragment != "" {
			errs.addf("AUTHD_ISSUER: %q must be an absolute https:// (or http:// for local use) URL without query or fragment (RFC 8414 §2)", c.Issuer)
		}
	}
	if c.RedisURL != "" && c.RedisURL != "memory" {
		if !strings.HasPrefix(c.RedisURL, "redis://") && !strings.HasPrefix(c.RedisURL, "rediss://") {
			errs.addf("AUTHD_REDIS_URL: must be a redis:// or rediss:// URL or \"memory\"")
		} else if _, err := parseRedisURL(c.RedisURL); err != nil {
			errs.addf("AUTHD_REDIS_URL: %v", err)
		}
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"AUTHD_CODE_TTL", c.CodeTTL}, {"AUTHD_ACCESS_TOKEN_TTL", c.AccessTokenTTL}, {"AUTHD_REFRESH_TOKEN_TTL", c.RefreshTokenTTL}} {
		if d.d < time.Second {
			errs.addf("%s: must be at least 1s (got %s)", d.name, d.d)
		}
	}
	if c.TokenRateLimit < 0 {
		errs.addf("AUTHD_TOKEN_RATE_LIMIT: must not be negative (got %g); 0 disables", c.TokenRateLimit)
	}
	if c.SignInRateLimit < 0 {
		errs.addf("AUTHD_SIGNIN_RATE_LIMIT: must not be negative (got %g); 0 disables", c.SignInRateLimit)
	}
	if c.DPoPNonce != "" && c.DPoPNonce != "on" && c.DPoPNonce != "off" {
		errs.addf("AUTHD_DPOP_NONCE: must be on or off (got %q)", c.DPoPNonce)
	}
	if c.AuthSessionTTL < 10*time.Second || c.AuthSessionTTL > time.Hour {
		errs.addf("AUTHD_AUTH_SESSION_TTL: must be between 10s and 1h (got %s)", c.AuthSessionTTL)
	}
	if c.ReplayWindow < 0 {
		errs.addf("AUTHD_REPLAY_WINDOW: must not be negative (got %s); 0 disables", c.ReplayWindow)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs.add(err)
	}
	errs.add(c.people.validate())
	errs.add(c.keys.validate())
	errs.add(c.backchannel.validate())
	if u, err := url.Parse(c.Issuer); c.Issuer == "" || (err == nil && u.Host != "") { // else AUTHD_ISSUER's error says it
		if _, err := c.passkeys.relyingParty(c.Issuer, c.Addr); err != nil {
			errs.add(err)
		}
	}
	errs.add(c.jobs.validate())
	errs.add(c.perf.validate())
	errs.add(c.ops.validate(getenv))
	errs.add(c.accounts.validate(c.DatabaseURL))
	c.warnings = append(c.warnings, unknownSettings(envNamesFrom(ctx))...)
	return errs.err()
}

// warn keeps a startup warning for serve to log.
func (c *config) warn(msg string, args ...any) {
	c.warnings = append(c.warnings, warning{msg: msg, args: args})
}

// oauthConfig maps the CLI settings to the server's.
func (c *config) oauthConfig() oauth.Config {
	oc := oauth.Config{
		Issuer:            c.Issuer,
		Secret:            []byte(c.Secret),
		AuthorizeCodeTTL:  c.CodeTTL,
		AccessTokenTTL:    c.AccessTokenTTL,
		RefreshTokenTTL:   c.RefreshTokenTTL,
		ReplayWindow:      c.ReplayWindow,
		AuthSessionTTL:    c.AuthSessionTTL,
		TokenLimits:       oauth.TokenLimits{PerSecond: c.TokenRateLimit},
		MethodRouteLimits: oauth.TokenLimits{PerSecond: c.SignInRateLimit, Burst: int(10 * c.SignInRateLimit)},
		DemoVerifier:      c.demoVerifier,
		RequirePAR:        c.RequirePAR,
		PKCERows:          c.PKCERows,
	}
	c.people.apply(&oc)
	c.keys.apply(&oc)
	if c.SignInRateLimit == 0 {
		oc.MethodRouteLimits.PerSecond = -1 // off (oauth's zero value is its default)
	}
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
