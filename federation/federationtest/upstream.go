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
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
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

	// Next is who signs in at the authorization endpoint (Subject, Email,
	// EmailVerified, Name; the rest is filled in).
	Next Claims
	// ClientID and ClientSecret are what the token endpoint accepts;
	// CheckSecret, when set, checks the presented client_secret instead
	// (Apple's ES256 JWT).
	ClientID     string
	ClientSecret string
	CheckSecret  func(secret string) error
	// FormPost answers the authorization endpoint with a page whose form
	// posts the response (response_mode=form_post), as Apple does.
	codes map[string]pending
	// Revoked lists the tokens posted to the revocation endpoint;
	// RevokeFailures makes its next calls answer 503.
	Revoked        []string
	RevokeFailures int
}

// RevokeFailuresLeft is how many revocations will still fail.
func (u *Upstream) RevokeFailuresLeft() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.RevokeFailures
}

// RevokedTokens returns the tokens revoked so far.
func (u *Upstream) RevokedTokens() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.Revoked...)
}

type pending struct {
	claims    Claims
	challenge string
	redirect  string
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
	mux.HandleFunc("GET /authorize", u.authorize)
	mux.HandleFunc("POST /token", u.token)
	mux.HandleFunc("POST /revoke", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.RevokeFailures > 0 {
			u.RevokeFailures--
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		if r.PostForm.Get("client_id") != u.ClientID || (u.CheckSecret != nil && u.CheckSecret(r.PostForm.Get("client_secret")) != nil) {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		u.Revoked = append(u.Revoked, r.PostForm.Get("token"))
	})
	u.codes = map[string]pending{}
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

// authorize signs Next in at once and sends the code back: a redirect, or
// for response_mode=form_post a page with the form to post (the test
// posts it, as the browser's script would).
func (u *Upstream) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != u.ClientID || q.Get("code_challenge_method") != "S256" || q.Get("nonce") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	code := fmt.Sprintf("%x", b)
	u.mu.Lock()
	c := u.Next
	c.Nonce = q.Get("nonce")
	if c.Audience == "" {
		c.Audience = u.ClientID
	}
	u.codes[code] = pending{claims: c, challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri")}
	u.mu.Unlock()
	if q.Get("response_mode") == "form_post" {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form method="post" action="%s"><input name="code" value="%s"><input name="state" value="%s"><input name="user" value='{"name":{"firstName":"Ann","lastName":"Apple"}}'></form>`,
			html.EscapeString(q.Get("redirect_uri")), code, html.EscapeString(q.Get("state")))
		return
	}
	to, _ := url.Parse(q.Get("redirect_uri"))
	v := to.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	to.RawQuery = v.Encode()
	http.Redirect(w, r, to.String(), http.StatusFound)
}

// token redeems a code once: client authentication, redirect_uri and the
// PKCE verifier (RFC 7636 S256) checked.
func (u *Upstream) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f := r.PostForm
	u.mu.Lock()
	p, ok := u.codes[f.Get("code")]
	delete(u.codes, f.Get("code"))
	check := u.CheckSecret
	u.mu.Unlock()
	sum := sha256.Sum256([]byte(f.Get("code_verifier")))
	switch {
	case !ok || f.Get("redirect_uri") != p.redirect:
		http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
		return
	case f.Get("client_id") != u.ClientID:
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	case check == nil && f.Get("client_secret") != u.ClientSecret, check != nil && check(f.Get("client_secret")) != nil:
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != p.challenge:
		http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	key, kid := u.key, u.kid
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "upstream-at", "token_type": "Bearer", "expires_in": 3600,
		"refresh_token": "upstream-rt-" + p.claims.Subject, "id_token": signFill(key, kid, u.fill(p.claims))})
}

func signFill(key *ecdsa.PrivateKey, kid string, claims map[string]any) string {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		panic(err)
	}
	s, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		panic(err)
	}
	return s
}
