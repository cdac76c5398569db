package federation

import (
	"context"
	"crypto/cipher"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/secrets"
	"github.com/authd/authd/storage"
)

// RegistryStore is what the registry reads.
type RegistryStore interface {
	ProvidersVersion(ctx context.Context) (string, error)
	ListProviders(ctx context.Context, after string, limit int) ([]*storage.Provider, error)
}

// PollInterval is how often a replica checks whether providers changed:
// a provider added, changed or deleted anywhere is in effect on every
// replica within it (plus one query).
const PollInterval = 5 * time.Second

// metadataTTL is how long a provider's discovery document is kept.
const metadataTTL = time.Hour

// Registry is the live set of providers of one replica: reloaded when the
// stored set changes (checked at most every PollInterval, on use), each
// with its discovery document and JWKS cached.
type Registry struct {
	store  RegistryStore
	seal   cipher.AEAD
	client *http.Client
	now    func() time.Time
	log    *slog.Logger

	count *prometheus.CounterVec

	mu        sync.Mutex
	checked   time.Time
	version   string
	providers map[string]*Provider
}

// RegistryConfig configures a Registry.
type RegistryConfig struct {
	Secret []byte
	Store  RegistryStore
	// HTTPClient fetches discovery documents and JWKS; nil is a client
	// with a 10 s timeout.
	HTTPClient *http.Client
	Now        func() time.Time
	Logger     *slog.Logger
}

// NewRegistry returns a registry; it reads nothing until first used.
func NewRegistry(cfg RegistryConfig) *Registry {
	r := &Registry{store: cfg.Store, seal: secrets.NewAEAD(cfg.Secret, sealPurpose), client: cfg.HTTPClient,
		now: cfg.Now, log: cfg.Logger, providers: map[string]*Provider{}}
	r.count = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "authd_federation_total",
		Help: "Sign-ins through upstream providers by provider (its id), path (browser, native) and result (ok, or a short failure reason).",
	}, []string{"provider", "path", "result"})
	if r.client == nil {
		r.client = &http.Client{Timeout: 10 * time.Second}
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r
}

// Collector is authd_federation_total, for the server's registry.
func (r *Registry) Collector() prometheus.Collector { return r.count }

// Count counts one sign-in attempt.
func (r *Registry) Count(provider, path, result string) {
	r.count.WithLabelValues(provider, path, result).Inc()
}

// Provider is a live provider: its registration (secret opened) with
// its cached discovery document and keys.
type Provider struct {
	storage.Provider
	// Secret is the client secret, or Apple's private key PEM.
	Secret string

	client *http.Client
	now    func() time.Time
	keys   *keySet

	mu     sync.Mutex
	meta   *Metadata
	metaAt time.Time
}

// ErrNoProvider: no provider with this id (or issuer).
var ErrNoProvider = errors.New("federation: no such provider")

// Get returns the live provider id.
func (r *Registry) Get(ctx context.Context, id string) (*Provider, error) {
	if err := r.refresh(ctx); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.providers[id]
	if !ok {
		return nil, ErrNoProvider
	}
	return p, nil
}

// List returns the live providers by id.
func (r *Registry) List(ctx context.Context) ([]*Provider, error) {
	if err := r.refresh(ctx); err != nil {
		return nil, err
	}
	r.mu.Lock()
	out := make([]*Provider, 0, len(r.providers))
	for _, p := range r.providers {
		out = append(out, p)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ByIssuer returns the live providers with this issuer.
func (r *Registry) ByIssuer(ctx context.Context, issuer string) ([]*Provider, error) {
	all, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Provider
	for _, p := range all {
		if p.Issuer == issuer {
			out = append(out, p)
		}
	}
	return out, nil
}

// refresh reloads the providers when their version changed, checking at
// most every PollInterval. A failed check keeps the set it has (and says
// so) unless it has never loaded one.
func (r *Registry) refresh(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.checked.IsZero() && r.now().Sub(r.checked) < PollInterval {
		return nil
	}
	v, err := r.store.ProvidersVersion(ctx)
	if err == nil && v == r.version && !r.checked.IsZero() {
		r.checked = r.now()
		return nil
	}
	var list []*storage.Provider
	if err == nil {
		list, err = r.store.ListProviders(ctx, "", 0)
	}
	if err != nil {
		if r.checked.IsZero() {
			return fmt.Errorf("federation: load providers: %w", err)
		}
		r.log.Warn("federation: providers not reloaded; keeping the last set", "error", err)
		return nil
	}
	next := make(map[string]*Provider, len(list))
	for _, sp := range list {
		if old, ok := r.providers[sp.ID]; ok && old.UpdatedAt.Equal(sp.UpdatedAt) && old.Issuer == sp.Issuer {
			next[sp.ID] = old // keeps its cached metadata and keys
			continue
		}
		p := &Provider{Provider: *sp, client: r.client, now: r.now}
		if len(sp.Sealed) > 0 {
			if p.Secret, err = openSecret(r.seal, sp.ID, sp.Sealed); err != nil {
				r.log.Error("federation: provider secret", "provider", sp.ID, "error", err)
			}
		}
		p.Sealed = nil
		next[sp.ID] = p
	}
	r.providers, r.version, r.checked = next, v, r.now()
	return nil
}

// Metadata returns the provider's discovery document, cached.
func (p *Provider) Metadata(ctx context.Context) (*Metadata, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.meta != nil && p.now().Sub(p.metaAt) < metadataTTL {
		return p.meta, nil
	}
	m, err := fetchMetadata(ctx, p.client, p.Issuer)
	if err != nil {
		if p.meta != nil {
			return p.meta, nil // a stale document beats none
		}
		return nil, err
	}
	p.meta, p.metaAt = m, p.now()
	if p.keys == nil || p.keys.uri != m.JWKSURI {
		p.keys = &keySet{uri: m.JWKSURI, client: p.client, now: p.now}
	}
	return m, nil
}

// keySet returns the provider's key set (loading the metadata first).
func (p *Provider) keySet(ctx context.Context) (*keySet, error) {
	if _, err := p.Metadata(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys, nil
}

// JWKSFetches is how many times the provider's JWKS was fetched (tests).
func (p *Provider) JWKSFetches() int {
	p.mu.Lock()
	k := p.keys
	p.mu.Unlock()
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fetches
}
