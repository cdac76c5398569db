// Package rsverify lets a resource server accept DPoP-bound access tokens
// issued by authd (RFC 9449 §7): it reads Authorization: DPoP and the DPoP
// proof, verifies the proof (package dpop: signature, htm, htu, iat, ath,
// jti once), asks authd's introspection endpoint (RFC 7662) whether the
// token is active, and checks that the token's cnf.jkt (RFC 9449 §6.2) is
// the proof's key. A DPoP-bound token presented as Bearer is refused
// (§7.2). It never logs tokens or proofs.
package rsverify

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/authd/authd/dpop"
)

var (
	// ErrNoToken: the request carries no access token (answer 401 with a
	// challenge and no error code, RFC 6750 §3.1).
	ErrNoToken = errors.New("rsverify: no access token")
	// ErrInvalidToken: inactive, unknown, not bound to the proof's key,
	// or DPoP-bound but sent as Bearer (401 invalid_token).
	ErrInvalidToken = errors.New("rsverify: invalid token")
	// ErrInvalidProof: the DPoP proof is refused (401 invalid_dpop_proof).
	ErrInvalidProof = errors.New("rsverify: invalid DPoP proof")
	// ErrIntrospection: authd could not be asked (503; retry).
	ErrIntrospection = errors.New("rsverify: introspection failed")
)

// Token is an accepted access token.
type Token struct {
	Subject, ClientID, Scope string
	// JKT is the thumbprint of the key the token is bound to; "" for a
	// bearer token (accepted only when Verifier.AllowBearer).
	JKT       string
	ExpiresAt time.Time
	// ACR, AMR and AuthTime describe the user's authentication (RFC 9470
	// §3, from introspection); empty for a token issued without them.
	ACR      string
	AMR      []string
	AuthTime time.Time
}

// Verifier verifies requests. Its fields are read-only once in use.
type Verifier struct {
	// IntrospectionURL is authd's introspection endpoint
	// (introspection_endpoint in its metadata).
	IntrospectionURL string
	// ClientID and ClientSecret are the resource server's confidential
	// client credentials (RFC 7662 §2.1), sent with HTTP Basic.
	ClientID, ClientSecret string
	// HTTPClient calls introspection (default: 5 s timeout).
	HTTPClient *http.Client
	// Proofs verifies DPoP proofs; default dpop.NewVerifier with an
	// in-memory jti store (one process).
	Proofs *dpop.Verifier
	// AllowBearer also accepts tokens that are not DPoP-bound, as Bearer.
	AllowBearer bool
}

// Verify verifies r, a request to the resource at resourceURL (the URL
// clients address, which their proofs' htu names).
func (v *Verifier) Verify(ctx context.Context, r *http.Request, resourceURL string) (*Token, error) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, ErrNoToken
	}
	isDPoP := strings.EqualFold(scheme, "DPoP")
	if !isDPoP && !strings.EqualFold(scheme, "Bearer") {
		return nil, ErrNoToken
	}
	var jkt string
	if isDPoP {
		proofs := r.Header.Values("DPoP")
		if len(proofs) != 1 {
			return nil, fmt.Errorf("%w: exactly one DPoP header is required", ErrInvalidProof)
		}
		pv := v.Proofs
		if pv == nil {
			pv = defaultProofs
		}
		p, err := pv.Verify(ctx, proofs[0], dpop.Request{Method: r.Method, URL: resourceURL, AccessToken: token})
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidProof, err)
		}
		jkt = p.JKT
	}
	t, err := v.introspect(ctx, token)
	if err != nil {
		return nil, err
	}
	switch {
	case isDPoP && (t.JKT == "" || subtle.ConstantTimeCompare([]byte(t.JKT), []byte(jkt)) != 1):
		return nil, fmt.Errorf("%w: the token is not bound to the proof's key", ErrInvalidToken)
	case !isDPoP && t.JKT != "":
		return nil, fmt.Errorf("%w: a DPoP-bound token sent as Bearer (RFC 9449 Section 7.2)", ErrInvalidToken)
	case !isDPoP && !v.AllowBearer:
		return nil, fmt.Errorf("%w: DPoP is required", ErrInvalidToken)
	}
	return t, nil
}

var defaultProofs = dpop.NewVerifier(dpop.Options{Replay: dpop.NewMemory()})

func (v *Verifier) introspect(ctx context.Context, token string) (*Token, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.IntrospectionURL, strings.NewReader(url.Values{"token": {token}, "token_type_hint": {"access_token"}}.Encode()))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrIntrospection, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(v.ClientID), url.QueryEscape(v.ClientSecret))
	hc := v.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrIntrospection, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: status %d", ErrIntrospection, resp.StatusCode)
	}
	var out struct {
		Active    bool   `json:"active"`
		Sub       string `json:"sub"`
		ClientID  string `json:"client_id"`
		Scope     string `json:"scope"`
		Exp       int64  `json:"exp"`
		TokenType string `json:"token_type"`
		Cnf       struct {
			JKT string `json:"jkt"`
		} `json:"cnf"`
		ACR      string   `json:"acr"`
		AMR      []string `json:"amr"`
		AuthTime int64    `json:"auth_time"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrIntrospection, err)
	}
	if !out.Active || out.TokenType == "refresh_token" {
		return nil, ErrInvalidToken
	}
	t := &Token{Subject: out.Sub, ClientID: out.ClientID, Scope: out.Scope, JKT: out.Cnf.JKT, ExpiresAt: time.Unix(out.Exp, 0),
		ACR: out.ACR, AMR: out.AMR}
	if out.AuthTime > 0 {
		t.AuthTime = time.Unix(out.AuthTime, 0)
	}
	return t, nil
}

// Challenge is the WWW-Authenticate value answering err (RFC 9449 §7.1).
func Challenge(err error) string {
	algs := `DPoP algs="` + strings.Join(dpop.SigningAlgs(), " ") + `"`
	switch {
	case errors.Is(err, ErrInvalidProof):
		return algs + `, error="invalid_dpop_proof"`
	case errors.Is(err, ErrInvalidToken):
		return algs + `, error="invalid_token"`
	}
	return algs
}
