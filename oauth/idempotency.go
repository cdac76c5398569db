package oauth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/storage"
)

// Idempotency-Key handling for the admin API (docs/architecture.md, "Admin writes";
// draft-ietf-httpapi-idempotency-key-header). What reaches the database:
//
//   - the key as HMAC-SHA-256 under a key derived from the system secret
//     (keyHash), never the raw key;
//   - the admin credential as a keyed fingerprint (credentialFingerprint);
//   - a keyed hash of the request's canonical JSON (requestHash);
//   - the response sealed with AES-256-GCM under a key derived (HKDF) from the
//     system secret and the raw key (sealResponse): only a caller presenting
//     the key can have it opened, and a dump of the table holds no
//     client_secret.

// maxIdempotencyKeyLen bounds the Idempotency-Key header value.
const maxIdempotencyKeyLen = 255

// idempotencySealInfo names what a sealed response is, in its binding.
const idempotencySealInfo = "authd/v1/idempotency-response"

// errUnsealResponse reports a stored response that cannot be opened (another
// system secret, or tampering).
var errUnsealResponse = errors.New("oauth: cannot unseal stored idempotent response")

// parseIdempotencyKey returns the key of an Idempotency-Key header value:
// either a Structured Fields string (RFC 8941 §3.3.3, as the draft
// specifies: "…" with no escapes) or, as most clients send it, the bare
// token. The key is 1–255 visible ASCII characters.
func parseIdempotencyKey(v string) (string, error) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	if v == "" || len(v) > maxIdempotencyKeyLen {
		return "", fmt.Errorf("the Idempotency-Key must be 1 to %d characters", maxIdempotencyKeyLen)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e || v[i] == '"' || v[i] == '\\' {
			return "", errors.New("the Idempotency-Key must be visible ASCII characters without quotes or backslashes")
		}
	}
	return v, nil
}

// idempotencyKeys holds the keys derived from the system secret.
type idempotencyKeys struct {
	sealKey    []byte // input keying material for sealing responses
	keyHashKey []byte
	requestKey []byte
	credential []byte
}

func newIdempotencyKeys(secret []byte) *idempotencyKeys {
	return &idempotencyKeys{
		sealKey:    deriveKey(secret, "idempotency-response"),
		keyHashKey: deriveKey(secret, "idempotency-key-hash"),
		requestKey: deriveKey(secret, "idempotency-request-hash"),
		credential: deriveKey(secret, "admin-credential"),
	}
}

// lengthPrefixed encodes parts unambiguously: each one preceded by its
// length as 8 big-endian bytes.
func lengthPrefixed(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = binary.BigEndian.AppendUint64(out, uint64(len(p)))
		out = append(out, p...)
	}
	return out
}

// hmacSHA256 is HMAC-SHA-256 under key of the length-prefixed parts.
func hmacSHA256(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(lengthPrefixed(parts...))
	return m.Sum(nil)
}

// keyHash is the stored form of a raw Idempotency-Key.
func (k *idempotencyKeys) keyHash(raw string) []byte {
	return hmacSHA256(k.keyHashKey, []byte(raw))
}

// requestHash fingerprints a request by its canonical JSON body.
func (k *idempotencyKeys) requestHash(canonical []byte) []byte {
	return hmacSHA256(k.requestKey, canonical)
}

// credentialFingerprint is the keyed fingerprint of an admin credential:
// kind ("token" for a bearer token, "local" for the CLI) and value. It scopes
// Idempotency-Keys and names the caller in the audit log.
func (k *idempotencyKeys) credentialFingerprint(kind, value string) []byte {
	return hmacSHA256(k.credential, []byte(kind), []byte(value))
}

// sealAAD binds a sealed response to its row and status.
func sealAAD(key storage.IdempotencyKey, status int) string {
	return string(lengthPrefixed([]byte(idempotencySealInfo),
		key.Credential, []byte(key.Endpoint), key.KeyHash, binary.BigEndian.AppendUint64(nil, uint64(status))))
}

// sealResponse encrypts body for the row key under the raw Idempotency-Key.
// It is the replay cache's sealing (exchangecache.Seal: HKDF from a secret
// and a value only the caller presents, AES-256-GCM, bound to a key), as
// docs/architecture.md principle 4 asks for both: here the secret is derived from the
// system secret and the presented value is the raw key.
func (k *idempotencyKeys) sealResponse(raw string, key storage.IdempotencyKey, status int, body []byte) ([]byte, error) {
	sealed, err := exchangecache.Seal(k.sealKey, raw, sealAAD(key, status), body)
	if err != nil {
		return nil, fmt.Errorf("oauth: seal idempotent response: %w", err)
	}
	return sealed, nil
}

// openResponse decrypts a response sealed by sealResponse, or returns
// errUnsealResponse.
func (k *idempotencyKeys) openResponse(raw string, rec *storage.IdempotencyRecord) ([]byte, error) {
	body, err := exchangecache.Open(k.sealKey, raw, sealAAD(rec.IdempotencyKey, rec.Status), rec.Response)
	if err != nil {
		return nil, errUnsealResponse
	}
	return body, nil
}

// canonicalJSON returns the canonical form of a JSON document: parsed and
// re-encoded compactly with object members sorted by name (encoding/json
// sorts map keys), so that two bodies differing only in whitespace or member
// order have the same request hash. An empty body is canonically "{}".
func canonicalJSON(body []byte) ([]byte, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return []byte("{}"), nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
