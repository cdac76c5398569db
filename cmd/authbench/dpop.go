package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/authd/authd/dpop"
)

// dpopClient signs DPoP proofs (RFC 9449 §4.2) as a mobile app does: one
// key for the whole run (so replays of a request present a fresh proof from
// the same key), and the server's last DPoP-Nonce (§8).
type dpopClient struct {
	key   *ecdsa.PrivateKey
	nonce atomic.Value // string
	// tokenEndpoint is the token_endpoint of the server's metadata: the
	// htu of every proof (authbench's proofs go to the token endpoint
	// only).
	tokenEndpoint string
}

func newDPoPClient() (*dpopClient, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	c := &dpopClient{key: key}
	c.nonce.Store("")
	return c, nil
}

// sign adds a fresh proof for req, a token request, to it.
func (c *dpopClient) sign(req *http.Request) error {
	htu := c.tokenEndpoint
	if htu == "" {
		u := *req.URL
		u.RawQuery, u.Fragment = "", ""
		htu = u.String()
	}
	proof, err := dpop.NewProof(c.key, dpop.AlgES256, dpop.ProofClaims{Method: req.Method, URL: htu, Nonce: c.nonce.Load().(string)})
	if err != nil {
		return err
	}
	req.Header.Set("DPoP", proof)
	return nil
}

// observe keeps the nonce of an answer.
func (c *dpopClient) observe(h http.Header) {
	if n := h.Get("DPoP-Nonce"); n != "" {
		c.nonce.Store(n)
	}
}

// tokenEndpoint reads the token_endpoint of the server's metadata (RFC 8414
// §2, served at OpenID Connect Discovery's path).
func (r *runner) tokenEndpoint(ctx context.Context) (string, error) {
	var meta struct {
		TokenEndpoint string `json:"token_endpoint"`
	}
	if err := r.getJSON(ctx, "/.well-known/openid-configuration", &meta); err != nil {
		return "", fmt.Errorf("-dpop: discovery: %w", err)
	}
	if meta.TokenEndpoint == "" {
		return "", errors.New("-dpop: discovery: no token_endpoint")
	}
	return meta.TokenEndpoint, nil
}
