package oauth

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/ory/fosite"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/identity"
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
	now      func() time.Time
	provider *provider
	hasher   *SecretHasher
	cookies  *cookieCodec
	people   *identity.Service
	scopes   scopeWords
	pages    *templates.Pages
	metrics  *metrics
	replay   *replayer
	handler  http.Handler

	loginLimit  *loginLimiter
	clientLimit *clientLimiter
	admin       *Admin
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
		now:     deps.Now,
		hasher:  NewSecretHasher(cfg.Secret),
		cookies: newCookieCodec(cfg.Secret, iss.Scheme == "https"),
		people: identity.New(deps.Store, identity.Options{
			SessionTTL: cfg.SessionTTL, SessionIdleTTL: cfg.SessionIdleTTL, Now: deps.Now,
		}),
		scopes:  newScopeWords(cfg.ScopeDescriptions),
		pages:   templates.Parse(),
		metrics: newMetrics(),
	}
	s.provider = newProvider(cfg, deps.Store, s.hasher)
	s.loginLimit = newLoginLimiter(cfg.LoginLimits, deps.Now)
	s.clientLimit = newClientLimiter(cfg.TokenLimits)
	s.admin = newAdmin(cfg, Deps{Store: deps.Store, Logger: deps.Logger, Now: deps.Now})
	if deps.Cache != nil && !cfg.DisableReplay {
		s.replay = newReplayer(s, deps.Cache)
	}
	s.handler = s.routes()
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Registry returns the Prometheus registry holding the server's metrics.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.registry }

// Hasher returns the client-secret hasher, for registering clients.
func (s *Server) Hasher() fosite.Hasher { return s.hasher }
