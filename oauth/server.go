package oauth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/ory/fosite"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/dpop"
	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/password"
	"github.com/authd/authd/revocation"
	"github.com/authd/authd/signing"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/web/templates"
)

// Server is authd's HTTP front: OAuth endpoints, login and consent pages,
// health and metrics. Create it with New; it is safe for concurrent use.
type Server struct {
	cfg      Config
	store    storage.Store
	cache    exchangecache.Cache
	log      *slog.Logger
	access   *slog.Logger // the request log (Deps.AccessLog)
	now      func() time.Time
	provider *provider
	hasher   *SecretHasher
	cookies  *cookieCodec
	people   *identity.Service
	scopes   scopeWords
	pages    *templates.Pages
	metrics  *metrics
	handler  http.Handler

	// The token pipeline (token.go): client authentication, the grants,
	// and the exchanger (the replay cache around fosite and the durable
	// replay record).
	clientAuth    *clientAuthenticator
	revoker       revocation.Store // every revocation goes through it
	grants        map[string]grant
	exchanger     exchanger
	authFailLimit *failureLimiter

	// dpopToken verifies DPoP proofs at the token endpoint (nonces as
	// configured), dpopResource at UserInfo (no nonce, RFC 9449 §7).
	dpopToken    *dpop.Verifier
	dpopResource *dpop.Verifier

	// keys signs ID tokens and serves the JWKS (package signing).
	keys *signing.Manager

	loginLimit  *loginLimiter
	clientLimit *clientLimiter
	adminTokens adminTokens // for introspection
	admin       AdminAPI    // under /admin/ (MountAdmin); nil: none
}

// New validates cfg, applies defaults and builds a Server.
// It returns an error naming the first invalid setting.
func New(cfg Config, deps Deps) (*Server, error) {
	cfg.applyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Store == nil {
		return nil, fmt.Errorf("oauth: Deps.Store is required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.AccessLog == nil {
		deps.AccessLog = deps.Logger
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if cfg.ClientCacheTTL > 0 {
		deps.Store = storage.NewCachingStore(deps.Store, cfg.ClientCacheTTL)
	}
	iss, _ := url.Parse(cfg.Issuer)
	s := &Server{
		cfg:     cfg,
		store:   deps.Store,
		cache:   deps.Cache,
		log:     deps.Logger,
		access:  deps.AccessLog,
		now:     deps.Now,
		hasher:  NewSecretHasher(cfg.Secret),
		cookies: newCookieCodec(cfg.Secret, iss.Scheme == "https"),
		scopes:  newScopeWords(cfg.ScopeDescriptions),
		pages:   templates.Parse(),
		metrics: newMetrics(),
	}
	cache := deps.Cache
	if cfg.DisableReplay {
		cache = nil
	}
	// Every path that ends a grant (revocation, reuse, client deletion,
	// user lifecycle, consent withdrawn) goes through revocation.Store,
	// which also drops the replay cache entries of what it revoked.
	revoking := revocation.Store{Store: deps.Store, Cache: cache, OnError: func(err error) {
		s.metrics.replay.WithLabelValues("fail_open").Inc()
		s.log.Warn("replay cache entry of a revoked grant not dropped; it expires with the replay window", "error", err)
	}}
	if deps.Passwords == nil {
		deps.Passwords = password.New(password.Options{Concurrency: cfg.PasswordHashConcurrency})
	}
	s.metrics.watchPasswords(deps.Passwords)
	s.people = identity.New(revoking, identity.Options{
		SessionTTL: cfg.SessionTTL, SessionIdleTTL: cfg.SessionIdleTTL, Now: deps.Now,
		Passwords: deps.Passwords, Logger: deps.Logger,
	})
	s.revoker = revoking
	keys, err := signing.New(deps.Store, signing.Config{
		Secret: cfg.Secret, RotateEvery: cfg.KeyRotation, Prepublish: cfg.KeyPrepublish,
		TokenTTL: cfg.IDTokenTTL, Now: deps.Now, Logger: deps.Logger,
	})
	if err != nil {
		return nil, err
	}
	s.keys = keys
	// First start: generate the signing keys now, outside any exchange
	// (serve also calls Ensure, and fails if it cannot). If the store is
	// unreachable here, the first exchange that needs a key creates it.
	ectx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := keys.Ensure(ectx); err != nil {
		deps.Logger.Warn("signing keys not loaded at start; retried on first use", "error", err)
	}
	cancel()
	if deps.DPoPReplay == nil {
		deps.DPoPReplay = dpop.NewMemory()
	}
	dpopStoreError := func(err error) {
		s.metrics.dpopReplayFailOpen.Inc()
		s.log.Warn("DPoP jti store unavailable; proof accepted within its iat window (fail open)", "error", err)
	}
	var nonces *dpop.Nonces
	if cfg.DPoPNonce == DPoPNonceOn {
		nonces = dpop.NewNonces(cfg.Secret, 0, deps.Now)
	}
	s.dpopToken = dpop.NewVerifier(dpop.Options{Now: deps.Now, Nonces: nonces, Replay: deps.DPoPReplay, OnStoreError: dpopStoreError})
	s.dpopResource = dpop.NewVerifier(dpop.Options{Now: deps.Now, Replay: deps.DPoPReplay, OnStoreError: dpopStoreError})
	s.clientAuth = &clientAuthenticator{clients: deps.Store, hasher: s.hasher}
	s.provider = newProvider(cfg, revoking, s.clientAuth)
	s.grants = s.provider.grants()
	sealKey := deriveKey(cfg.Secret, "replay-cache")
	window := cfg.ReplayWindow
	if cfg.DisableReplay {
		window = 0
	}
	s.exchanger = &grantExchanger{provider: s.provider, store: revoking, sealKey: sealKey,
		window: window, now: deps.Now, log: deps.Logger, afterCommit: deps.AfterExchangeCommit,
		keys: keys, issuer: cfg.Issuer, idTokenTTL: cfg.IDTokenTTL, users: deps.Store}
	if cache != nil {
		s.exchanger = &replayCache{next: s.exchanger, cache: cache, sealKey: sealKey,
			waitLimit: cfg.ReplayWaitTimeout, now: deps.Now, metrics: s.metrics, log: deps.Logger}
	}
	s.loginLimit = newLoginLimiter(cfg.LoginLimits, deps.Now)
	s.clientLimit = newClientLimiter(cfg.TokenLimits)
	s.authFailLimit = newFailureLimiter(cfg.AuthFailureLimits.PerSecond, cfg.AuthFailureLimits.Burst)
	s.adminTokens = newAdminTokens(cfg.Secret, cfg.AdminTokens)
	s.handler = s.routes()
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Registry returns the Prometheus registry holding the server's metrics.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.registry }

// Keys returns the ID token signing keys: serve runs their rotation job
// (Keys().Kind()) and `authd keys` lists and rotates them.
func (s *Server) Keys() *signing.Manager { return s.keys }

// Hasher returns the client-secret hasher, for registering clients.
func (s *Server) Hasher() fosite.Hasher { return s.hasher }
