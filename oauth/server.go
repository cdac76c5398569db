package oauth

import (
	"errors"
	"github.com/authd/authd/authsession"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/ory/fosite"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/dpop"
	"github.com/authd/authd/federation"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/limits"
	"github.com/authd/authd/secevent"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/signing"
	"github.com/authd/authd/web/templates"
)

// Server is authd's HTTP front: OAuth endpoints, login and consent pages,
// health and metrics. Create it with New; it is safe for concurrent use.
type Server struct {
	cfg      Config
	store    Store
	log      *slog.Logger
	access   *slog.Logger // the request log (Deps.AccessLog)
	now      func() time.Time
	provider *provider
	hasher   *SecretHasher
	cookies  *cookieCodec
	people   *identity.Service
	scopes   scopeWords
	pages    *templates.Pages
	metrics  *Metrics
	security *secevent.Recorder // security events (log line and metric)
	handler  http.Handler

	// The token pipeline (token.go): client authentication, the grants,
	// and the exchanger (the replay cache around fosite and the durable
	// replay record).
	clientAuth *clientAuthenticator
	revoker    Store // every revocation goes through it (Deps.Store)
	grants     map[string]grant
	exchanger  exchanger

	// The challenge endpoint (challenge.go): its exchanger (the replay
	// cache around the steps), the key of its replay identities, and the
	// auth sessions.
	challenger   exchanger
	challengeKey []byte
	authSessions *authsession.Service

	// dpopToken verifies DPoP proofs at the token endpoint (nonces as
	// configured), dpopResource at UserInfo (no nonce, RFC 9449 §7).
	dpopToken    *dpop.Verifier
	dpopResource *dpop.Verifier

	// keys signs ID tokens and serves the JWKS (package signing).
	keys *signing.Manager

	methods     methodSet       // the sign-in methods (signin.go)
	factors     []signin.Factor // second factors (factor.go)
	mfa         MFA             // the authenticator app's set-up (factor.go); nil: none
	limits      *limits.Limiter // abuse budgets (Deps.Limits)
	devices     deviceCodec     // browsers that signed in as a username before
	adminTokens adminTokens     // for introspection
	admin       AdminAPI        // under /admin/ (MountAdmin); nil: none
	passkeys    Passkeys        // the account page's passkeys (MountPasskeys); nil: none
	// accounts are the self-service pages (MountAccounts); nil: none.
	accounts   AccountPages
	federation *federation.Registry // upstream providers (Deps.Federation); nil: none
}

// New validates cfg, applies defaults and assembles a Server from the
// services in deps. It does no I/O. It returns an error naming the first
// invalid setting or missing collaborator.
func New(cfg Config, deps Deps) (*Server, error) {
	cfg.applyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case deps.Store == nil:
		return nil, errors.New("oauth: Deps.Store is required")
	case deps.People == nil:
		return nil, errors.New("oauth: Deps.People is required")
	case deps.Keys == nil:
		return nil, errors.New("oauth: Deps.Keys is required")
	case deps.DPoP.Token == nil || deps.DPoP.Resource == nil:
		return nil, errors.New("oauth: Deps.DPoP.Token and Deps.DPoP.Resource are required")
	}
	methods, err := newMethodSet(deps.Methods)
	if err != nil {
		return nil, err
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
	if deps.Metrics == nil {
		deps.Metrics = NewMetrics()
	}
	iss, _ := url.Parse(cfg.Issuer)
	s := &Server{
		cfg:          cfg,
		store:        deps.Store,
		revoker:      deps.Store,
		log:          deps.Logger,
		access:       deps.AccessLog,
		now:          deps.Now,
		hasher:       NewSecretHasher(cfg.Secret),
		cookies:      newCookieCodec(cfg.Secret, iss.Scheme == "https"),
		devices:      newDeviceCodec(cfg.Secret, iss.Scheme == "https"),
		people:       deps.People,
		scopes:       newScopeWords(cfg.ScopeDescriptions),
		pages:        templates.Parse(),
		metrics:      deps.Metrics,
		dpopToken:    deps.DPoP.Token,
		dpopResource: deps.DPoP.Resource,
		keys:         deps.Keys,
		methods:      methods,
		factors:      deps.Factors,
		mfa:          deps.MFA,
	}
	s.security = s.metrics.SecurityEvents(deps.Logger)
	if deps.Passwords != nil {
		s.metrics.watchPasswords(deps.Passwords)
	}
	s.clientAuth = &clientAuthenticator{clients: deps.Store, hasher: s.hasher}
	s.provider = newProvider(cfg, deps.Store, s.clientAuth, deps.Now)
	s.grants = s.provider.grants()
	s.enableTokenExchange(deps.Federation)
	sealKey := deriveKey(cfg.Secret, "replay-cache")
	window := cfg.ReplayWindow
	if cfg.DisableReplay {
		window = 0
	}
	s.exchanger = &grantExchanger{provider: s.provider, store: deps.Store, sealKey: sealKey,
		window: window, now: deps.Now, log: deps.Logger, afterCommit: deps.AfterExchangeCommit,
		keys: deps.Keys, issuer: cfg.Issuer, idTokenTTL: cfg.IDTokenTTL, users: deps.Store, security: s.security}
	if deps.Cache != nil && !cfg.DisableReplay {
		s.exchanger = &replayCache{next: s.exchanger, cache: deps.Cache, sealKey: sealKey,
			waitLimit: cfg.ReplayWaitTimeout, now: deps.Now, metrics: s.metrics, log: deps.Logger}
	}
	s.challengeKey = deriveKey(cfg.Secret, "challenge-step")
	s.authSessions = authsession.New(deps.Store, authsession.Options{TTL: cfg.AuthSessionTTL, Now: deps.Now})
	s.challenger = challengeSteps{s: s}
	if deps.Cache != nil && !cfg.DisableReplay {
		s.challenger = &replayCache{next: s.challenger, cache: deps.Cache, sealKey: sealKey,
			waitLimit: cfg.ReplayWaitTimeout, now: deps.Now, metrics: s.metrics, log: deps.Logger}
	}
	s.limits = deps.Limits
	if s.limits == nil {
		s.limits = limits.New(limits.Options{Now: deps.Now, Logger: deps.Logger})
	}
	s.adminTokens = newAdminTokens(cfg.Secret, cfg.AdminTokens)
	s.handler = s.routes()
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Registry returns the Prometheus registry holding the server's metrics.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.registry }

// Hasher returns the client-secret hasher, for registering clients.
func (s *Server) Hasher() fosite.Hasher { return s.hasher }
