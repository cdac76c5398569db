package dpop_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/authd/authd/dpop"
)

const tokenURL = "https://auth.example.com/oauth2/token"

type keyCase struct {
	alg string
	key crypto.Signer
}

func keys(t *testing.T) []keyCase {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	return []keyCase{{dpop.AlgES256, ec}, {dpop.AlgRS256, rs}, {dpop.AlgEdDSA, ed}, {dpop.AlgEd25519, ed}}
}

func verifier(now time.Time, nonces *dpop.Nonces) *dpop.Verifier {
	return dpop.NewVerifier(dpop.Options{Now: func() time.Time { return now }, Replay: dpop.NewMemory(), Nonces: nonces})
}

func TestVerifyEveryAlg(t *testing.T) {
	now := time.Now()
	for _, k := range keys(t) {
		t.Run(k.alg, func(t *testing.T) {
			v := verifier(now, nil)
			p, err := dpop.NewProof(k.key, k.alg, dpop.ProofClaims{Method: "POST", URL: tokenURL + "?x=1#f", IssuedAt: now})
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.Verify(context.Background(), p, dpop.Request{Method: "POST", URL: tokenURL})
			if err != nil {
				t.Fatal(err)
			}
			want, _ := dpop.Thumbprint(k.key.Public())
			if got.JKT != want || len(want) != 43 {
				t.Fatalf("jkt %q, want %q", got.JKT, want)
			}
			// §11.1: the same proof twice is refused.
			if _, err := v.Verify(context.Background(), p, dpop.Request{Method: "POST", URL: tokenURL}); !errors.Is(err, dpop.ErrInvalidProof) {
				t.Fatalf("replayed jti: %v", err)
			}
		})
	}
}

func TestVerifyRefuses(t *testing.T) {
	now := time.Now()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	sign := func(c dpop.ProofClaims) string {
		if c.IssuedAt.IsZero() {
			c.IssuedAt = now
		}
		p, err := dpop.NewProof(ec, "ES256", c)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := dpop.ProofClaims{Method: "POST", URL: tokenURL}
	withHeader := func(h map[string]any) string {
		// A proof with a chosen header, signed with ec (go-jose signs the
		// header it is given).
		opts := &jose.SignerOptions{ExtraHeaders: map[jose.HeaderKey]any{}}
		for k, v := range h {
			opts.ExtraHeaders[jose.HeaderKey(k)] = v
		}
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: ec}, opts)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]any{"jti": "x", "htm": "POST", "htu": tokenURL, "iat": now.Unix()})
		jws, _ := s.Sign(b)
		out, _ := jws.CompactSerialize()
		return out
	}
	hmacProof := func() string {
		hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"dpop+jwt","alg":"HS256"}`))
		pl := base64.RawURLEncoding.EncodeToString([]byte(`{"jti":"x","htm":"POST","htu":"` + tokenURL + `","iat":1}`))
		m := hmac.New(sha256.New, []byte("k"))
		m.Write([]byte(hdr + "." + pl))
		return hdr + "." + pl + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	jwkOf := func() map[string]any {
		b, _ := json.Marshal(jose.JSONWebKey{Key: ec.Public()})
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	privJWK := func() map[string]any {
		b, _ := json.Marshal(jose.JSONWebKey{Key: ec})
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	tamper := func(p string) string { return p[:len(p)-4] + "AAAA" }
	for name, c := range map[string]struct {
		proof string
		req   dpop.Request
	}{
		"empty":          {"", dpop.Request{Method: "POST", URL: tokenURL}},
		"garbage":        {"a.b.c", dpop.Request{Method: "POST", URL: tokenURL}},
		"htm":            {sign(good), dpop.Request{Method: "GET", URL: tokenURL}},
		"htu host":       {sign(good), dpop.Request{Method: "POST", URL: "https://evil.example.com/oauth2/token"}},
		"htu path":       {sign(good), dpop.Request{Method: "POST", URL: "https://auth.example.com/oauth2/userinfo"}},
		"iat old":        {sign(dpop.ProofClaims{Method: "POST", URL: tokenURL, IssuedAt: now.Add(-2 * time.Minute)}), dpop.Request{Method: "POST", URL: tokenURL}},
		"iat future":     {sign(dpop.ProofClaims{Method: "POST", URL: tokenURL, IssuedAt: now.Add(2 * time.Minute)}), dpop.Request{Method: "POST", URL: tokenURL}},
		"ath missing":    {sign(good), dpop.Request{Method: "POST", URL: tokenURL, AccessToken: "at"}},
		"ath other":      {sign(dpop.ProofClaims{Method: "POST", URL: tokenURL, AccessToken: "other"}), dpop.Request{Method: "POST", URL: tokenURL, AccessToken: "at"}},
		"signature":      {tamper(sign(good)), dpop.Request{Method: "POST", URL: tokenURL}},
		"hmac":           {hmacProof(), dpop.Request{Method: "POST", URL: tokenURL}},
		"typ missing":    {withHeader(map[string]any{"jwk": jwkOf()}), dpop.Request{Method: "POST", URL: tokenURL}},
		"typ jwt":        {withHeader(map[string]any{"typ": "JWT", "jwk": jwkOf()}), dpop.Request{Method: "POST", URL: tokenURL}},
		"no jwk":         {withHeader(map[string]any{"typ": "dpop+jwt"}), dpop.Request{Method: "POST", URL: tokenURL}},
		"private jwk":    {withHeader(map[string]any{"typ": "dpop+jwt", "jwk": privJWK()}), dpop.Request{Method: "POST", URL: tokenURL}},
		"two proofs":     {sign(good) + "." + sign(good), dpop.Request{Method: "POST", URL: tokenURL}},
		"json serialize": {`{"payload":"e30","signatures":[]}`, dpop.Request{Method: "POST", URL: tokenURL}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := verifier(now, nil).Verify(context.Background(), c.proof, c.req)
			if !errors.Is(err, dpop.ErrInvalidProof) {
				t.Fatalf("got %v, want ErrInvalidProof", err)
			}
		})
	}
}

func TestVerifyWithAth(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p, _ := dpop.NewProof(ec, "ES256", dpop.ProofClaims{Method: "GET", URL: "https://auth.example.com/userinfo", AccessToken: "tok"})
	if _, err := verifier(time.Now(), nil).Verify(context.Background(), p, dpop.Request{Method: "GET", URL: "https://AUTH.example.com:443/userinfo", AccessToken: "tok"}); err != nil {
		t.Fatal(err)
	}
}

func TestNonces(t *testing.T) {
	secret := []byte(strings.Repeat("s", 32))
	now := time.Now()
	clock := func() time.Time { return now }
	n := dpop.NewNonces(secret, time.Minute, clock)
	// Another replica with the same secret accepts it (stateless).
	other := dpop.NewNonces(secret, time.Minute, clock)
	cur := n.Current()
	if !other.Valid(cur) || n.Valid("") || n.Valid("x") {
		t.Fatal("nonce validity")
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	v := verifier(now, n)
	p, _ := dpop.NewProof(ec, "ES256", dpop.ProofClaims{Method: "POST", URL: tokenURL, IssuedAt: now})
	if _, err := v.Verify(context.Background(), p, dpop.Request{Method: "POST", URL: tokenURL}); !errors.Is(err, dpop.ErrUseNonce) {
		t.Fatalf("no nonce: %v", err)
	}
	p, _ = dpop.NewProof(ec, "ES256", dpop.ProofClaims{Method: "POST", URL: tokenURL, IssuedAt: now, Nonce: cur})
	if _, err := v.Verify(context.Background(), p, dpop.Request{Method: "POST", URL: tokenURL}); err != nil {
		t.Fatal(err)
	}
	later := dpop.NewNonces(secret, time.Minute, func() time.Time { return now.Add(time.Minute) })
	much := dpop.NewNonces(secret, time.Minute, func() time.Time { return now.Add(3 * time.Minute) })
	if !later.Valid(cur) || much.Valid(cur) {
		t.Fatal("a nonce is valid in its slot and the next only")
	}
	if dpop.NewNonces([]byte(strings.Repeat("t", 32)), time.Minute, clock).Valid(cur) {
		t.Fatal("a nonce under another secret")
	}
}

type failing struct{}

func (failing) Use(context.Context, string, time.Duration) (bool, error) {
	return false, errors.New("down")
}

func TestReplayStoreFailsOpen(t *testing.T) {
	var reported error
	v := dpop.NewVerifier(dpop.Options{Replay: failing{}, OnStoreError: func(err error) { reported = err }})
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p, _ := dpop.NewProof(ec, "ES256", dpop.ProofClaims{Method: "POST", URL: tokenURL})
	if _, err := v.Verify(context.Background(), p, dpop.Request{Method: "POST", URL: tokenURL}); err != nil || reported == nil {
		t.Fatalf("fail open: %v %v", err, reported)
	}
}

// rawSign signs a JWS signing input as RFC 7518 §3.3/§3.4 and RFC 8037
// §3.1 define it, whatever the header says.
func rawSign(t *testing.T, key crypto.Signer, input string) string {
	t.Helper()
	var sig []byte
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		h := sha256.Sum256([]byte(input))
		r, s, err := ecdsa.Sign(rand.Reader, k, h[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	case *rsa.PrivateKey:
		h := sha256.Sum256([]byte(input))
		var err error
		if sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, h[:]); err != nil {
			t.Fatal(err)
		}
	case ed25519.PrivateKey:
		sig = ed25519.Sign(k, []byte(input))
	}
	return base64.RawURLEncoding.EncodeToString(sig)
}

// TestCachedHeader: once a key's header is known, later proofs under it
// skip the JOSE parse (Verifier.Parse), and are still refused for
// everything a first proof would be: another key's signature under the
// cached header, a tampered payload or signature. A verifier without the
// cache gives the same verdicts.
func TestCachedHeader(t *testing.T) {
	now := time.Now()
	req := dpop.Request{Method: "POST", URL: tokenURL}
	attackers := keys(t) // same algs, other keys
	for i, k := range keys(t) {
		t.Run(k.alg, func(t *testing.T) {
			proof := func(c dpop.ProofClaims) string {
				c.Method, c.URL, c.IssuedAt = "POST", tokenURL, now
				p, err := dpop.NewProof(k.key, k.alg, c)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			first := proof(dpop.ProofClaims{})
			header := first[:strings.IndexByte(first, '.')]
			payload := func(jti string) string {
				b, _ := json.Marshal(map[string]any{"jti": jti, "htm": "POST", "htu": tokenURL, "iat": now.Unix()})
				return base64.RawURLEncoding.EncodeToString(b)
			}
			second := proof(dpop.ProofClaims{})
			parts := strings.Split(second, ".")
			forged := header + "." + payload("forged") + "." + rawSign(t, attackers[i].key, header+"."+payload("forged"))
			swapped := parts[0] + "." + payload("other") + "." + parts[2]
			tampered := parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2]))
			padded := second + "=="
			want, _ := dpop.Thumbprint(k.key.Public())
			for _, size := range []int{0, -1} {
				v := dpop.NewVerifier(dpop.Options{Now: func() time.Time { return now }, Replay: dpop.NewMemory(), KeyCacheSize: size})
				if p, err := v.Parse(first, req); err != nil || p.JKT != want {
					t.Fatalf("cache %d: first proof: %v", size, err)
				}
				if p, err := v.Parse(second, req); err != nil || p.JKT != want || p.Alg != k.alg {
					t.Fatalf("cache %d: second proof under the same header: %+v, %v", size, p, err)
				}
				for name, bad := range map[string]string{"another key's signature": forged, "payload swapped": swapped, "signature tampered": tampered} {
					if _, err := v.Parse(bad, req); !errors.Is(err, dpop.ErrInvalidProof) {
						t.Fatalf("cache %d: %s: got %v, want ErrInvalidProof", size, name, err)
					}
				}
				// Padding: go-jose refuses it on a first parse; the cached
				// path must decide the same.
				_, errPadded := v.Parse(padded, req)
				_, errCold := dpop.NewVerifier(dpop.Options{Now: func() time.Time { return now }, Replay: dpop.NewMemory(), KeyCacheSize: -1}).Parse(padded, req)
				if (errPadded == nil) != (errCold == nil) {
					t.Fatalf("cache %d: padded proof: %v, without the cache: %v", size, errPadded, errCold)
				}
			}
		})
	}
}
