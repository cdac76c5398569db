// Package secrets is the one place where keys are derived from authd's
// system secret (AUTHD_SECRET) and where values are sealed with them. The
// replay cache, the client administration service, the client secret hasher
// and the browser cookies all use it, so no two purposes ever share a key
// and there is one sealing format to review.
//
// It holds no state, does no I/O and must never log: every input here is
// key material or a secret.
package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// MinLen is the minimum length, in bytes, of the system secret.
const MinLen = 32

// Derive derives a 32-byte key for one purpose from the system secret:
// HKDF-SHA256 (RFC 5869) with the info "authd/v1/" + purpose and no salt.
// Distinct purposes never share a key. The derivation is fixed: changing it
// would invalidate every code, token, client secret and cookie.
func Derive(secret []byte, purpose string) []byte {
	k, err := hkdf.Key(sha256.New, secret, nil, "authd/v1/"+purpose, 32)
	if err != nil {
		panic(err) // only for an out-of-range length: programmer error.
	}
	return k
}

// MAC is HMAC-SHA-256 under key of the parts, each preceded by its length
// as 8 big-endian bytes, so that no two lists of parts collide.
func MAC(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(LengthPrefixed(parts...))
	return m.Sum(nil)
}

// LengthPrefixed encodes parts unambiguously: each one preceded by its
// length as 8 big-endian bytes.
func LengthPrefixed(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = binary.BigEndian.AppendUint64(out, uint64(len(p)))
		out = append(out, p...)
	}
	return out
}

// ---- sealing ----

const (
	// sealVersion is the first byte of every sealed value.
	sealVersion byte = 1
	// sealInfo is the HKDF info string of version 1. It names the replay
	// cache, where the format was born; values sealed since then depend on
	// it, so it stays.
	sealInfo = "authd/exchangecache/seal/v1"
	// sealOverhead is version byte + GCM nonce (12) + GCM tag (16).
	sealOverhead = 1 + 12 + 16
)

var (
	// ErrUnseal is returned by Open when the sealed value cannot be
	// decrypted: wrong secret, wrong presented value, wrong key, tampering,
	// truncation or an unknown version.
	ErrUnseal = errors.New("secrets: cannot unseal")
	// ErrInvalidArgument is returned (wrapped) by Seal and Open for a
	// secret shorter than MinLen, or an empty presented value or key.
	ErrInvalidArgument = errors.New("secrets: invalid argument")
)

// Seal encrypts plaintext so that only a caller presenting the same secret,
// presented value and key can open it (docs/architecture.md principle 4).
//
// The encryption key is HKDF-SHA256 with secret as input keying material,
// presented (a code_verifier, a refresh token, a raw Idempotency-Key: a
// value the caller must show again) as salt and the info
// "authd/exchangecache/seal/v1"; the cipher is AES-256-GCM with a random
// 96-bit nonce, and key is bound as additional data, so a sealed value
// cannot be moved to another key.
//
// Format: version byte (1) || nonce (12 bytes) || ciphertext || tag (16 bytes).
func Seal(secret []byte, presented, key string, plaintext []byte) ([]byte, error) {
	aead, err := sealAEAD(secret, presented, key)
	if err != nil {
		return nil, fmt.Errorf("secrets: seal: %w", err)
	}
	out := make([]byte, 1, sealOverhead+len(plaintext))
	out[0] = sealVersion
	// NewGCMWithRandomNonce draws the nonce from crypto/rand and prepends it.
	return aead.Seal(out, nil, plaintext, additionalData(key)), nil
}

// Open decrypts a value produced by Seal with the same secret, presented
// value and key. It returns ErrUnseal if any of them differs or the value
// was modified, and an ErrInvalidArgument-wrapped error for the argument
// problems Seal rejects.
func Open(secret []byte, presented, key string, sealed []byte) ([]byte, error) {
	aead, err := sealAEAD(secret, presented, key)
	if err != nil {
		return nil, fmt.Errorf("secrets: open: %w", err)
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

// sealAEAD derives the per-value AES-256-GCM instance.
func sealAEAD(secret []byte, presented, key string) (cipher.AEAD, error) {
	switch {
	case len(secret) < MinLen:
		return nil, fmt.Errorf("secret shorter than %d bytes: %w", MinLen, ErrInvalidArgument)
	case presented == "":
		return nil, fmt.Errorf("empty presented value: %w", ErrInvalidArgument)
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

// additionalData binds the version and the key to the ciphertext.
func additionalData(key string) []byte {
	ad := make([]byte, 0, 1+len(key))
	ad = append(ad, sealVersion)
	return append(ad, key...)
}

// NewAEAD returns AES-256-GCM under the key derived for purpose (Derive),
// for values sealed with a nonce of their own, such as browser cookies.
func NewAEAD(secret []byte, purpose string) cipher.AEAD {
	block, err := aes.NewCipher(Derive(secret, purpose))
	if err != nil {
		panic(err) // a 32-byte key always works.
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

// ---- client secrets ----

// ErrSecretMismatch is returned by Hasher.Compare for a wrong secret.
var ErrSecretMismatch = errors.New("secrets: client secret mismatch")

// Hasher hashes client secrets with HMAC-SHA-256 under the key derived for
// "client-secret". Client secrets are generated by authd with 256 bits of
// entropy, so a slow password hash buys nothing; the keyed hash makes a
// database dump useless without the system secret. It has fosite.Hasher's
// methods.
type Hasher struct {
	key []byte
}

// NewHasher returns the client secret hasher keyed from the system secret.
func NewHasher(systemSecret []byte) *Hasher {
	return &Hasher{key: Derive(systemSecret, "client-secret")}
}

// Hash returns HMAC-SHA-256(key, data).
func (h *Hasher) Hash(_ context.Context, data []byte) ([]byte, error) {
	m := hmac.New(sha256.New, h.key)
	m.Write(data)
	return m.Sum(nil), nil
}

// Compare returns ErrSecretMismatch unless hash is the keyed hash of data.
// The comparison is constant-time (hmac.Equal).
func (h *Hasher) Compare(ctx context.Context, hash, data []byte) error {
	want, _ := h.Hash(ctx, data)
	if len(hash) == 0 || !hmac.Equal(hash, want) {
		return ErrSecretMismatch
	}
	return nil
}
