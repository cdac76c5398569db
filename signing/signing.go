// Package signing keeps the keys authd signs ID tokens with (OpenID Connect
// Core §10.1): generated on first start, stored sealed under the system
// secret (storage.SigningKeyStore: PostgreSQL, or memory under dev), rotated
// by a leased job, published as a JWK Set (RFC 7517 §5).
//
// Keys come in generations, one RS256 key (OIDC Core §15.1: mandatory to
// implement) and one ES256 key each. A generation's life:
//
//   - created by a rotation (a conditional write: of N replicas rotating at
//     once, one adds the generation) and published in the JWKS at once;
//   - signing from Prepublish after its creation (the first generation at
//     once), so every relying party that honours the JWKS Cache-Control has
//     fetched it before the first token it signed can reach it;
//   - retired when the next generation starts signing, and still published
//     for TokenTTL + Grace after that, until every token it signed has
//     expired; then a rotation deletes it.
//
// Private keys are parsed once per process and cached; the key set is
// re-read from the store at most every Reload, so signing inside a token
// exchange does no I/O in the steady state.
package signing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/authd/authd/secrets"
	"github.com/authd/authd/storage"
)

// The JWS algorithms authd signs with (RFC 7518 §3.1).
const (
	RS256 = "RS256"
	ES256 = "ES256"
)

// Algs are the supported algorithms, RS256 (the default) first.
var Algs = []string{RS256, ES256}

// sealPresented is the "presented value" the sealing of private keys is
// bound to (secrets.Seal); the kid is the additional data.
const sealPresented = "authd/signing-key/v1"

// Config configures a Manager. Zero fields take the defaults named.
type Config struct {
	// Secret is the system secret (AUTHD_SECRET); required.
	Secret []byte
	// RotateEvery is the age at which the newest generation is replaced;
	// default 30 days.
	RotateEvery time.Duration
	// Prepublish is how long a new generation is published before it
	// signs; default 24 hours. JWKSMaxAge is kept below it.
	Prepublish time.Duration
	// TokenTTL is the longest lifetime of a token a key signs (the ID
	// token lifespan); default 1 hour.
	TokenTTL time.Duration
	// Grace covers clock skew between replicas and relying parties;
	// default 5 minutes.
	Grace time.Duration
	// Reload is how often the key set is re-read from the store; default
	// 1 minute, at most Prepublish/4.
	Reload time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
}

func (c *Config) applyDefaults() {
	if c.RotateEvery <= 0 {
		c.RotateEvery = 30 * 24 * time.Hour
	}
	if c.Prepublish <= 0 {
		c.Prepublish = 24 * time.Hour
	}
	if c.TokenTTL <= 0 {
		c.TokenTTL = time.Hour
	}
	if c.Grace <= 0 {
		c.Grace = 5 * time.Minute
	}
	if c.Reload <= 0 {
		c.Reload = time.Minute
	}
	c.Reload = min(c.Reload, c.Prepublish/4)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// JWKSMaxAge is the Cache-Control max-age of the JWKS: shorter than the
// overlap (Prepublish) by half, at most an hour, so a relying party caching
// the set as told always has a generation before it signs.
func (c Config) JWKSMaxAge() time.Duration {
	c.applyDefaults()
	return min(time.Hour, c.Prepublish/2)
}

// ErrNoKey is returned when there is no key to sign with (the store holds
// none: Ensure was not run).
var ErrNoKey = errors.New("signing: no signing key")

// Manager signs with, publishes and rotates the signing keys. It is safe
// for concurrent use.
type Manager struct {
	store storage.SigningKeyStore
	cfg   Config

	// loadMu serializes reloads; mu guards the fields below.
	loadMu   sync.Mutex
	mu       sync.Mutex
	parsed   map[string]*Key // by kid: private keys parsed once
	set      *keySet
	loadedAt time.Time
}

// Key is one parsed signing key.
type Key struct {
	storage.SigningKey
	signer jose.Signer
	public jose.JSONWebKey
	// private signs with another typ (SignType).
	private jose.JSONWebKey
}

// State is a key's place in its life, as of a keySet.
type State string

// Key states (the package doc).
const (
	StateNext    State = "next"    // published, not yet signing
	StateCurrent State = "current" // signing
	StateRetired State = "retired" // published until its tokens expire
	StateExpired State = "expired" // no longer published; deleted by the next rotation
)

// New returns a Manager on store.
func New(store storage.SigningKeyStore, cfg Config) (*Manager, error) {
	cfg.applyDefaults()
	if len(cfg.Secret) < secrets.MinLen {
		return nil, fmt.Errorf("signing: the system secret must be at least %d bytes", secrets.MinLen)
	}
	return &Manager{store: store, cfg: cfg, parsed: map[string]*Key{}}, nil
}

// Config returns the configuration with defaults applied.
func (m *Manager) Config() Config { return m.cfg }

// Ensure creates the first generation if the store holds no key (first
// start); replicas starting at once create one generation between them.
func (m *Manager) Ensure(ctx context.Context) error {
	keys, err := m.store.ListSigningKeys(ctx)
	if err != nil {
		return fmt.Errorf("signing: %w", err)
	}
	if len(keys) == 0 {
		gen, err := m.generate(1)
		if err != nil {
			return err
		}
		if _, err := m.store.AddSigningKeys(ctx, gen); err != nil {
			return fmt.Errorf("signing: %w", err)
		}
	}
	_, err = m.reload(ctx)
	return err
}

// Prepare makes sure the key set is loaded and fresh (re-reading it when
// older than Reload, creating the first generation if there is none), so
// that Sign does no I/O. Call it before a transaction whose commit depends
// on Sign: reading the keys while holding the transaction's connection
// could wait for a connection that the waiters on its row locks hold.
func (m *Manager) Prepare(ctx context.Context) error {
	_, err := m.current(ctx)
	return err
}

// Sign signs payload (JWT claims, JSON) as a compact JWS with the current
// key for alg. It never does I/O: it uses the set the last Prepare (or
// JWKS, List, Rotate) loaded, with states recomputed for now, and fails
// only if no set was ever loaded or it has no key for alg.
func (m *Manager) Sign(_ context.Context, alg string, payload []byte) (string, error) {
	k, err := m.loadedKey(alg)
	if err != nil {
		return "", err
	}
	jws, err := k.signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("signing: %w", err)
	}
	return jws.CompactSerialize()
}

// loadedKey is the current key for alg in the set the last Prepare (or
// JWKS, List, Rotate) loaded, with states recomputed for now: no I/O.
func (m *Manager) loadedKey(alg string) (*Key, error) {
	m.mu.Lock()
	set := m.set
	m.mu.Unlock()
	if set == nil {
		return nil, fmt.Errorf("%w: the key set was never loaded (Prepare)", ErrNoKey)
	}
	k := m.restate(set).current[alg]
	if k == nil {
		return nil, fmt.Errorf("%w for %s", ErrNoKey, alg)
	}
	return k, nil
}

// SignType is Sign with the JWS header typ set to typ instead of "JWT",
// e.g. "logout+jwt" (OpenID Connect Back-Channel Logout 1.0 §2.4, so a
// logout token cannot be taken for an ID token). Like Sign it does no I/O.
func (m *Manager) SignType(_ context.Context, alg, typ string, payload []byte) (string, error) {
	k, err := m.loadedKey(alg)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(k.Alg), Key: k.private},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		return "", fmt.Errorf("signing: %w", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("signing: %w", err)
	}
	return jws.CompactSerialize()
}

// JWKS returns the published public keys (RFC 7517 §5): the next, current
// and retired generations.
func (m *Manager) JWKS(ctx context.Context) (jose.JSONWebKeySet, error) {
	set, err := m.current(ctx)
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	out := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	for i := len(set.keys) - 1; i >= 0; i-- { // newest first
		k := set.keys[i]
		if set.state[k.ID] != StateExpired {
			out.Keys = append(out.Keys, k.public)
		}
	}
	return out, nil
}

// KeyInfo describes one key for `authd keys list`.
type KeyInfo struct {
	ID         string
	Alg        string
	Generation int64
	CreatedAt  time.Time
	State      State
}

// List returns every stored key with its state, read from the store now.
func (m *Manager) List(ctx context.Context) ([]KeyInfo, error) {
	set, err := m.reload(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]KeyInfo, 0, len(set.keys))
	for _, k := range set.keys {
		out = append(out, KeyInfo{ID: k.ID, Alg: k.Alg, Generation: k.Generation, CreatedAt: k.CreatedAt, State: set.state[k.ID]})
	}
	return out, nil
}

// ErrNotOurs is returned by Verify for a token not signed by a stored key.
var ErrNotOurs = errors.New("signing: not signed by this server's keys")

// Verify checks that token is a compact JWS signed by one of the stored
// keys (in any state: an expired ID token still identifies its session as
// an id_token_hint, RP-Initiated Logout 1.0 §2) and returns its payload. It
// checks no claim; the caller does.
func (m *Manager) Verify(ctx context.Context, token string) ([]byte, error) {
	jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil || len(jws.Signatures) != 1 {
		return nil, ErrNotOurs
	}
	set, err := m.current(ctx)
	if err != nil {
		return nil, err
	}
	kid := jws.Signatures[0].Header.KeyID
	for _, k := range set.keys {
		if k.ID == kid {
			payload, err := jws.Verify(k.public)
			if err != nil {
				return nil, ErrNotOurs
			}
			return payload, nil
		}
	}
	return nil, ErrNotOurs
}
