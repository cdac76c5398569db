package oauth

import (
	"github.com/ory/fosite"

	"github.com/authd/authd/secrets"
)

// deriveKey derives a 32-byte key for one purpose from the system secret
// (secrets.Derive: HKDF-SHA256, RFC 5869). Distinct purposes never share a
// key.
func deriveKey(secret []byte, purpose string) []byte { return secrets.Derive(secret, purpose) }

// SecretHasher hashes client secrets with HMAC-SHA-256 under a key derived
// from the system secret (secrets.Hasher). It implements fosite.Hasher;
// fosite maps its mismatch error to invalid_client.
type SecretHasher = secrets.Hasher

var _ fosite.Hasher = (*SecretHasher)(nil)

// NewSecretHasher returns a hasher keyed from the system secret.
func NewSecretHasher(systemSecret []byte) *SecretHasher { return secrets.NewHasher(systemSecret) }
