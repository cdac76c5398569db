package idempotency

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/authd/authd/secrets"
	"github.com/authd/authd/storage"
)

// sealInfo names what a sealed answer is, in its binding.
const sealInfo = "authd/v1/idempotency-response"

// errUnseal reports a stored answer that cannot be opened (another system
// secret, or tampering).
var errUnseal = errors.New("idempotency: cannot unseal stored answer")

// keys holds the keys derived from the system secret. The purposes are
// those of the records already stored; they never change.
type keys struct {
	sealKey    []byte // input keying material for sealing answers
	keyHashKey []byte
	requestKey []byte
	credential []byte
}

func newKeys(secret []byte) keys {
	return keys{
		sealKey:    secrets.Derive(secret, "idempotency-response"),
		keyHashKey: secrets.Derive(secret, "idempotency-key-hash"),
		requestKey: secrets.Derive(secret, "idempotency-request-hash"),
		credential: secrets.Derive(secret, "admin-credential"),
	}
}

// keyHash is the stored form of a raw key.
func (k keys) keyHash(raw string) []byte {
	return secrets.MAC(k.keyHashKey, []byte(raw))
}

// resourceHash is the stored form of a Write's Resource (two parts, so it
// never equals a keyHash).
func (k keys) resourceHash(resource string) []byte {
	return secrets.MAC(k.keyHashKey, []byte("resource"), []byte(resource))
}

// requestHash fingerprints a request by its canonical JSON.
func (k keys) requestHash(canonical []byte) []byte {
	return secrets.MAC(k.requestKey, canonical)
}

// boundRequestHash fingerprints a confidential request by its canonical
// JSON and the raw key, which is never stored (Write.Confidential).
func (k keys) boundRequestHash(raw string, canonical []byte) []byte {
	return secrets.MAC(k.requestKey, []byte("confidential"), []byte(raw), canonical)
}

// credentialFingerprint is the keyed fingerprint of a credential: kind
// ("token" for a bearer token, "local" for the CLI) and value.
func (k keys) credentialFingerprint(kind, value string) []byte {
	return secrets.MAC(k.credential, []byte(kind), []byte(value))
}

// sealAAD binds a sealed answer to its row and outcome.
func sealAAD(key storage.IdempotencyKey, outcome int) string {
	return string(secrets.LengthPrefixed([]byte(sealInfo),
		key.Credential, []byte(key.Endpoint), key.KeyHash, binary.BigEndian.AppendUint64(nil, uint64(outcome))))
}

// sealAnswer encrypts answer for the row key under the raw key
// (secrets.Seal: the secret derived for idempotency answers, the raw key as
// the value only the caller presents, the row bound as additional data).
func (k keys) sealAnswer(raw string, key storage.IdempotencyKey, outcome int, answer []byte) ([]byte, error) {
	sealed, err := secrets.Seal(k.sealKey, raw, sealAAD(key, outcome), answer)
	if err != nil {
		return nil, fmt.Errorf("idempotency: seal answer: %w", err)
	}
	return sealed, nil
}

// openAnswer decrypts an answer sealed by sealAnswer, or returns errUnseal.
func (k keys) openAnswer(raw string, rec *storage.IdempotencyRecord) ([]byte, error) {
	answer, err := secrets.Open(k.sealKey, raw, sealAAD(rec.IdempotencyKey, rec.Status), rec.Response)
	if err != nil {
		return nil, errUnseal
	}
	return answer, nil
}
