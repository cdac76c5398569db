package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// RefetchFloor is the least time between two fetches of a provider's
// JWKS: an unknown kid triggers a refetch at most this often, so a key
// rotation is followed within seconds and a stream of tokens with made-up
// kids costs the provider one request per floor.
const RefetchFloor = 10 * time.Second

// signingAlgs are the JWS algorithms accepted from providers (Apple and
// Google sign with RS256; ES256 for others).
var signingAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.PS256}

// keySet is a provider's JWKS, cached (an oidc.KeySet). A kid it does not
// hold triggers one refetch, at most once per RefetchFloor; a kid the
// provider never published is refused.
type keySet struct {
	uri    string
	client *http.Client
	now    func() time.Time

	mu        sync.Mutex
	keys      map[string]jose.JSONWebKey
	lastFetch time.Time
	fetches   int
}

var errUnknownKID = errors.New("federation: the ID token's kid is not among the provider's keys")

// VerifySignature implements oidc.KeySet.
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSigned(jwt, signingAlgs)
	if err != nil {
		return nil, fmt.Errorf("federation: malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("federation: one signature expected")
	}
	kid := jws.Signatures[0].Header.KeyID
	key, err := k.key(ctx, kid)
	if err != nil {
		return nil, err
	}
	return jws.Verify(key)
}

// key returns the key kid, refetching once when it is unknown and the
// floor allows.
func (k *keySet) key(ctx context.Context, kid string) (jose.JSONWebKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if key, ok := k.lookup(kid); ok {
		return key, nil
	}
	if !k.lastFetch.IsZero() && k.now().Sub(k.lastFetch) < RefetchFloor {
		return jose.JSONWebKey{}, errUnknownKID
	}
	// Held under the lock: concurrent verifications of a new kid wait for
	// this one fetch instead of each making their own.
	if err := k.fetch(ctx); err != nil {
		return jose.JSONWebKey{}, err
	}
	if key, ok := k.lookup(kid); ok {
		return key, nil
	}
	return jose.JSONWebKey{}, errUnknownKID
}

// lookup finds kid; a token without kid matches a set of one signing key.
func (k *keySet) lookup(kid string) (jose.JSONWebKey, bool) {
	if kid == "" {
		if len(k.keys) == 1 {
			for _, key := range k.keys {
				return key, true
			}
		}
		return jose.JSONWebKey{}, false
	}
	key, ok := k.keys[kid]
	return key, ok
}

// maxJWKSBytes bounds a provider's JWKS document.
const maxJWKSBytes = 256 << 10

func (k *keySet) fetch(ctx context.Context) error {
	k.lastFetch = k.now()
	k.fetches++
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.uri, nil)
	if err != nil {
		return err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return fmt.Errorf("federation: fetch jwks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("federation: fetch jwks: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes))
	if err != nil {
		return fmt.Errorf("federation: fetch jwks: %w", err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return fmt.Errorf("federation: jwks: %w", err)
	}
	keys := map[string]jose.JSONWebKey{}
	for _, key := range set.Keys {
		if key.Use == "enc" || !key.Valid() {
			continue
		}
		keys[key.KeyID] = key.Public()
	}
	k.keys = keys
	return nil
}
