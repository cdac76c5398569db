package exchangecache

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
)

const (
	// sealVersion is the first byte of every sealed value.
	sealVersion byte = 1
	// sealInfo is the HKDF info string for version 1.
	sealInfo = "authd/exchangecache/seal/v1"
	// MinSecretLen is the minimum length, in bytes, of the server secret
	// passed to Seal and Open.
	MinSecretLen = 32
	// sealOverhead is version byte + GCM nonce (12) + GCM tag (16).
	sealOverhead = 1 + 12 + 16
)

// ErrUnseal is returned by Open when the sealed value cannot be decrypted:
// wrong server secret, wrong presented verifier or refresh token, wrong key,
// tampering, truncation or an unknown version. The caller must treat it like
// a fingerprint mismatch (do not replay; let the normal exchange answer).
var ErrUnseal = errors.New("exchangecache: cannot unseal response")

// Seal encrypts plaintext (the token response) for storage in the cache;
// authd seals the admin API's stored idempotent responses with it too.
//
// The encryption key is HKDF-SHA256 with the server secret as input keying
// material, the presented code_verifier (refresh token, for the refresh
// grant) as salt and the info "authd/exchangecache/seal/v1"; the cipher is
// AES-256-GCM with a random 96-bit nonce, and the cache key is bound as
// additional data, so a sealed value cannot be moved to another key. Without
// both the server secret and the presented value the output is useless; a
// dump of the cache yields no token.
//
// Format: version byte (1) || nonce (12 bytes) || ciphertext || tag (16 bytes).
//
// It returns an ErrInvalidArgument-wrapped error if secret is shorter than
// MinSecretLen bytes, or presented or key is empty.
func Seal(secret []byte, presented, key string, plaintext []byte) ([]byte, error) {
	aead, err := sealAEAD(secret, presented, key)
	if err != nil {
		return nil, fmt.Errorf("exchangecache: seal: %w", err)
	}
	out := make([]byte, 1, sealOverhead+len(plaintext))
	out[0] = sealVersion
	// NewGCMWithRandomNonce draws the nonce from crypto/rand and prepends it.
	return aead.Seal(out, nil, plaintext, additionalData(key)), nil
}

// Open decrypts a value produced by Seal with the same secret, presented
// value and key. It returns ErrUnseal (possibly wrapped) if any of them
// differs or the value was modified, and an ErrInvalidArgument-wrapped error
// for the argument problems Seal rejects.
func Open(secret []byte, presented, key string, sealed []byte) ([]byte, error) {
	aead, err := sealAEAD(secret, presented, key)
	if err != nil {
		return nil, fmt.Errorf("exchangecache: open: %w", err)
	}
	if len(sealed) < sealOverhead || sealed[0] != sealVersion {
		return nil, ErrUnseal
	}
	plaintext, err := aead.Open(nil, nil, sealed[1:], additionalData(key))
	if err != nil {
		return nil, ErrUnseal
	}
	return plaintext, nil
}

// sealAEAD derives the per-request AES-256-GCM instance.
func sealAEAD(secret []byte, presented, key string) (cipher.AEAD, error) {
	switch {
	case len(secret) < MinSecretLen:
		return nil, fmt.Errorf("secret shorter than %d bytes: %w", MinSecretLen, ErrInvalidArgument)
	case presented == "":
		return nil, fmt.Errorf("empty presented verifier: %w", ErrInvalidArgument)
	case key == "":
		return nil, fmt.Errorf("empty key: %w", ErrInvalidArgument)
	}
	k, err := hkdf.Key(sha256.New, secret, []byte(presented), sealInfo, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCMWithRandomNonce(block)
}

// additionalData binds the version and the cache key to the ciphertext.
func additionalData(key string) []byte {
	ad := make([]byte, 0, 1+len(key))
	ad = append(ad, sealVersion)
	return append(ad, key...)
}
