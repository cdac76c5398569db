package idempotency

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/authd/authd/secrets"
	"github.com/authd/authd/storage"
)

// Store is what the engine needs of storage: transactions and the
// Idempotency-Key records.
type Store interface {
	BeginTX(ctx context.Context) (context.Context, error)
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
	ClaimIdempotencyKey(ctx context.Context, c storage.IdempotencyClaim) (*storage.IdempotencyRecord, bool, error)
	CompleteIdempotencyKey(ctx context.Context, k storage.IdempotencyKey, status int, response []byte) error
}

// Config configures an Engine. Secret and Store are required.
type Config struct {
	// Secret is the system secret (at least secrets.MinLen bytes): keys
	// and credentials are hashed, and answers sealed, under keys derived
	// from it.
	Secret []byte
	// TTL is how long a key and its answer are kept (default 24h).
	TTL time.Duration
	// Store runs the transactions and keeps the records.
	Store Store
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// ErrConfig is returned (wrapped) by New for an invalid Config.
var ErrConfig = errors.New("idempotency: invalid configuration")

// Engine runs writes under Idempotency-Keys. It is safe for concurrent use.
type Engine struct {
	store Store
	keys  keys
	ttl   time.Duration
	now   func() time.Time
}

// New returns an engine.
func New(cfg Config) (*Engine, error) {
	if len(cfg.Secret) < secrets.MinLen {
		return nil, fmt.Errorf("%w: secret: must be at least %d bytes, got %d", ErrConfig, secrets.MinLen, len(cfg.Secret))
	}
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: Store is required", ErrConfig)
	}
	e := &Engine{store: cfg.Store, keys: newKeys(cfg.Secret), ttl: cfg.TTL, now: cfg.Now}
	if e.ttl <= 0 {
		e.ttl = 24 * time.Hour
	}
	if e.now == nil {
		e.now = time.Now
	}
	return e, nil
}

// Caller identifies who makes a request by a keyed fingerprint of its
// credential, never the credential itself. It scopes keys (the keys of two
// credentials never collide) and names the caller in audit events. Obtain
// one from Engine.TokenCaller or Engine.LocalCaller.
type Caller struct {
	fingerprint []byte
	name        string
}

// String returns the caller's audit name: "token:" and 16 hex digits of the
// fingerprint of a bearer token, or "local:" and the name of a local caller.
func (c Caller) String() string { return c.name }

// Equal reports whether c and o present the same credential, comparing
// their fingerprints (of equal length) in constant time.
func (c Caller) Equal(o Caller) bool {
	return len(c.fingerprint) > 0 && subtle.ConstantTimeCompare(c.fingerprint, o.fingerprint) == 1
}

// Unauthenticated is the caller of a request without a valid credential,
// for audit events only.
var Unauthenticated = Caller{name: "unauthenticated"}

// TokenCaller returns the caller presenting a bearer token, named by its
// fingerprint. Whether the token is one the caller may use is the
// adapter's decision (compare with Equal).
func (e *Engine) TokenCaller(token string) Caller {
	fp := e.keys.credentialFingerprint("token", token)
	return Caller{fingerprint: fp, name: "token:" + hex.EncodeToString(fp[:8])}
}

// LocalCaller returns the caller for a local operator with direct access to
// the database and the system secret, such as the "authd clients" commands.
func (e *Engine) LocalCaller(name string) Caller {
	return Caller{fingerprint: e.keys.credentialFingerprint("local", name), name: "local:" + name}
}

// The outcomes stored with a key's record and bound into its seal. They
// were the HTTP statuses of the admin API when the table was designed;
// stored records depend on these values, so they stay.
const (
	// OutcomeOK: the write changed or read something and answers it.
	OutcomeOK = 200
	// OutcomeCreated: the write created what it answers.
	OutcomeCreated = 201
	// OutcomeDone: the write answers nothing (a deletion).
	OutcomeDone = 204
)

// Write is one write for the engine (Run).
type Write struct {
	// Caller scopes the key.
	Caller Caller
	// Endpoint scopes the key too: the operation and the resource it
	// names where that may be stored in the clear, e.g. "POST
	// /admin/users" or "PUT /admin/users/*".
	Endpoint string
	// Resource, when set, completes the scope with what must not be
	// stored in the clear (a username): it is added to the stored
	// endpoint as a keyed hash.
	Resource string
	// Outcome is stored with the key and bound into its seal: OutcomeOK,
	// OutcomeCreated or OutcomeDone; not 0.
	Outcome int
	// Key is the raw Idempotency-Key; "" runs the write in its
	// transaction without one.
	Key string
	// Request is the canonical form of the request (Canonical): a retry
	// with the same key must present the same one.
	Request []byte
	// Confidential marks a request that carries a secret (a password). Its
	// stored fingerprint is then keyed with the raw key too, so a dump of
	// the table and the system secret together still allow no guessing of
	// the secret: the raw key is never stored.
	Confidential bool
	// Do performs the write with the context of the transaction and
	// returns the answer (nil for none). Its error is returned as it is,
	// after the transaction is rolled back.
	Do func(ctx context.Context) ([]byte, error)
}

// Written is the result of Run.
type Written struct {
	// Outcome is the Write's, or on a replay the stored one.
	Outcome int
	// Answer is what Do returned, or on a replay the stored answer, byte
	// for byte.
	Answer []byte
	// Replayed reports an answer replayed from a key's record.
	Replayed bool
}

// writeTimeout bounds one write, which is not canceled when the caller
// goes away (see Run).
const writeTimeout = 15 * time.Second

// Run runs w in one transaction. With a key (docs/architecture.md, "Admin
// writes"), in that same transaction: claim the key (scoped to the caller
// and the endpoint, with the keyed hash of the canonical request), do the
// work, store the sealed answer, commit. Then:
//
//   - a retry with the same key and request gets the stored answer, byte
//     for byte, with Replayed set;
//   - the same key with another request is ErrKeyReused;
//   - the same key while the first request is in flight is ErrInFlight;
//   - a request that fails (validation, not found, any error of Do) rolls
//     back and leaves no key: it can be retried with the same key.
//
// An invalid key is ErrInvalidKey. Other errors (Do's, storage's) are
// returned untranslated. Run writes no audit event: its caller does.
//
// The write is not canceled when the caller goes away (it is bounded by
// writeTimeout instead): a client that timed out and retries then finds
// the stored answer rather than a half-done request.
func (e *Engine) Run(ctx context.Context, w Write) (*Written, error) {
	hasKey := w.Key != ""
	var rawKey string
	if hasKey {
		k, err := ParseKey(w.Key)
		if err != nil {
			return nil, err
		}
		rawKey = k
	}
	if w.Outcome == 0 {
		return nil, errors.New("idempotency: write: outcome 0")
	}

	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	tx, err := e.store.BeginTX(wctx)
	if err != nil {
		return nil, err
	}
	// After Commit this is a no-op; on every other path it discards the
	// claim and the work.
	defer func() { _ = e.store.Rollback(tx) }()

	var key storage.IdempotencyKey
	if hasKey {
		now := e.now()
		endpoint := w.Endpoint
		if w.Resource != "" {
			endpoint += " " + hex.EncodeToString(e.keys.resourceHash(w.Resource))
		}
		key = storage.IdempotencyKey{
			Credential: w.Caller.fingerprint,
			Endpoint:   endpoint,
			KeyHash:    e.keys.keyHash(rawKey),
		}
		reqHash := e.keys.requestHash(w.Request)
		if w.Confidential {
			reqHash = e.keys.boundRequestHash(rawKey, w.Request)
		}
		stored, claimed, err := e.store.ClaimIdempotencyKey(tx, storage.IdempotencyClaim{
			IdempotencyKey: key,
			RequestHash:    reqHash,
			CreatedAt:      now,
			ExpiresAt:      now.Add(e.ttl),
		})
		switch {
		case errors.Is(err, storage.ErrIdempotencyInFlight):
			return nil, refuse(ErrInFlight, "A request with this Idempotency-Key is still being processed; retry later.")
		case errors.Is(err, storage.ErrIdempotencyKeyReused):
			return nil, refuse(ErrKeyReused, "This Idempotency-Key was already used for a different request.")
		case err != nil:
			return nil, err
		case !claimed:
			answer, err := e.keys.openAnswer(rawKey, stored)
			if err != nil {
				return nil, err
			}
			return &Written{Outcome: stored.Status, Answer: answer, Replayed: true}, nil
		}
	}

	answer, err := w.Do(tx)
	if err != nil {
		return nil, err
	}
	if hasKey {
		sealed, err := e.keys.sealAnswer(rawKey, key, w.Outcome, answer)
		if err == nil {
			err = e.store.CompleteIdempotencyKey(tx, key, w.Outcome, sealed)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := e.store.Commit(tx); err != nil {
		return nil, err
	}
	return &Written{Outcome: w.Outcome, Answer: answer}, nil
}

// maxKeyLen bounds an Idempotency-Key.
const maxKeyLen = 255

// ParseKey returns the key of an Idempotency-Key value: either a
// Structured Fields string (RFC 8941 §3.3.3, as the draft specifies: "…"
// with no escapes) or, as most clients send it, the bare token. The key is
// 1–255 visible ASCII characters; anything else is ErrInvalidKey.
func ParseKey(v string) (string, error) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	if v == "" || len(v) > maxKeyLen {
		return "", refuse(ErrInvalidKey, fmt.Sprintf("The Idempotency-Key must be 1 to %d characters.", maxKeyLen))
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e || v[i] == '"' || v[i] == '\\' {
			return "", refuse(ErrInvalidKey, "The Idempotency-Key must be visible ASCII characters without quotes or backslashes.")
		}
	}
	return v, nil
}
