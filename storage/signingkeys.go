package storage

import (
	"context"
	"time"
)

// SigningKey is one private key authd signs ID tokens with (OpenID Connect
// Core §10.1). Keys come in generations: each generation holds one key per
// algorithm (RS256, ES256) and a rotation adds the next generation.
type SigningKey struct {
	// ID is the JWS "kid" (RFC 7515 §4.1.4).
	ID string
	// Alg is the JWS algorithm: "RS256" or "ES256".
	Alg string
	// Generation numbers rotations from 1; (Alg, Generation) is unique.
	Generation int64
	// Sealed is the PKCS #8 private key sealed under the system secret
	// (package secrets); the key is never stored in the clear.
	Sealed []byte
	// CreatedAt is UTC, microsecond precision. PostgreSQL sets it from
	// its own clock, which every replica shares; the memory store keeps
	// the one given (or now).
	CreatedAt time.Time
}

// SigningKeyStore keeps the signing keys.
type SigningKeyStore interface {
	// ListSigningKeys returns every key, oldest generation first.
	ListSigningKeys(ctx context.Context) ([]SigningKey, error)
	// AddSigningKeys inserts one generation of keys (all with the same
	// Generation) unless a key of that generation or a later one exists: a
	// conditional write, so of N replicas rotating at once exactly one
	// adds the generation. It reports whether the keys were added.
	AddSigningKeys(ctx context.Context, keys []SigningKey) (bool, error)
	// DeleteSigningKeys deletes the keys of generations before generation
	// and returns how many it deleted.
	DeleteSigningKeys(ctx context.Context, before int64) (int, error)
}
