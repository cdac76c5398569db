package dpop

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	lru "github.com/hashicorp/golang-lru/v2"
)

// Algorithm names accepted in a proof's "alg" header (RFC 9449 §4.2: an
// asymmetric algorithm; none and MACs are never accepted). Ed25519 is the
// RFC 9864 name of EdDSA over Ed25519.
const (
	AlgES256   = "ES256"
	AlgRS256   = "RS256"
	AlgEdDSA   = "EdDSA"
	AlgEd25519 = "Ed25519"
)

// SigningAlgs are the accepted algorithms, for the metadata's
// dpop_signing_alg_values_supported (RFC 9449 §5.1).
func SigningAlgs() []string { return []string{AlgES256, AlgRS256, AlgEdDSA, AlgEd25519} }

// Defaults.
const (
	// DefaultWindow is how far a proof's iat may be from now, either way
	// (RFC 9449 §4.3 point 11: "within an acceptable window"; §11.1).
	DefaultWindow = 60 * time.Second
	// MaxProofBytes bounds a proof: a proof with an RSA-4096 key is under
	// 2 KiB.
	MaxProofBytes = 8 << 10
	// minRSABits is the smallest accepted RSA modulus.
	minRSABits = 2048
	// DefaultKeyCacheSize is how many distinct proof headers (one per
	// client key, in practice) a Verifier keeps parsed.
	DefaultKeyCacheSize = 4096
)

var (
	// ErrInvalidProof: the proof is malformed, badly signed, or does not
	// match the request (RFC 9449 §12.2 invalid_dpop_proof). Wrapped with
	// the reason, safe to show to the client.
	ErrInvalidProof = errors.New("invalid DPoP proof")
	// ErrUseNonce: the server requires a nonce and the proof carries none,
	// or a stale one (RFC 9449 §8, §12.2 use_dpop_nonce). The client
	// retries with the nonce of the DPoP-Nonce header.
	ErrUseNonce = errors.New("DPoP nonce required")
	// ErrProofReplayed: the proof's jti was already used (RFC 9449
	// §11.1). It is an ErrInvalidProof too; the caller may report it as a
	// security event.
	ErrProofReplayed = fmt.Errorf("%w: the proof's jti was already used (RFC 9449 Section 11.1)", ErrInvalidProof)
)

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidProof, fmt.Sprintf(format, a...))
}

// Proof is a verified proof.
type Proof struct {
	// JKT is the base64url SHA-256 JWK thumbprint (RFC 7638) of the
	// proof's public key: the value of cnf.jkt (RFC 9449 §6.1).
	JKT string
	// Alg is the proof's alg header.
	Alg string
	// JTI, IssuedAt and Nonce are the proof's claims.
	JTI      string
	IssuedAt time.Time
	Nonce    string
}

// Request is what a proof is checked against.
type Request struct {
	// Method is the HTTP method (htm, RFC 9449 §4.3 point 8).
	Method string
	// URL is the endpoint's URL as the server publishes it (htu, §4.3
	// point 9); query and fragment are ignored on both sides.
	URL string
	// AccessToken, when set, is the access token presented with the
	// proof: the proof must carry ath, its hash (§4.3 point 12, §7).
	AccessToken string
}

// Verifier verifies proofs. Create it with NewVerifier; it is safe for
// concurrent use.
type Verifier struct {
	window time.Duration
	now    func() time.Time
	nonces *Nonces // nil: nonces not required
	replay ReplayStore
	// onStoreError is told when the replay store fails (fail open).
	onStoreError func(error)
	// headers maps a protected header, as sent (its base64url segment),
	// to what it yielded once go-jose had parsed it and a proof under it
	// had verified; nil when off.
	headers *lru.Cache[string, parsedHeader]
}

// parsedHeader is a protected header that passed every check of RFC 9449
// §4.3 points 2–7 (typ, alg, a public jwk and nothing else naming a key):
// its key, alg and the key's thumbprint (RFC 7638). Those checks read the
// header alone, so a byte-identical header passes them again.
type parsedHeader struct {
	key crypto.PublicKey
	alg string
	jkt string
}

// Options configure a Verifier.
type Options struct {
	// Window bounds |now − iat| (default DefaultWindow).
	Window time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Nonces, when set, makes a server nonce required (RFC 9449 §8).
	Nonces *Nonces
	// Replay records each proof's jti (required).
	Replay ReplayStore
	// OnStoreError is called when Replay fails. The verifier then accepts
	// the proof (fail open; see ReplayStore).
	OnStoreError func(error)
	// KeyCacheSize bounds the parsed-header cache (see Verifier.Parse);
	// 0 means DefaultKeyCacheSize, a negative value turns it off.
	KeyCacheSize int
}

// NewVerifier returns a Verifier.
func NewVerifier(o Options) *Verifier {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OnStoreError == nil {
		o.OnStoreError = func(error) {}
	}
	v := &Verifier{window: o.Window, now: o.Now, nonces: o.Nonces, replay: o.Replay, onStoreError: o.OnStoreError}
	if o.KeyCacheSize == 0 {
		o.KeyCacheSize = DefaultKeyCacheSize
	}
	if o.KeyCacheSize > 0 {
		v.headers, _ = lru.New[string, parsedHeader](o.KeyCacheSize) // errors only for a size ≤ 0
	}
	return v
}

// Nonces returns the verifier's nonce source, nil when nonces are off.
func (v *Verifier) Nonces() *Nonces { return v.nonces }

// Parse checks a proof's form, signature and claims against req (RFC
// 9449 §4.3 points 2–9, 11, 12) without the nonce and without recording
// its jti. Verify does those too.
func (v *Verifier) Parse(proof string, req Request) (*Proof, error) {
	if proof == "" {
		return nil, invalid("the DPoP header is empty")
	}
	if len(proof) > MaxProofBytes {
		return nil, invalid("the proof is too large")
	}
	if strings.Count(proof, ".") != 2 || strings.ContainsAny(proof, "\r\n") {
		// §4.3 point 2: a single well-formed JWT (compact JWS).
		return nil, invalid("the proof is not a compact JWS")
	}
	// A client signs every proof under the same header (typ, alg, jwk), so
	// a header seen in a proof that verified needs no second parse: its
	// key, already checked and parsed, verifies the signature directly.
	var (
		ph      parsedHeader
		payload []byte
		err     error
	)
	segment := proof[:strings.IndexByte(proof, '.')]
	if cached, ok := v.cachedHeader(segment); ok {
		ph = cached
		payload, err = verifyWithKey(proof, ph)
	} else {
		ph, payload, err = parseFull(proof)
		if err == nil && v.headers != nil {
			v.headers.Add(strings.Clone(segment), ph) // not the whole proof
		}
	}
	if err != nil {
		return nil, err
	}
	var c claims
	d := json.NewDecoder(strings.NewReader(string(payload)))
	d.UseNumber()
	if err := d.Decode(&c); err != nil {
		return nil, invalid("the proof's claims are not a JSON object")
	}
	if c.JTI == "" || c.HTM == "" || c.HTU == "" || c.IAT == "" {
		return nil, invalid("the proof must carry jti, htm, htu and iat (RFC 9449 Section 4.2)")
	}
	if len(c.JTI) > 256 {
		return nil, invalid("the proof's jti is too long")
	}
	if c.HTM != req.Method {
		return nil, invalid("the proof's htm does not match the request's method")
	}
	if !SameURL(c.HTU, req.URL) {
		return nil, invalid("the proof's htu does not match the endpoint's URL")
	}
	iatF, err := c.IAT.Float64()
	if err != nil {
		return nil, invalid("the proof's iat is not a number")
	}
	iat := time.Unix(int64(iatF), 0)
	now := v.now()
	if iat.Before(now.Add(-v.window)) || iat.After(now.Add(v.window)) {
		return nil, invalid("the proof's iat is not within %s of the server's time", v.window)
	}
	if req.AccessToken != "" {
		// §4.3 point 12, §4.2: ath = base64url(SHA-256(access token)).
		want := AccessTokenHash(req.AccessToken)
		if subtle.ConstantTimeCompare([]byte(c.ATH), []byte(want)) != 1 {
			return nil, invalid("the proof's ath does not match the access token")
		}
	}
	return &Proof{JKT: ph.jkt, Alg: ph.alg, JTI: c.JTI, IssuedAt: iat, Nonce: c.Nonce}, nil
}

func (v *Verifier) cachedHeader(segment string) (parsedHeader, bool) {
	if v.headers == nil {
		return parsedHeader{}, false
	}
	return v.headers.Get(segment)
}

// parseFull parses a compact proof with go-jose and checks its header and
// signature (RFC 9449 §4.3 points 2–7): the path of a header not seen
// before.
func parseFull(proof string) (parsedHeader, []byte, error) {
	// Only canonical base64url (RFC 7515 §2, RFC 4648 §3.5: unused bits
	// zero): go-jose checks the signature over a re-encoding of what it
	// decoded, verifyWithKey over the segments as sent; with one encoding
	// per value the two decide alike.
	for _, seg := range strings.Split(proof, ".") {
		if _, err := strictB64.DecodeString(seg); err != nil {
			return parsedHeader{}, nil, invalid("the proof is not a JWS signed with ES256, RS256, EdDSA or Ed25519")
		}
	}
	jws, err := jose.ParseSignedCompact(proof, []jose.SignatureAlgorithm{jose.ES256, jose.RS256, jose.EdDSA, AlgEd25519})
	if err != nil {
		return parsedHeader{}, nil, invalid("the proof is not a JWS signed with ES256, RS256, EdDSA or Ed25519")
	}
	if len(jws.Signatures) != 1 {
		return parsedHeader{}, nil, invalid("the proof must carry one signature")
	}
	h := jws.Signatures[0].Protected
	// §4.2, §4.3 point 4: typ dpop+jwt.
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != "dpop+jwt" {
		return parsedHeader{}, nil, invalid("the proof's typ must be dpop+jwt")
	}
	// §4.2: the public key is in jwk, and only there (§4.3 point 7: no
	// private key).
	jwk := h.JSONWebKey
	if jwk == nil || !jwk.Valid() || !jwk.IsPublic() {
		return parsedHeader{}, nil, invalid("the proof's jwk header must be a public key")
	}
	if h.KeyID != "" || h.ExtraHeaders["x5c"] != nil {
		return parsedHeader{}, nil, invalid("the proof's key must be given by jwk alone")
	}
	if err := keyFitsAlg(jwk.Key, h.Algorithm); err != nil {
		return parsedHeader{}, nil, err
	}
	payload, err := verifySignature(jws, proof, jwk, h.Algorithm)
	if err != nil {
		return parsedHeader{}, nil, err
	}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return parsedHeader{}, nil, invalid("the proof's jwk has no thumbprint")
	}
	return parsedHeader{key: jwk.Key, alg: h.Algorithm, jkt: base64.RawURLEncoding.EncodeToString(tp)}, payload, nil
}

// verifyWithKey checks the signature of a compact proof whose header was
// parsed before, with that header's key, and returns the payload. The
// signature is over the JWS signing input (RFC 7515 §5.2), as RFC 7518
// defines it per alg: ES256 is R‖S, 32 bytes each, over SHA-256 (§3.4);
// RS256 is RSASSA-PKCS1-v1_5 over SHA-256 (§3.3); EdDSA and Ed25519 are
// Ed25519 over the input itself (RFC 8037 §3.1).
func verifyWithKey(proof string, ph parsedHeader) ([]byte, error) {
	dot := strings.LastIndexByte(proof, '.')
	input := proof[:dot]
	// Canonical unpadded base64url, as parseFull requires (RFC 7515 §2).
	payload, err1 := strictB64.DecodeString(input[strings.IndexByte(input, '.')+1:])
	sig, err2 := strictB64.DecodeString(proof[dot+1:])
	if err1 != nil || err2 != nil {
		return nil, invalid("the proof is not a JWS signed with ES256, RS256, EdDSA or Ed25519")
	}
	ok := false
	switch k := ph.key.(type) {
	case *ecdsa.PublicKey:
		if len(sig) == 64 {
			h := sha256.Sum256([]byte(input))
			ok = ecdsa.Verify(k, h[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
		}
	case *rsa.PublicKey:
		h := sha256.Sum256([]byte(input))
		ok = rsa.VerifyPKCS1v15(k, crypto.SHA256, h[:], sig) == nil
	case ed25519.PublicKey:
		ok = ed25519.Verify(k, []byte(input), sig)
	}
	if !ok {
		return nil, invalid("the proof's signature does not verify with its jwk")
	}
	return payload, nil
}

// Verify checks a proof completely (RFC 9449 §4.3): Parse, then the
// server nonce when nonces are on (§8: a missing or stale one is
// ErrUseNonce), then records its jti (a jti seen before is ErrInvalidProof;
// nothing else is affected). The nonce is checked before the jti is
// recorded: a client answering use_dpop_nonce signs a new proof anyway.
func (v *Verifier) Verify(ctx context.Context, proof string, req Request) (*Proof, error) {
	p, err := v.Parse(proof, req)
	if err != nil {
		return nil, err
	}
	if v.nonces != nil && !v.nonces.Valid(p.Nonce) {
		return nil, ErrUseNonce
	}
	fresh, err := v.replay.Use(ctx, replayID(p.JKT, p.JTI), 2*v.window+time.Second)
	if err != nil {
		// Fail open (ReplayStore): the iat window (and the nonce) still
		// bound a replayed proof.
		v.onStoreError(err)
		return p, nil
	}
	if !fresh {
		return nil, ErrProofReplayed
	}
	return p, nil
}

// claims are a proof's claims (RFC 9449 §4.2).
type claims struct {
	JTI   string      `json:"jti"`
	HTM   string      `json:"htm"`
	HTU   string      `json:"htu"`
	IAT   json.Number `json:"iat"`
	ATH   string      `json:"ath"`
	Nonce string      `json:"nonce"`
}

// keyFitsAlg refuses a key of another type than alg's.
func keyFitsAlg(key any, alg string) error {
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		if alg == AlgES256 && k.Curve == elliptic.P256() {
			return nil
		}
	case *rsa.PublicKey:
		if alg == AlgRS256 {
			if k.N.BitLen() < minRSABits {
				return invalid("the proof's RSA key is shorter than %d bits", minRSABits)
			}
			return nil
		}
	case ed25519.PublicKey:
		if alg == AlgEdDSA || alg == AlgEd25519 {
			return nil
		}
	}
	return invalid("the proof's jwk does not fit its alg %s", alg)
}

// verifySignature checks the signature with the embedded key and returns
// the payload. go-jose checks every algorithm it knows; the RFC 9864 name
// Ed25519, which it does not, is EdDSA's signature over the same signing
// input (package doc).
func verifySignature(jws *jose.JSONWebSignature, compact string, jwk *jose.JSONWebKey, alg string) ([]byte, error) {
	if alg != AlgEd25519 {
		payload, err := jws.Verify(jwk.Key)
		if err != nil {
			return nil, invalid("the proof's signature does not verify with its jwk")
		}
		return payload, nil
	}
	parts := strings.SplitN(compact, ".", 3)
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !ed25519.Verify(jwk.Key.(ed25519.PublicKey), []byte(parts[0]+"."+parts[1]), sig) {
		return nil, invalid("the proof's signature does not verify with its jwk")
	}
	return jws.UnsafePayloadWithoutVerification(), nil
}

// AccessTokenHash is the ath of an access token (RFC 9449 §4.2):
// base64url of its SHA-256 over the ASCII token.
func AccessTokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// SameURL compares htu to the endpoint's URL without query and fragment
// (RFC 9449 §4.3 point 9), after syntax- and scheme-based normalization
// (RFC 3986 §6.2.2, §6.2.3): case-insensitive scheme and host, a default
// port dropped, an empty path as "/".
func SameURL(htu, endpoint string) bool {
	a, ok1 := normalURL(htu)
	b, ok2 := normalURL(endpoint)
	return ok1 && ok2 && a == b
}

func normalURL(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if port != "" {
		host += ":" + port
	}
	if strings.Contains(u.Hostname(), ":") {
		host = "[" + strings.ToLower(u.Hostname()) + "]"
		if port != "" {
			host += ":" + port
		}
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return scheme + "://" + host + path, true
}

// strictB64 is unpadded base64url with the unused bits of the last
// character required to be zero: one encoding per value.
var strictB64 = base64.RawURLEncoding.Strict()

// replayID is the replay store's key of a proof: its jti under its key,
// so one client's jti values never collide with another's.
func replayID(jkt, jti string) string {
	h := sha256.Sum256([]byte(jkt + "\x00" + jti))
	return base64.RawURLEncoding.EncodeToString(h[:])
}
