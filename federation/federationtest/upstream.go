// Package federationtest is a stand-in OpenID provider for tests: a
// discovery document, a JWKS whose keys can rotate, and ID tokens minted
// on demand (including the ones a provider must not be trusted for:
// another issuer, an unpublished kid, a bad signature). It also serves an
// authorization and token endpoint for the browser path. Production code
// never imports it.
package federationtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Upstream is one provider on loopback.
type Upstream struct {
	Server *httptest.Server
	Issuer string

	mu        sync.Mutex
	key       *ecdsa.PrivateKey
	kid       string
	published []jose.JSONWebKey
	gen       int
	// JWKSHits counts JWKS requests.
	JWKSHits int
}

// New starts an upstream; it stops with the test.
func New(t testing.TB) *Upstream {
	u := &Upstream{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": u.Issuer, "jwks_uri": u.Issuer + "/jwks",
			"authorization_endpoint": u.Issuer + "/authorize", "token_endpoint": u.Issuer + "/token",
			"revocation_endpoint":      u.Issuer + "/revoke",
			"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"ES256"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.JWKSHits++
		set := jose.JSONWebKeySet{Keys: append([]jose.JSONWebKey(nil), u.published...)}
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	})
	u.Server = httptest.NewServer(mux)
	t.Cleanup(u.Server.Close)
	u.Issuer = u.Server.URL
	u.Rotate(false)
	return u
}

// Rotate makes a new signing key. With publish false the JWKS is
// replaced at once; callers that want an unpublished kid use Unpublished.
func (u *Upstream) Rotate(keepOld bool) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.gen++
	u.key, u.kid = k, fmt.Sprintf("key-%d", u.gen)
	pub := jose.JSONWebKey{Key: k.Public(), KeyID: u.kid, Algorithm: "ES256", Use: "sig"}
	if keepOld {
		u.published = append(u.published, pub)
	} else {
		u.published = []jose.JSONWebKey{pub}
	}
}

// Claims of a minted token; zero fields get defaults.
type Claims struct {
	Issuer        string
	Subject       string
	Audience      string
	Nonce         string
	Email         string
	EmailVerified any // bool or Apple's "true"
	Name          string
	IssuedAt      time.Time
	Expiry        time.Time
}

// Mint signs an ID token with the current key.
func (u *Upstream) Mint(t testing.TB, c Claims) string {
	u.mu.Lock()
	key, kid := u.key, u.kid
	u.mu.Unlock()
	return Sign(t, key, kid, u.fill(c))
}

// MintUnpublished signs with a key the JWKS does not hold.
func (u *Upstream) MintUnpublished(t testing.TB, c Claims) string {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	return Sign(t, k, "never-published", u.fill(c))
}

func (u *Upstream) fill(c Claims) map[string]any {
	now := time.Now()
	if c.Issuer == "" {
		c.Issuer = u.Issuer
	}
	if c.IssuedAt.IsZero() {
		c.IssuedAt = now
	}
	if c.Expiry.IsZero() {
		c.Expiry = now.Add(10 * time.Minute)
	}
	m := map[string]any{"iss": c.Issuer, "sub": c.Subject, "aud": c.Audience,
		"iat": c.IssuedAt.Unix(), "exp": c.Expiry.Unix()}
	if c.Nonce != "" {
		m["nonce"] = c.Nonce
	}
	if c.Email != "" {
		m["email"] = c.Email
	}
	if c.EmailVerified != nil {
		m["email_verified"] = c.EmailVerified
	}
	if c.Name != "" {
		m["name"] = c.Name
	}
	return m
}

// Sign signs claims with key as kid (ES256).
func Sign(t testing.TB, key *ecdsa.PrivateKey, kid string, claims map[string]any) string {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	s, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
