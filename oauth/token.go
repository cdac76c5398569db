package oauth

import (
	"context"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/exchangecache"
)

// tokenRequest is one token endpoint request, parsed once (RFC 6749 §3.2).
type tokenRequest struct {
	// r is the HTTP request; r.PostForm is parsed.
	r *http.Request
	// grantType is the grant_type value ("authorization_code", …), or
	// "unknown" until it is known.
	grantType string
	// client is the authenticated client.
	client fosite.Client
	// id is the grant's replay identity; zero for client_credentials.
	id exchangeIdentity
	// dpop is whether the request carried a DPoP header; jkt is the JWK
	// thumbprint (RFC 7638) of its verified proof's key, "" without one
	// (dpop.go).
	dpop bool
	jkt  string
	// htu is the endpoint's path the DPoP proof must name (RFC 9449
	// §4.3); "" is the token endpoint.
	htu string
	// step is the challenge endpoint's parsed step (challenge.go); nil at
	// the token endpoint.
	step *challengeStep
}

// handleToken serves the token endpoint (RFC 6749 §3.2) as one pipeline
// (docs/architecture.md, "The token pipeline"):
//
//  1. parse the form once;
//  2. authenticate the client: nothing about the grant is answered to a
//     request whose client does not authenticate;
//  3. rate-limit the authenticated client_id;
//  4. the grant's own checks, the DPoP proof (RFC 9449: before anything
//     is read or consumed, so a use_dpop_nonce round trip costs nothing),
//     and the replay identity, which includes the proof's key;
//  5. exchange: the replay cache, then fosite and the durable record;
//  6. write the answer, and record the metrics, in one place.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	req := &tokenRequest{r: r, grantType: "unknown"}
	a, err := s.token(req)
	s.writeToken(w, req, a, err, start)
}

// token runs steps 1–5.
func (s *Server) token(req *tokenRequest) (*answer, error) {
	r := req.r
	ctx := r.Context()
	// 1–2. Parse, and authenticate the client.
	client, err := s.formClient(r)
	if err != nil {
		return nil, err
	}
	req.client = client
	// 3. Rate-limit the authenticated client. A confidential client proved
	// its secret; a public client only named itself, so it is charged
	// after the grant's own checks, once its code or refresh token proved
	// to be one this server issued: nobody can push a client_id they do
	// not own into 429. A public client's failed grant is given back and
	// charged to its source address instead (publicGrantFailed).
	if !client.IsPublic() {
		if err := s.chargeClient(ctx, client); err != nil {
			return nil, err
		}
	}
	// 4. The grant's own checks.
	g, name, err := s.lookupGrant(r.PostForm)
	if err != nil {
		return nil, err
	}
	req.grantType = name
	if err := g.check(ctx, r.PostForm); err != nil {
		return nil, err
	}
	if v, ok := g.(interface {
		verify(context.Context, fosite.Client, url.Values) (context.Context, error)
	}); ok {
		// A grant whose proof is verified before storage is read (a
		// provider's ID token, grant_token_exchange.go).
		if ctx, err = v.verify(ctx, client, r.PostForm); err != nil {
			return nil, err
		}
	}
	if client.IsPublic() {
		if err := s.chargeClient(ctx, client); err != nil {
			return nil, err
		}
	}
	if err := s.checkDPoP(ctx, req, requiresDPoP(client)); err != nil {
		return nil, err
	}
	req.id = g.identity(ctx, client.GetID(), r.PostForm)
	if req.id.key != "" {
		// The same request means the same key; not the proof's jti or
		// iat, which every retry changes (RFC 9449 §4.2).
		req.id.fingerprint = exchangecache.BoundFingerprint(req.id.fingerprint, req.jkt)
	}
	// 5. Exchange.
	a, err := s.exchanger.exchange(withClient(ctx, client), req)
	if client.IsPublic() && err != nil {
		err = s.publicGrantFailed(ctx, r, client, err)
	}
	if name == grantTokenExchange {
		s.afterTokenExchange(ctx, a, err)
		if err == nil {
			a.body.IssuedTokenType = tokenTypeAccessToken // RFC 8693 §2.2.1
		}
	}
	return a, err
}

// formClient parses a token-endpoint-style request (the token, challenge
// and revocation endpoints) and authenticates its client. Failures from one
// source address beyond a budget get 429 instead of 401; a request that
// authenticates is never refused for what others sent from the same
// address (a load balancer's, say). Client secrets are 256-bit, so this
// bounds noise, not guessing.
func (s *Server) formClient(r *http.Request) (fosite.Client, error) {
	if err := parseTokenForm(r); err != nil {
		return nil, err
	}
	client, err := s.clientAuth.authenticate(r.Context(), r, r.PostForm)
	if err != nil {
		return nil, s.chargeAuthFailure(r, err)
	}
	return client, nil
}

// chargeAuthFailure counts a failed client authentication against the
// request's source address and returns the answer: err, or 429 once the
// address has failed too often.
func (s *Server) chargeAuthFailure(r *http.Request, err error) error {
	if fosite.ErrorToRFC6749Error(err).ErrorField != fosite.ErrInvalidClient.ErrorField {
		return err
	}
	if ok, wait := s.limits.Charge(r.Context(), "client-auth-failures", clientIP(r), s.cfg.AuthFailureLimits.rate()); !ok {
		return errTooManyRequests(wait, "Too many failed client authentications from this address; retry after the Retry-After delay.")
	}
	return err
}

// chargeClient charges one token request to the client's rate limit.
func (s *Server) chargeClient(ctx context.Context, c fosite.Client) error {
	if ok, wait := s.limits.Take(ctx, "token-client", c.GetID(), s.cfg.TokenLimits.rate()); !ok {
		return errTooManyRequests(wait, "Too many token requests for this client; retry after the Retry-After delay.")
	}
	return nil
}

// publicGrantFailed settles a public client's failed grant (a revoked
// refresh token replayed, a wrong code_verifier): it does not count
// against the client's budget, which every user of the app shares (the
// unit step 4 took is given back), but against this source address for
// the client; beyond that budget the failure is answered 429, and a
// request that succeeds is never refused for it.
func (s *Server) publicGrantFailed(ctx context.Context, r *http.Request, c fosite.Client, err error) error {
	if toRFC6749(err).ErrorField != fosite.ErrInvalidGrant.ErrorField {
		return err
	}
	s.limits.Refund(ctx, "token-client", c.GetID(), s.cfg.TokenLimits.rate())
	if ok, wait := s.limits.Charge(ctx, "token-grant-failures", c.GetID()+"\x00"+clientIP(r), s.cfg.AuthFailureLimits.rate()); !ok {
		return errTooManyRequests(wait, "Too many failed token requests for this client from this address; retry after the Retry-After delay.")
	}
	return err
}

// writeToken is step 6: the one place that writes a token endpoint answer
// and records its metrics.
func (s *Server) writeToken(w http.ResponseWriter, req *tokenRequest, a *answer, err error, start time.Time) {
	s.setDPoPNonce(w, req, err)
	if err != nil {
		outcome := toRFC6749(err).ErrorField
		var later *retryLater
		if errors.As(err, &later) {
			outcome = "rate_limited"
			if later == errBusy {
				outcome = "busy"
			}
		}
		s.metrics.tokenRequests.WithLabelValues(req.grantType, outcome).Inc()
		s.writeError(w, req.r, err)
		return
	}
	outcome := "ok"
	if a.path != pathFresh {
		outcome = "replayed"
	}
	s.metrics.tokenRequests.WithLabelValues(req.grantType, outcome).Inc()
	s.metrics.exchangeTime.WithLabelValues(req.grantType, a.path).Observe(time.Since(start).Seconds())
	writeJSONBytes(w, http.StatusOK, a.body.appendJSON(make([]byte, 0, a.body.jsonSize())))
}

// parseTokenForm enforces the request format of the token, revocation and
// introspection endpoints (their routes admit only POST):
// application/x-www-form-urlencoded, a body within maxBodyBytes, and no
// parameter sent twice (RFC 6749 §3.2: request parameters MUST NOT be
// included more than once). It parses r.PostForm. Errors are
// invalid_request (413 for an oversized body).
func parseTokenForm(r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" { // the common case, parsed for free
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/x-www-form-urlencoded" {
			return fosite.ErrInvalidRequest.WithHint("The request body must be application/x-www-form-urlencoded (RFC 6749 Section 3.2); JSON bodies are not accepted.")
		}
	}
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			e := *fosite.ErrInvalidRequest.WithHint("The request body is too large.")
			e.CodeField = http.StatusRequestEntityTooLarge
			return &e
		}
		return fosite.ErrInvalidRequest.WithHint("The request body could not be parsed as a form.")
	}
	for k, v := range r.PostForm {
		if len(v) > 1 {
			return errDuplicateParam(k)
		}
	}
	if r.URL.RawQuery == "" {
		return nil
	}
	for k, v := range r.URL.Query() {
		if _, dup := r.PostForm[k]; dup || len(v) > 1 {
			return errDuplicateParam(k)
		}
	}
	return nil
}

func errDuplicateParam(k string) error {
	return fosite.ErrInvalidRequest.WithHintf("The parameter %s was sent more than once (RFC 6749 Section 3.2).", url.QueryEscape(truncate(k, 40)))
}

// truncate shortens client input before it is echoed in an error.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
