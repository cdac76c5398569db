package oauth

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/authd/authd/dpop"
	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/federation"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/limits"
	"github.com/authd/authd/password"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/signin/pwd"
	"github.com/authd/authd/signing"
)

// LoginLimits configures how failed sign-ins are slowed down (the password
// method's back-off, pwd.Limits); the name is kept for Config.LoginLimits.
type LoginLimits = pwd.Limits

// Config holds the server's settings. Durations are time.Duration values;
// zero values are replaced by the defaults documented on each field.
type Config struct {
	// Issuer is the authorization server's issuer identifier (RFC 8414 §2),
	// an https URL (or http for loopback/dev) without query or fragment.
	// A trailing slash is removed (NormalizeIssuer). It is sent as "iss"
	// on every authorization response (RFC 9207).
	Issuer string
	// Secret is the system secret, at least 32 bytes. Token and code HMAC
	// keys, cookie keys, client secret hashing keys and the replay cache's
	// sealing keys are all derived from it with HKDF.
	Secret []byte
	// AuthorizeCodeTTL is the lifetime of an authorization code (default 60s;
	// RFC 6749 §4.1.2 recommends at most 10 minutes).
	AuthorizeCodeTTL time.Duration
	// AccessTokenTTL is the access token lifetime (default 1h).
	AccessTokenTTL time.Duration
	// AuthSessionTTL is the lifetime of an auth_session of the
	// authorization challenge endpoint (AUTHD_AUTH_SESSION_TTL, default
	// 5m; package authsession).
	AuthSessionTTL time.Duration
	// RefreshTokenTTL is the refresh token lifetime (default 720h).
	RefreshTokenTTL time.Duration
	// ReplayWindow is how long a completed token exchange can be replayed
	// with identical parameters (default 30s). A negative value disables
	// the replay cache; use DisableReplay for clarity.
	ReplayWindow time.Duration
	// DisableReplay turns the replay cache off: duplicates get invalid_grant.
	DisableReplay bool
	// ReplayWaitTimeout bounds how long a duplicate waits in the replay
	// cache for an exchange still in flight (default 2s); after it,
	// PostgreSQL answers (the replay record, or the row lock of a
	// redemption still running).
	ReplayWaitTimeout time.Duration
	// SessionTTL is the absolute lifetime of a browser sign-in session
	// (default 12h); SessionIdleTTL ends one unused for that long (default
	// 2h, at most SessionTTL). Sessions are server-side rows (package
	// identity); the cookie holds only a random reference.
	SessionTTL     time.Duration
	SessionIdleTTL time.Duration
	// SilentSSO decides when an existing session plus a remembered consent
	// (or skip_consent) gives a code with no interaction (RFC 8252 §8.6):
	// "assured" (the default) only where the client's identity is assured,
	// i.e. a confidential client or an https redirect_uri; "never" always
	// shows the one-tap "Continue as …" page. A public client with a
	// private-use-scheme or loopback redirect always gets the one-tap page.
	SilentSSO string
	// ScopeDescriptions name scopes in words on the consent page, e.g.
	// {"orders.read": "See your orders"}; they add to and override the
	// built-in ones (openid, offline_access, profile, email).
	ScopeDescriptions map[string]string
	// AllowPlainPKCE enables code_challenge_method=plain (default off,
	// RFC 9700 §2.1.1 recommends S256).
	AllowPlainPKCE bool
	// AdminTokens are bearer tokens accepted by admin-only endpoints:
	// introspection by an operator here, and /admin/… (cmd/authd hands
	// them to the admin API). Compared in constant time.
	AdminTokens []string
	// IdempotencyKeyTTL is how long the admin API keeps an Idempotency-Key
	// and its stored response (default 24h). The server does not use it:
	// cmd/authd hands it to the admin API (package adminapi).
	IdempotencyKeyTTL time.Duration
	// LoginLimits slows down failed sign-ins per username and client IP.
	// The server does not use it: the password method (package
	// signin/pwd) does, which cmd/authd builds with it.
	LoginLimits LoginLimits
	// TokenLimits rate-limits the token endpoint per authenticated
	// client_id (zero value: off).
	TokenLimits TokenLimits
	// AuthFailureLimits bounds failed client authentications at the token
	// endpoint per source address (default 20/s, burst 100); PerSecond < 0
	// turns it off.
	AuthFailureLimits TokenLimits
	// IDTokenTTL is the ID token lifetime (default 1h; OpenID Connect
	// Core §2 "exp"). It must match the signing keys' TokenTTL
	// (Deps.Keys), which keeps a retired key published that long.
	IDTokenTTL time.Duration
	// RequirePAR makes every authorization request come by PAR (RFC 9126
	// §6, require_pushed_authorization_requests for the whole server); a
	// client can also require it for itself (client metadata).
	RequirePAR bool
	// PARLimits bounds pushes per client and per source address.
	PARLimits PARLimits
	// MethodRouteLimits bounds requests to the sign-in methods' own routes
	// (/signin/NAME/…: passkey options, a provider sign-in's start and
	// callback) per source address: each may write a single-use ceremony
	// or state row (default 10/s, burst 100); PerSecond < 0 turns it off.
	MethodRouteLimits TokenLimits
	// FactorLimits bound second-factor attempts (factor.go).
	FactorLimits FactorLimits
	// PKCERows also writes each code's PKCE session (RFC 7636 §4.4) to
	// the PKCE session table, where authd before 2026-12 looked for it;
	// this version keeps it in the code's own row (fositeStore). Set it
	// while such versions still serve the same database (a rolling
	// upgrade), then unset it. Codes issued by those versions are
	// redeemed here either way.
	PKCERows bool
	// DemoVerifier, when set ("authd dev"), enables /demo/callback: a page
	// for the demo client showing the code and a ready token request that
	// uses this code_verifier. Never set it in production.
	DemoVerifier string
}

// Deps are the collaborators of a Server. The caller (cmd/authd) builds
// them once: the store and its decorators (backend → client cache →
// revocation), the identity service, the signing keys (loaded or created
// first), the DPoP verifiers. New assembles them and does no I/O.
type Deps struct {
	// Store is the storage the server calls (Store); required. authd serve
	// passes the backend behind storage.CachingStore (clients cached for
	// AUTHD_CLIENT_CACHE_TTL) and revocation.Store (every revocation also
	// drops its replay cache entries).
	Store Store
	// People is the identity service (users, sessions, consent), on the
	// same store; required. Its session lifetimes are
	// Config.SessionTTL and Config.SessionIdleTTL.
	People *identity.Service
	// Keys signs ID tokens and serves the JWKS (package signing); required.
	// The caller loads or creates them first (Keys.Ensure); a key still
	// missing at the first exchange that needs one is created then.
	Keys *signing.Manager
	// DPoP verifies DPoP proofs (RFC 9449); both verifiers are required.
	DPoP DPoPVerifiers
	// Metrics are the server's metrics (NewMetrics), the ones the services
	// above count into; nil: New makes its own.
	Metrics *Metrics
	// Limits keeps the abuse budgets, shared by every replica when it has
	// a Redis; nil keeps them in this process.
	Limits *limits.Limiter
	// Cache is the exchange replay cache; nil disables replay.
	Cache exchangecache.Cache
	// Logger receives audit and error logs; default slog.Default().
	Logger *slog.Logger
	// AccessLog receives the line logged for every HTTP request (its
	// route, status and latency); default Logger. authd serve buffers it
	// for up to 100 ms (one system call per request less).
	AccessLog *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Passwords is People's password hasher (package password), whose
	// slots the metrics show (authd_password_hash*); nil shows none.
	Passwords *password.Hasher
	// Methods are the sign-in methods, in the order the login page shows
	// them (package signin; cmd/authd lists signin/pwd); at least one.
	// A login form names its method in the "method" field; one that names
	// none is "password".
	Methods []signin.Method
	// Factors are the second factors (package signin; cmd/authd lists
	// signin/otp) and MFA the authenticator app's set-up (package totp);
	// none: no second factor is asked.
	Factors []signin.Factor
	MFA     MFA
	// AfterExchangeCommit, when set, runs right after an exchange's
	// transaction commits, before the replay cache is written or the
	// answer sent. It exists for crash tests (cmd/authd built with the
	// authd_faults tag kills itself there); leave it nil.
	AfterExchangeCommit func()
	// Federation is the live set of upstream providers (package
	// federation): the native token exchange (RFC 8693) and the login
	// page's provider buttons; nil offers neither.
	Federation *federation.Registry
}

// DPoPVerifiers are the server's DPoP proof verifiers (package dpop), on
// one jti store.
type DPoPVerifiers struct {
	// Token verifies proofs at the token and PAR endpoints. With server
	// nonces (dpop.Options.Nonces, AUTHD_DPOP_NONCE=on), a client's first
	// DPoP request gets use_dpop_nonce and a DPoP-Nonce header (RFC 9449
	// §8), checked before the grant, so it never consumes a code or
	// rotates a refresh token.
	Token *dpop.Verifier
	// Resource verifies proofs at UserInfo: no nonce (RFC 9449 §7).
	Resource *dpop.Verifier
}

const (
	minSecretLen = 32
)

func (c *Config) applyDefaults() {
	c.Issuer = NormalizeIssuer(c.Issuer)
	if c.AuthorizeCodeTTL == 0 {
		c.AuthorizeCodeTTL = 60 * time.Second
	}
	if c.AccessTokenTTL == 0 {
		c.AccessTokenTTL = time.Hour
	}
	if c.AuthSessionTTL == 0 {
		c.AuthSessionTTL = 5 * time.Minute
	}
	if c.RefreshTokenTTL == 0 {
		c.RefreshTokenTTL = 720 * time.Hour
	}
	if c.ReplayWindow == 0 {
		c.ReplayWindow = 30 * time.Second
	}
	if c.ReplayWindow < 0 {
		c.DisableReplay = true
	}
	c.PARLimits.applyDefaults()
	c.FactorLimits.applyDefaults()
	if c.AuthFailureLimits.PerSecond == 0 {
		c.AuthFailureLimits = TokenLimits{PerSecond: 20, Burst: 100}
	}
	if c.MethodRouteLimits.PerSecond == 0 {
		c.MethodRouteLimits = TokenLimits{PerSecond: 10, Burst: 100}
	}
	if c.ReplayWaitTimeout == 0 {
		c.ReplayWaitTimeout = 2 * time.Second
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = 12 * time.Hour
	}
	if c.SessionIdleTTL == 0 {
		c.SessionIdleTTL = min(identity.DefaultSessionIdleTTL, c.SessionTTL)
	}
	if c.SilentSSO == "" {
		c.SilentSSO = SilentSSOAssured
	}
	if c.IDTokenTTL == 0 {
		c.IDTokenTTL = time.Hour
	}
	if c.IdempotencyKeyTTL == 0 {
		c.IdempotencyKeyTTL = 24 * time.Hour
	}
}

// Validate reports the first invalid setting, naming it.
func (c *Config) Validate() error {
	if len(c.Secret) < minSecretLen {
		return fmt.Errorf("secret: must be at least %d bytes, got %d", minSecretLen, len(c.Secret))
	}
	u, err := url.Parse(c.Issuer)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("issuer: %q is not an absolute http(s) URL", c.Issuer)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		// RFC 8414 §2: the issuer has no query or fragment components.
		return errors.New("issuer: must not contain a query or fragment")
	}
	for name, d := range map[string]time.Duration{
		"code TTL": c.AuthorizeCodeTTL, "access token TTL": c.AccessTokenTTL, "refresh token TTL": c.RefreshTokenTTL,
	} {
		if d < time.Second {
			return fmt.Errorf("%s: must be at least 1s, got %s", name, d)
		}
	}
	if c.SessionTTL < time.Minute || c.SessionIdleTTL < time.Minute {
		return fmt.Errorf("session TTL: the session lifetimes must be at least 1m, got %s and idle %s", c.SessionTTL, c.SessionIdleTTL)
	}
	if c.SessionIdleTTL > c.SessionTTL {
		return fmt.Errorf("session idle TTL: %s is longer than the session TTL %s", c.SessionIdleTTL, c.SessionTTL)
	}
	if c.IDTokenTTL < time.Second {
		return fmt.Errorf("ID token TTL: must be at least 1s, got %s", c.IDTokenTTL)
	}
	if c.AuthSessionTTL < 10*time.Second || c.AuthSessionTTL > time.Hour {
		// Long enough to type a code, short enough that a stolen handle
		// ages out (draft-ietf-oauth-first-party-apps-04 §9).
		return fmt.Errorf("auth session TTL: must be between 10s and 1h, got %s", c.AuthSessionTTL)
	}
	if c.SilentSSO != SilentSSOAssured && c.SilentSSO != SilentSSONever {
		return fmt.Errorf("silent SSO: %q is not %q or %q", c.SilentSSO, SilentSSOAssured, SilentSSONever)
	}
	return nil
}

// NormalizeIssuer is the one normalisation of an issuer identifier: a
// trailing slash is removed, so that "https://login.example.com/" and
// "https://login.example.com" are one issuer and the endpoint URLs built
// from it (issuer + "/oauth2/token") have one slash. RFC 8414 §3 and
// OpenID Connect Discovery §4 append the well-known path to the issuer
// the same way.
func NormalizeIssuer(issuer string) string { return strings.TrimRight(issuer, "/") }

// SilentSSO values (Config.SilentSSO).
const (
	SilentSSOAssured = "assured"
	SilentSSONever   = "never"
)
