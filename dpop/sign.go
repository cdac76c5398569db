package dpop

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// ProofClaims are what a client puts in a proof it signs with NewProof.
type ProofClaims struct {
	Method, URL string
	// Nonce is the server's last DPoP-Nonce, if any.
	Nonce string
	// AccessToken, when set, is hashed into ath (a resource request).
	AccessToken string
	// IssuedAt is iat (default now); JTI is generated when empty.
	IssuedAt time.Time
	JTI      string
}

// NewProof signs a proof as a client does (RFC 9449 §4.2): typ dpop+jwt,
// the public key in jwk, a random jti. key is an *ecdsa.PrivateKey (ES256),
// *rsa.PrivateKey (RS256) or ed25519.PrivateKey (alg EdDSA or Ed25519).
// It exists for Go clients and for tests; the server never signs proofs.
func NewProof(key crypto.Signer, alg string, c ProofClaims) (string, error) {
	if c.IssuedAt.IsZero() {
		c.IssuedAt = time.Now()
	}
	if c.JTI == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		c.JTI = base64.RawURLEncoding.EncodeToString(b[:])
	}
	body := map[string]any{"jti": c.JTI, "htm": c.Method, "htu": c.URL, "iat": c.IssuedAt.Unix()}
	if c.Nonce != "" {
		body["nonce"] = c.Nonce
	}
	if c.AccessToken != "" {
		body["ath"] = AccessTokenHash(c.AccessToken)
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return "", err
	}
	if alg == AlgEd25519 {
		// go-jose does not sign under this name (package doc).
		priv, ok := key.(ed25519.PrivateKey)
		if !ok {
			return "", errors.New("dpop: Ed25519 needs an ed25519.PrivateKey")
		}
		jwk, err := json.Marshal(jose.JSONWebKey{Key: priv.Public()})
		if err != nil {
			return "", err
		}
		hdr, _ := json.Marshal(map[string]any{"typ": "dpop+jwt", "alg": AlgEd25519, "jwk": json.RawMessage(jwk)})
		input := base64.RawURLEncoding.EncodeToString(hdr) + "." + base64.RawURLEncoding.EncodeToString(payload)
		return input + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(input))), nil
	}
	opts := (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt")
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: key}, opts)
	if err != nil {
		return "", err
	}
	jws, err := s.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// Thumbprint is the JWK thumbprint (RFC 7638, SHA-256, base64url) of a
// public key: the jkt a proof signed by its private key yields, and the
// value of dpop_jkt (RFC 9449 §10).
func Thumbprint(pub crypto.PublicKey) (string, error) {
	tp, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}
