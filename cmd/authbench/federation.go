package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The token-exchange mode (issue 25): the native sign-in, RFC 8693
// exchanges of an upstream provider's ID token. authbench is the
// upstream: it serves a discovery document and a JWKS on -upstream-listen
// (the provider's issuer, registered in authd with `authd providers add`)
// and signs a fresh ID token (ES256) for each iteration, for one of 100
// users, before the timed request. Each token is exchanged once.

// fedState is the upstream of a token-exchange run.
type fedState struct {
	issuer string
	signer jose.Signer
	srv    *http.Server
}

func init() {
	modes["token-exchange"] = mode{
		steps:   []string{"token"},
		check:   checkTokenExchange,
		prepare: prepareTokenExchange,
		iter:    iterTokenExchange,
	}
}

func checkTokenExchange(o *options) error {
	if o.ClientID == "" {
		return usagef("-client-id: required for -mode token-exchange (a public client registered for the token exchange grant)")
	}
	if o.UpstreamListen == "" {
		return usagef("-upstream-listen: required for -mode token-exchange (the provider's issuer host:port, as registered in authd)")
	}
	if o.Scope == "" {
		o.Scope = "openid offline_access"
	}
	return nil
}

// prepareTokenExchange starts the upstream and waits until it answers.
func prepareTokenExchange(ctx context.Context, r *runner) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	var kid [8]byte
	_, _ = rand.Read(kid[:])
	jwk := jose.JSONWebKey{Key: key.Public(), KeyID: hex.EncodeToString(kid[:]), Algorithm: "ES256", Use: "sig"}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", jwk.KeyID))
	if err != nil {
		return err
	}
	issuer := "http://" + r.o.UpstreamListen
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": issuer, "jwks_uri": issuer + "/jwks",
			"authorization_endpoint": issuer + "/authorize", "token_endpoint": issuer + "/token",
			"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"ES256"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{jwk}})
	})
	ln, err := net.Listen("tcp", r.o.UpstreamListen)
	if err != nil {
		return fmt.Errorf("upstream: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	r.fed = &fedState{issuer: issuer, signer: signer, srv: srv}
	r.progress.status("token-exchange: upstream provider at %s", issuer)
	return nil
}

// idToken signs a fresh provider ID token for the worker's next user.
func (f *fedState) idToken(audience string, n int) (string, error) {
	var jti [12]byte
	_, _ = rand.Read(jti[:])
	now := time.Now()
	return jwt.Signed(f.signer).Claims(map[string]any{
		"iss": f.issuer, "aud": audience, "sub": fmt.Sprintf("bench-user-%d", n%100),
		"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(), "jti": hex.EncodeToString(jti[:]),
		"email": fmt.Sprintf("bench-user-%d@example.com", n%100), "email_verified": true,
	}).Serialize()
}

// iterTokenExchange exchanges one fresh provider ID token.
func iterTokenExchange(ctx context.Context, w *worker) error {
	r := w.r
	w.n++
	tok, err := r.fed.idToken(r.o.NativeAudience, w.id*1000003+w.n)
	if err != nil {
		return err
	}
	form := url.Values{
		"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token":      {tok},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:id_token"},
		"client_id":          {r.o.ClientID},
		"scope":              {r.o.Scope},
	}.Encode()
	return w.step("token", func() error {
		tb, err := r.postForm(ctx, "/oauth2/token", form, false)
		if err == nil && tb.AccessToken == "" {
			err = &checkError{"token response without access_token"}
		}
		return err
	})
}
