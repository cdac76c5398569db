package exchangecache

import (
	"errors"
	"fmt"

	"github.com/authd/authd/secrets"
)

// MinSecretLen is the minimum length, in bytes, of the server secret
// passed to Seal and Open.
const MinSecretLen = secrets.MinLen

// ErrUnseal is returned by Open when the sealed value cannot be decrypted:
// wrong server secret, wrong presented verifier or refresh token, wrong key,
// tampering, truncation or an unknown version. The caller must treat it like
// a fingerprint mismatch (do not replay; let the normal exchange answer).
var ErrUnseal = secrets.ErrUnseal

// Seal encrypts plaintext (the token response) for storage in the cache
// with secrets.Seal, authd's one sealing format: HKDF-SHA256 from the
// server secret with the presented code_verifier (refresh token, for the
// refresh grant) as salt, AES-256-GCM with a random nonce, the cache key
// bound as additional data. A dump of the cache yields no token.
//
// It returns an ErrInvalidArgument-wrapped error if secret is shorter than
// MinSecretLen bytes, or presented or key is empty.
func Seal(secret []byte, presented, key string, plaintext []byte) ([]byte, error) {
	sealed, err := secrets.Seal(secret, presented, key, plaintext)
	return sealed, wrapInvalid("seal", err)
}

// Open decrypts a value produced by Seal with the same secret, presented
// value and key. It returns ErrUnseal if any of them differs or the value
// was modified, and an ErrInvalidArgument-wrapped error for the argument
// problems Seal rejects.
func Open(secret []byte, presented, key string, sealed []byte) ([]byte, error) {
	plain, err := secrets.Open(secret, presented, key, sealed)
	return plain, wrapInvalid("open", err)
}

// wrapInvalid maps secrets.ErrInvalidArgument to this package's.
func wrapInvalid(op string, err error) error {
	if errors.Is(err, secrets.ErrInvalidArgument) {
		return fmt.Errorf("exchangecache: %s: %v: %w", op, err, ErrInvalidArgument)
	}
	return err
}
