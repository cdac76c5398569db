package oauth

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"regexp"

	"github.com/ory/fosite"

	"github.com/authd/authd/dpop"
	"github.com/authd/authd/secevent"
)

// DPoP at the token endpoint (RFC 9449; docs/architecture.md, "The token
// pipeline"). The proof is verified in the pipeline, after the grant's own
// checks and before the exchange, so a refused proof (invalid_dpop_proof)
// or a nonce round trip (use_dpop_nonce, §8) reads and consumes nothing:
// the code stays unused and the refresh token unrotated. A valid proof
// gives the request its key's thumbprint (tokenRequest.jkt), which
//
//   - enters the replay fingerprint (exchangecache.BoundFingerprint): a
//     retry with a fresh proof from the same key is the same request, one
//     from another key (or none) is reuse;
//   - binds the tokens (grantExchanger.bind): cnf.jkt in the session
//     (§6.1), token_type DPoP (§5).

// Session Extra keys of a DPoP binding.
const (
	// extraCnfJKT is the thumbprint the tokens are bound to (cnf.jkt).
	extraCnfJKT = "cnf_jkt"
	// extraDPoPJKT is the dpop_jkt of the authorization request (§10).
	extraDPoPJKT = "dpop_jkt"
)

// RFC 9449 §12.2 error codes, answered as RFC 6749 §5.2 errors.
func errInvalidDPoPProof(hint string) *fosite.RFC6749Error {
	return &fosite.RFC6749Error{ErrorField: "invalid_dpop_proof", DescriptionField: "The DPoP proof is invalid.",
		HintField: hint, CodeField: http.StatusBadRequest}
}

var errUseDPoPNonce = &fosite.RFC6749Error{ErrorField: "use_dpop_nonce",
	DescriptionField: "Authorization server requires nonce in DPoP proof.",
	HintField:        "Sign a new proof with the nonce of the DPoP-Nonce header (RFC 9449 Section 8).",
	CodeField:        http.StatusBadRequest}

// jktRe is a SHA-256 JWK thumbprint, base64url without padding (RFC 7638).
var jktRe = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// checkDPoP verifies the request's DPoP proof, if any (RFC 9449 §4.3), and
// sets req.jkt. One DPoP header at most (§4.3 point 1). A client
// registered with dpop_bound_access_tokens must send one (§5.2).
func (s *Server) checkDPoP(ctx context.Context, req *tokenRequest, requireDPoP bool) error {
	vs := req.r.Header.Values("DPoP")
	req.dpop = len(vs) > 0
	switch {
	case len(vs) == 0 && requireDPoP:
		return errInvalidDPoPProof("This client must present a DPoP proof (dpop_bound_access_tokens, RFC 9449 Section 5.2).")
	case len(vs) == 0:
		return nil
	case len(vs) > 1:
		return errInvalidDPoPProof("More than one DPoP header (RFC 9449 Section 4.3).")
	}
	p, err := s.dpopToken.Verify(ctx, vs[0], dpop.Request{Method: http.MethodPost, URL: s.cfg.Issuer + cmp.Or(req.htu, pathToken)})
	if errors.Is(err, dpop.ErrUseNonce) {
		return errUseDPoPNonce
	}
	if err != nil {
		if errors.Is(err, dpop.ErrProofReplayed) {
			s.security.Record(ctx, secevent.Event{Kind: secevent.DPoPProofReplay, ClientID: req.client.GetID(), Source: clientIP(req.r)})
		}
		return errInvalidDPoPProof(errorDescription(err.Error()))
	}
	req.jkt = p.JKT
	return nil
}

// setDPoPNonce sends a fresh nonce (RFC 9449 §8.2) on every answer to a
// request that carried a proof, computed now: a replayed response gets the
// current nonce, never one from the cache.
func (s *Server) setDPoPNonce(w http.ResponseWriter, req *tokenRequest, err error) {
	n := s.dpopToken.Nonces()
	if n == nil {
		return
	}
	if req.dpop || errors.Is(err, errUseDPoPNonce) {
		w.Header().Set("DPoP-Nonce", n.Current())
	}
}

// sessionJKT returns a session's Extra string value k.
func sessionJKT(sess fosite.Session, k string) string {
	ds, ok := sess.(*fosite.DefaultSession)
	if !ok || ds.Extra == nil {
		return ""
	}
	v, _ := ds.Extra[k].(string)
	return v
}

// bind checks the key bindings of the code or refresh token a request
// presents, and binds the tokens it will get to the request's key. It
// runs after fosite read the grant and before anything is written, so a
// refusal consumes nothing.
//
//   - A code whose authorization request carried dpop_jkt is redeemed
//     only with a proof from that key (RFC 9449 §10.1: invalid_grant).
//   - A public client's refresh token issued with DPoP is used only with a
//     proof from the same key (§5: bound to the key; a confidential
//     client's refresh token is bound to its client authentication).
//
// The tokens are bound where they are written (fositeStore's
// CreateAccessTokenSession, withBinding): fosite re-reads the code into
// the session between here and there.
func bind(req *tokenRequest, ar fosite.AccessRequester) error {
	ds, ok := ar.GetSession().(*fosite.DefaultSession)
	if !ok {
		return nil
	}
	switch req.grantType {
	case "authorization_code":
		if want := sessionJKT(ds, extraDPoPJKT); want != "" && want != req.jkt {
			return fosite.ErrInvalidGrant.WithHint("The authorization code is bound to another DPoP key (dpop_jkt, RFC 9449 Section 10).")
		}
	case "refresh_token":
		if want := sessionJKT(ds, extraCnfJKT); want != "" && want != req.jkt && req.client.IsPublic() {
			return fosite.ErrInvalidGrant.WithHint("The refresh token is bound to a DPoP key; present a proof from it (RFC 9449 Section 5).")
		}
	}
	return nil
}

type bindingKey struct{}

// withBinding marks ctx as a token request whose new tokens are bound to
// jkt ("": unbound, bearer).
func withBinding(ctx context.Context, jkt string) context.Context {
	return context.WithValue(ctx, bindingKey{}, jkt)
}

// bindSession sets the session's cnf.jkt (RFC 9449 §6.1) to the binding
// of ctx, if ctx has one: the tokens written with it are bound to the
// request's key, or, without a proof, to none. The code's dpop_jkt has
// done its work and is not carried on.
func bindSession(ctx context.Context, r fosite.Requester) {
	jkt, ok := ctx.Value(bindingKey{}).(string)
	if !ok {
		return
	}
	ds, ok := r.GetSession().(*fosite.DefaultSession)
	if !ok {
		return
	}
	if ds.Extra == nil {
		ds.Extra = map[string]any{}
	}
	delete(ds.Extra, extraDPoPJKT)
	if jkt != "" {
		ds.Extra[extraCnfJKT] = jkt
	} else {
		delete(ds.Extra, extraCnfJKT)
	}
}

// requiresDPoP reports whether the client is registered with
// dpop_bound_access_tokens (RFC 9449 §5.2).
func requiresDPoP(c fosite.Client) bool {
	d, ok := c.(interface{ RequiresDPoP() bool })
	return ok && d.RequiresDPoP()
}
