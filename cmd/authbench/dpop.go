package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

// sign adds a fresh proof for req to it.
func (c *dpopClient) sign(req *http.Request) error {
	u := *req.URL
	u.RawQuery, u.Fragment = "", ""
	proof, err := dpop.NewProof(c.key, dpop.AlgES256, dpop.ProofClaims{Method: req.Method, URL: u.String(), Nonce: c.nonce.Load().(string)})
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
