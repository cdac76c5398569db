package main

// The sso-consent mode: a returning user of a third-party client. The
// client is public (PKCE, token_endpoint_auth_method none), not
// skip_consent, and asks for an ID token (scope openid, a nonce). Each
// worker signs in once and allows the consent page once (not timed); every
// timed iteration is the return visit: the authorization request with the
// session cookie gets a code without the consent page, because authd
// remembers the consent (identity.Service.ConsentCovers), and without the
// one-tap page when the redirect is https (RFC 8252 §8.6); then the token
// exchange, whose ID token is checked (nonce, aud, iss, exp; the signature
// against the JWKS fetched once, on 1 in sigEvery iterations).

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"
)

// oidcState is the sso-consent mode's run state: the issuer and the ID
// token verification keys, and how many return visits were not silent.
type oidcState struct {
	issuer string

	mu      sync.Mutex
	keys    map[string]any // kid → *ecdsa.PublicKey or *rsa.PublicKey
	fetched time.Time

	oneTaps  atomic.Int64 // return visits that needed the one-tap page
	consents atomic.Int64 // return visits that showed the consent page (errors)
	tokens   atomic.Int64 // ID tokens of the timed phase
}

func needThirdPartyClient(o *options) error {
	if o.ClientID == "" {
		return usagef("-client-id: required for -mode %s (a public client without skip_consent; an https -redirect-uri for silent return visits)", o.Mode)
	}
	if o.Password == "" {
		return usagef("-password (or AUTHBENCH_PASSWORD): required for -mode %s", o.Mode)
	}
	if o.Scope == "" {
		o.Scope = "openid offline_access"
	}
	if !slices.Contains(strings.Fields(o.Scope), "openid") {
		return usagef("-scope: -mode %s checks the ID token, so the scope must include openid", o.Mode)
	}
	return nil
}

// prepareConsent fetches the issuer and the JWKS, then signs in every
// worker's browser with the password and allows the consent page. The
// first browser asks as an app does on a first visit: for a third-party
// client with no remembered consent the page appears by itself. The others
// ask with prompt=consent (the user has consented meanwhile, so only that
// shows the page again), so each browser has allowed the consent form once.
func prepareConsent(ctx context.Context, r *runner) error {
	r.progress.status("%s: signing in %d browsers and allowing the consent page (not timed)", r.o.Mode, len(r.workers))
	st := &oidcState{}
	r.oidc = st
	if err := st.discover(ctx, r); err != nil {
		return err
	}
	if err := st.refreshKeys(ctx, r, true); err != nil {
		return err
	}
	first := func(w *worker, opts ...oauth2.AuthCodeOption) (bool, error) {
		w.browser = r.newBrowser()
		nonce := oauth2.GenerateVerifier()
		code, verifier, consented, err := w.signInWith(ctx, w.browser, false, append(opts, oauth2.SetAuthURLParam("nonce", nonce))...)
		if err != nil {
			return false, err
		}
		// The sign-in's own code: exchanged, and its ID token checked,
		// so a misconfigured client fails here, not in the timed phase.
		tb, err := r.exchangeCode(ctx, code, verifier)
		if err != nil {
			return false, err
		}
		return consented, r.checkIDToken(ctx, tb.IDToken, nonce, true)
	}
	consentedFirst, err := first(r.workers[0])
	if err != nil {
		return fmt.Errorf("first sign-in: %w", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(r.workers))
	for i, w := range r.workers[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			consented, err := first(w, oauth2.SetAuthURLParam("prompt", "consent"))
			if err == nil && !consented {
				err = errors.New("prompt=consent: no consent page after the password")
			}
			errs[i+1] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	how := "the first sign-in showed the consent page by itself (a third-party client, no remembered consent)"
	if !consentedFirst {
		how = "the first sign-in showed no consent page: the client is skip_consent (first-party), or the user's consent was remembered from an earlier run"
	}
	r.prepStatus = fmt.Sprintf("%d browsers signed in and allowed the consent page once each; %s", len(r.workers), how)
	r.progress.status("%s: %s", r.o.Mode, r.prepStatus)
	return nil
}

// iterSSOConsent is one return visit: the code with the session cookie and
// the remembered consent, then the exchange and the ID token check.
func iterSSOConsent(ctx context.Context, w *worker) error {
	r := w.r
	nonce := oauth2.GenerateVerifier()
	state := w.nextState()
	authURL, verifier := r.authorizeURL(state, oauth2.SetAuthURLParam("nonce", nonce))
	var code string
	err := w.step("authorize", func() error {
		status, loc, body, err := r.get(ctx, w.browser, authURL)
		if err != nil {
			return err
		}
		if status == http.StatusOK {
			f, ok := parseForm(body)
			switch {
			case ok && f.consent:
				r.oidc.consents.Add(1)
				return &httpError{status: status, code: "(consent page again: consent not remembered)"}
			case ok && f.oneTap:
				// A private-use redirect: one tap, as in sso (RFC 8252 §8.6).
				r.oidc.oneTaps.Add(1)
				if status, loc, _, err = r.submit(ctx, w.browser, f, url.Values{"step": {"continue"}}); err != nil {
					return err
				}
			default:
				return &httpError{status: status, code: "(login page: session cookie not accepted)"}
			}
		}
		code, err = r.codeFrom(status, loc, state)
		return err
	})
	if err != nil {
		return err
	}
	return w.step("token", func() error {
		tb, err := r.exchangeCode(ctx, code, verifier)
		if err != nil {
			return err
		}
		return r.checkIDToken(ctx, tb.IDToken, nonce, r.oidc.tokens.Add(1)%sigEvery == 1)
	})
}

// discover reads the issuer from the OpenID Provider metadata.
func (st *oidcState) discover(ctx context.Context, r *runner) error {
	var meta struct {
		Issuer string `json:"issuer"`
	}
	if err := r.getJSON(ctx, "/.well-known/openid-configuration", &meta); err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	if meta.Issuer == "" {
		return errors.New("discovery: no issuer")
	}
	st.issuer = meta.Issuer
	return nil
}

// refreshKeys (re)reads the JWKS from the target (never from a jwks_uri
// elsewhere), at most once a second unless forced.
func (st *oidcState) refreshKeys(ctx context.Context, r *runner, force bool) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !force && time.Since(st.fetched) < time.Second {
		return nil
	}
	var set jose.JSONWebKeySet
	if err := r.getJSON(ctx, "/oauth2/jwks", &set); err != nil {
		return fmt.Errorf("jwks: %w", err)
	}
	keys := map[string]any{}
	for _, k := range set.Keys {
		switch k.Key.(type) {
		case *ecdsa.PublicKey, *rsa.PublicKey:
			keys[k.KeyID] = k.Key
		}
	}
	st.keys, st.fetched = keys, time.Now()
	return nil
}

func (st *oidcState) key(kid string) any {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.keys[kid]
}

// getJSON GETs path on the target and decodes a 200 JSON answer.
func (r *runner) getJSON(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.o.Target+path, nil)
	if err != nil {
		return err
	}
	status, _, body, err := send(r.client, req)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return &httpError{status: status, code: "(" + path + ")"}
	}
	return json.Unmarshal(body, v)
}

// sigEvery is how often the timed phase verifies an ID token's signature
// (the first, then 1 in sigEvery): an ES256 verification costs authbench
// about 0.35 ms of CPU on this busy 2-core machine, on the cores authd
// uses, the claims about 12 µs. Every token of the preparation is
// verified.
const sigEvery = 16

// checkIDToken checks an ID token as a relying party does (OpenID Connect
// Core §3.1.3.7), cheaply: the payload's iss, aud, exp, sub and nonce, and,
// with sig, the ES256 or RS256 signature with the key named by kid.
func (r *runner) checkIDToken(ctx context.Context, tok, nonce string, sig bool) error {
	if tok == "" {
		return &checkError{"token response without id_token"}
	}
	h, p, signature, ok := splitJWS(tok)
	if !ok {
		return &checkError{"id_token: not a compact JWS"}
	}
	var header struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	var claims struct {
		Iss   string          `json:"iss"`
		Sub   string          `json:"sub"`
		Aud   json.RawMessage `json:"aud"`
		Exp   int64           `json:"exp"`
		Nonce string          `json:"nonce"`
	}
	if decodeSegment(h, &header) != nil || decodeSegment(p, &claims) != nil {
		return &checkError{"id_token: undecodable header or payload"}
	}
	switch {
	case claims.Nonce != nonce:
		return &checkError{"id_token: nonce mismatch"}
	case !audienceHas(claims.Aud, r.o.ClientID):
		return &checkError{"id_token: aud lacks the client_id"}
	case claims.Iss != r.oidc.issuer:
		return &checkError{"id_token: iss is not the issuer"}
	case claims.Sub == "":
		return &checkError{"id_token: no sub"}
	case claims.Exp <= time.Now().Unix():
		return &checkError{"id_token: expired"}
	}
	if !sig {
		return nil
	}
	key := r.oidc.key(header.Kid)
	if key == nil {
		// A key published since the JWKS was read (rotation).
		if err := r.oidc.refreshKeys(ctx, r, false); err != nil {
			return err
		}
		if key = r.oidc.key(header.Kid); key == nil {
			return &checkError{"id_token: kid not in the JWKS"}
		}
	}
	signed := sha256.Sum256([]byte(tok[:len(h)+1+len(p)]))
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		if header.Alg != "ES256" || len(signature) != 64 ||
			!ecdsa.Verify(k, signed[:], new(big.Int).SetBytes(signature[:32]), new(big.Int).SetBytes(signature[32:])) {
			return &checkError{"id_token: bad ES256 signature"}
		}
	case *rsa.PublicKey:
		if header.Alg != "RS256" || rsa.VerifyPKCS1v15(k, crypto.SHA256, signed[:], signature) != nil {
			return &checkError{"id_token: bad RS256 signature"}
		}
	}
	return nil
}

// splitJWS splits a compact JWS into its encoded header and payload and
// its decoded signature.
func splitJWS(tok string) (h, p string, sig []byte, ok bool) {
	h, rest, ok1 := strings.Cut(tok, ".")
	p, s, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(s, ".") {
		return "", "", nil, false
	}
	sig, err := base64.RawURLEncoding.DecodeString(s)
	return h, p, sig, err == nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// audienceHas reports whether aud (a string or an array, OpenID Connect
// Core §2) contains clientID.
func audienceHas(aud json.RawMessage, clientID string) bool {
	var one string
	if json.Unmarshal(aud, &one) == nil {
		return one == clientID
	}
	var many []string
	return json.Unmarshal(aud, &many) == nil && slices.Contains(many, clientID)
}

// finishConsent notes how many return visits were not silent (the one-tap
// page; a consent page is an error of its own).
func finishConsent(r *runner, res *result, _ *recorder) {
	var notes []string
	if n := r.oidc.consents.Load(); n > 0 {
		notes = append(notes, fmt.Sprintf("%d return visits showed the consent page again (errors)", n))
	} else {
		notes = append(notes, "no return visit showed the consent page (consent remembered)")
	}
	if n := r.oidc.oneTaps.Load(); n > 0 {
		notes = append(notes, fmt.Sprintf("%d showed the one-tap page (a private-use redirect, RFC 8252 §8.6; an https -redirect-uri gets the code silently)", n))
	}
	res.Note = strings.Join(notes, "; ")
}
