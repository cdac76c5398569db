// The key set: generations, their rotation, and each key's state as of now.

package signing

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"slices"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/authd/authd/secrets"
	"github.com/authd/authd/storage"
)

// keySet is the store's keys as of one read, with their states.
type keySet struct {
	keys    []*Key
	state   map[string]State
	current map[string]*Key // by alg
	// keep is the oldest generation still published.
	keep int64
	// newest is the newest generation and its creation time.
	newest        int64
	newestCreated time.Time
}

// Rotate adds the next generation when the newest is RotateEvery old (or at
// once with force), and deletes the generations whose tokens have all
// expired. tx, if set, runs the writes (jobs.Job.Commit: fenced by the job's
// lease); otherwise each write is its own statement. It reports whether a
// generation was added by this call; false with force means another replica
// added one at the same moment.
func (m *Manager) Rotate(ctx context.Context, force bool, tx func(context.Context, func(context.Context) error) error) (bool, error) {
	keys, err := m.store.ListSigningKeys(ctx)
	if err != nil {
		return false, fmt.Errorf("signing: %w", err)
	}
	set, err := m.build(keys)
	if err != nil {
		return false, err
	}
	now := m.cfg.Now()
	due := force || set.newest == 0 || !now.Before(set.newestCreated.Add(m.cfg.RotateEvery))
	var gen []storage.SigningKey
	if due {
		// Generate before the transaction: an RSA key takes a while.
		if gen, err = m.generate(set.newest + 1); err != nil {
			return false, err
		}
	}
	if tx == nil {
		tx = func(ctx context.Context, f func(context.Context) error) error { return f(ctx) }
	}
	added := false
	err = tx(ctx, func(ctx context.Context) error {
		if set.keep > 1 {
			if n, err := m.store.DeleteSigningKeys(ctx, set.keep); err != nil {
				return err
			} else if n > 0 {
				m.cfg.Logger.Info("signing keys deleted: every token they signed has expired", "keys", n, "before_generation", set.keep)
			}
		}
		if gen == nil {
			return nil
		}
		added, err = m.store.AddSigningKeys(ctx, gen)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("signing: rotate: %w", err)
	}
	if added {
		m.cfg.Logger.Info("signing keys rotated: new generation published", "generation", gen[0].Generation,
			"signs_from", now.Add(m.cfg.Prepublish).UTC().Format(time.RFC3339))
		_, err = m.reload(ctx)
	}
	return added, err
}

// generate makes a generation of keys, one per algorithm, sealed.
func (m *Manager) generate(generation int64) ([]storage.SigningKey, error) {
	var out []storage.SigningKey
	for _, alg := range Algs {
		var (
			priv crypto.Signer
			err  error
		)
		switch alg {
		case RS256:
			priv, err = rsa.GenerateKey(rand.Reader, 2048)
		case ES256:
			priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		}
		if err != nil {
			return nil, fmt.Errorf("signing: generate %s key: %w", alg, err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			return nil, fmt.Errorf("signing: encode %s key: %w", alg, err)
		}
		kid := thumbprint(priv.Public(), alg)
		sealed, err := secrets.Seal(m.cfg.Secret, sealPresented, kid, der)
		if err != nil {
			return nil, fmt.Errorf("signing: seal %s key: %w", alg, err)
		}
		out = append(out, storage.SigningKey{ID: kid, Alg: alg, Generation: generation, Sealed: sealed,
			CreatedAt: m.cfg.Now()})
	}
	return out, nil
}

// thumbprint is the kid: the RFC 7638 JWK thumbprint, base64url.
func thumbprint(pub crypto.PublicKey, alg string) string {
	tp, err := (&jose.JSONWebKey{Key: pub, Algorithm: alg}).Thumbprint(crypto.SHA256)
	if err != nil {
		// Only for an unsupported key type, which generate never makes.
		sum := sha256.Sum256([]byte(fmt.Sprint(pub)))
		tp = sum[:]
	}
	return base64.RawURLEncoding.EncodeToString(tp)
}

// current returns the key set, re-read when it is older than Reload. If the
// re-read fails and a set is cached, the cached set answers (and the error
// is logged): a store hiccup must not stop signing.
//
// It reads with a context of its own, never the caller's: a caller inside a
// transaction (the token exchange) must not have its transaction used for,
// or aborted by, the key set's read. With no key stored yet it creates the
// first generation (Ensure).
func (m *Manager) current(context.Context) (*keySet, error) {
	fresh := func() (*keySet, time.Time) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.set, m.loadedAt
	}
	set, at := fresh()
	if set != nil && len(set.keys) > 0 && m.cfg.Now().Sub(at) < m.cfg.Reload {
		return m.restate(set), nil
	}
	// One reload at a time: the others wait for it and use its result
	// (a first start must not generate a key per concurrent request).
	m.loadMu.Lock()
	defer m.loadMu.Unlock()
	if set, at = fresh(); set != nil && len(set.keys) > 0 && m.cfg.Now().Sub(at) < m.cfg.Reload {
		return m.restate(set), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	loaded, err := m.reload(ctx)
	if err == nil && len(loaded.keys) == 0 {
		if err = m.Ensure(ctx); err == nil {
			loaded, err = m.reload(ctx)
		}
	}
	if err != nil {
		if set != nil && len(set.keys) > 0 {
			m.cfg.Logger.Warn("signing keys not re-read; using the cached set", "error", err)
			return m.restate(set), nil
		}
		return nil, err
	}
	return loaded, nil
}

// restate recomputes the states of a cached set for the current time (a
// generation may have started signing since it was read).
func (m *Manager) restate(set *keySet) *keySet {
	s, err := m.states(set.keys)
	if err != nil {
		return set
	}
	return s
}

// reload re-reads the keys from the store.
func (m *Manager) reload(ctx context.Context) (*keySet, error) {
	keys, err := m.store.ListSigningKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	set, err := m.build(keys)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.set, m.loadedAt = set, m.cfg.Now()
	m.mu.Unlock()
	return set, nil
}

// build parses the keys not parsed yet and computes the states.
func (m *Manager) build(stored []storage.SigningKey) (*keySet, error) {
	keys := make([]*Key, 0, len(stored))
	for _, sk := range stored {
		m.mu.Lock()
		k := m.parsed[sk.ID]
		m.mu.Unlock()
		if k == nil {
			var err error
			if k, err = m.parse(sk); err != nil {
				m.cfg.Logger.Error("signing key unusable; skipped", "kid", sk.ID, "error", err)
				continue
			}
			m.mu.Lock()
			m.parsed[sk.ID] = k
			m.mu.Unlock()
		}
		keys = append(keys, k)
	}
	slices.SortStableFunc(keys, func(a, b *Key) int { return int(a.Generation - b.Generation) })
	return m.states(keys)
}

// parse opens and parses one stored key.
func (m *Manager) parse(sk storage.SigningKey) (*Key, error) {
	der, err := secrets.Open(m.cfg.Secret, sealPresented, sk.ID, sk.Sealed)
	if err != nil {
		return nil, fmt.Errorf("unseal (was AUTHD_SECRET changed?): %w", err)
	}
	raw, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	priv, ok := raw.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("parse: %T is not a signer", raw)
	}
	switch priv.(type) {
	case *rsa.PrivateKey:
		if sk.Alg != RS256 {
			return nil, fmt.Errorf("an RSA key stored as %s", sk.Alg)
		}
	case *ecdsa.PrivateKey:
		if sk.Alg != ES256 {
			return nil, fmt.Errorf("an EC key stored as %s", sk.Alg)
		}
	default:
		return nil, fmt.Errorf("unsupported key type %T", priv)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(sk.Alg),
		Key: jose.JSONWebKey{Key: priv, KeyID: sk.ID, Algorithm: sk.Alg}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, fmt.Errorf("signer: %w", err)
	}
	return &Key{SigningKey: sk, signer: signer, private: jose.JSONWebKey{Key: priv, KeyID: sk.ID, Algorithm: sk.Alg},
		public: jose.JSONWebKey{Key: priv.Public(), KeyID: sk.ID, Algorithm: sk.Alg, Use: "sig"}}, nil
}

// states computes each key's state now (the package doc).
func (m *Manager) states(keys []*Key) (*keySet, error) {
	now := m.cfg.Now()
	set := &keySet{keys: keys, state: map[string]State{}, current: map[string]*Key{}}
	if len(keys) == 0 {
		return set, nil
	}
	// Generations in order, with their creation and signing start.
	type gen struct {
		n       int64
		created time.Time
		start   time.Time
	}
	var gens []gen
	for _, k := range keys {
		if len(gens) == 0 || gens[len(gens)-1].n != k.Generation {
			start := k.CreatedAt.Add(m.cfg.Prepublish)
			if len(gens) == 0 {
				start = k.CreatedAt // the first: nothing to wait for
			}
			gens = append(gens, gen{n: k.Generation, created: k.CreatedAt, start: start})
		}
	}
	cur := 0
	for i, g := range gens {
		if !now.Before(g.start) {
			cur = i
		}
	}
	set.newest, set.newestCreated = gens[len(gens)-1].n, gens[len(gens)-1].created
	set.keep = gens[cur].n
	state := map[int64]State{gens[cur].n: StateCurrent}
	for i := cur + 1; i < len(gens); i++ {
		state[gens[i].n] = StateNext
	}
	for i := cur - 1; i >= 0; i-- {
		retired := gens[i+1].start
		if now.Before(retired.Add(m.cfg.TokenTTL + m.cfg.Grace)) {
			state[gens[i].n] = StateRetired
			set.keep = gens[i].n
		} else {
			state[gens[i].n] = StateExpired
		}
	}
	for _, k := range keys {
		set.state[k.ID] = state[k.Generation]
		if state[k.Generation] == StateCurrent {
			set.current[k.Alg] = k
		}
	}
	return set, nil
}
