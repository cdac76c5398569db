package oauth

import (
	"context"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

// tokenForm errors.
var (
	errContentType = fosite.ErrInvalidRequest.WithHint("The request body must be application/x-www-form-urlencoded (RFC 6749 §3.2, RFC 7009 §2.1, RFC 7662 §2.1); JSON bodies are not accepted.")
)

// parseTokenForm enforces the request format of the token, revocation and
// introspection endpoints (their routes admit only POST):
// application/x-www-form-urlencoded, a body
// within maxBodyBytes, and no parameter sent twice (RFC 6749 §3.2: request
// parameters MUST NOT be included more than once). It parses r.PostForm.
// Errors are RFC6749Errors with error=invalid_request.
func parseTokenForm(r *http.Request) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return errContentType
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
			return fosite.ErrInvalidRequest.WithHintf("The parameter %q was sent more than once (RFC 6749 §3.2).", k)
		}
	}
	for k, v := range r.URL.Query() {
		if _, dup := r.PostForm[k]; dup || len(v) > 1 {
			return fosite.ErrInvalidRequest.WithHintf("The parameter %q was sent more than once (RFC 6749 §3.2).", k)
		}
	}
	return nil
}

// writeOAuthError writes an RFC 6749 §5.2 error through fosite's writer.
// invalid_client over Basic auth gets 401 and WWW-Authenticate (RFC 6749
// §5.2). Server errors are logged once here, without request content.
func (s *Server) writeOAuthError(w http.ResponseWriter, r *http.Request, err error) {
	rfc := fosite.ErrorToRFC6749Error(err)
	if rfc.CodeField >= 500 {
		s.log.Error("oauth endpoint error", "route", r.URL.Path, "error", err)
	}
	if rfc.ErrorField == fosite.ErrInvalidClient.ErrorField {
		if h := r.Header.Get("Authorization"); h != "" && !hasBearer(h) {
			// The client tried the Authorization header: 401 with a challenge.
			w.Header().Set("WWW-Authenticate", `Basic realm="authd", charset="UTF-8"`)
		}
	}
	s.provider.WriteAccessError(r.Context(), w, nil, rfc)
}

// tokenResponse is a successful token response (RFC 6749 §5.1) plus the
// access token's absolute expiry, from which a replay recomputes expires_in.
type tokenResponse struct {
	Body      map[string]any `json:"body"`
	ExpiresAt time.Time      `json:"exp"`
}

// handleToken serves the token endpoint (RFC 6749 §3.2). Duplicate
// authorization_code and refresh_token requests go through the replay cache
// (replay.go); everything else straight to fosite.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if err := parseTokenForm(r); err != nil {
		s.metrics.tokenRequests.WithLabelValues("unknown", fosite.ErrorToRFC6749Error(err).ErrorField).Inc()
		s.writeOAuthError(w, r, err)
		return
	}
	grant := r.PostForm.Get("grant_type")
	label := grantLabel(grant)
	if ok, wait := s.clientLimit.allow(clientIDOf(r)); !ok {
		s.metrics.tokenRequests.WithLabelValues(label, "rate_limited").Inc()
		w.Header().Set("Retry-After", retryAfter(wait))
		writeJSON(w, http.StatusTooManyRequests, map[string]string{
			"error": "temporarily_unavailable", "error_description": "Too many token requests for this client; retry after the Retry-After delay."})
		return
	}
	if err := s.checkGrantParams(r.Context(), r.PostForm); err != nil {
		s.metrics.tokenRequests.WithLabelValues(label, fosite.ErrorToRFC6749Error(err).ErrorField).Inc()
		s.writeOAuthError(w, r, err)
		return
	}
	if s.replay != nil && (grant == "authorization_code" || grant == "refresh_token") {
		s.replay.serve(w, r, grant, label, start)
		return
	}
	resp, _, err := s.exchange(r.Context(), r)
	s.finishToken(w, r, label, "fresh", start, resp, err)
}

// finishToken writes a token response or error and records metrics.
func (s *Server) finishToken(w http.ResponseWriter, r *http.Request, label, path string, start time.Time, resp *tokenResponse, err error) {
	if err != nil {
		s.metrics.tokenRequests.WithLabelValues(label, fosite.ErrorToRFC6749Error(err).ErrorField).Inc()
		s.writeOAuthError(w, r, err)
		return
	}
	outcome := "ok"
	if path == "replay" {
		outcome = "replayed"
	}
	s.metrics.tokenRequests.WithLabelValues(label, outcome).Inc()
	s.metrics.exchangeTime.WithLabelValues(label, path).Observe(time.Since(start).Seconds())
	// RFC 6749 §5.1: the response MUST carry Cache-Control: no-store.
	writeJSON(w, http.StatusOK, resp.Body)
}

func grantLabel(g string) string {
	switch g {
	case "authorization_code", "refresh_token", "client_credentials":
		return g
	}
	return "other"
}

// exchange runs one token request through fosite: client authentication,
// grant validation, then issuance in one database transaction.
//
// A lost race is translated here: fosite v0.49.0 reads "is this code still
// active?" outside its transaction, so the loser of a concurrent redemption
// fails at the conditional invalidate, which fosite reports as server_error.
// The loser gets invalid_grant, and — as for any reuse (RFC 6749 §4.1.2) —
// the tokens issued from that code are revoked.
//
// The returned state reports whether the request revoked tokens (reuse).
func (s *Server) exchange(ctx context.Context, r *http.Request) (*tokenResponse, *exchangeState, error) {
	ctx, st := withExchangeState(ctx)
	// One token request: fosite's repeated read of the code is answered
	// from the first (storage.CachingStore, when configured).
	ctx = storage.WithRequestMemo(ctx)
	ar, err := s.provider.NewAccessRequest(ctx, r, newSession(""))
	if err != nil {
		return nil, st, err
	}
	resp, err := s.provider.NewAccessResponse(ctx, ar)
	if err != nil {
		return nil, st, s.lostRace(ctx, ar, st, err)
	}
	exp := ar.GetSession().GetExpiresAt(fosite.AccessToken)
	if exp.IsZero() {
		exp = time.Now().Add(s.cfg.AccessTokenTTL)
	}
	return &tokenResponse{Body: resp.ToMap(), ExpiresAt: exp}, st, nil
}

// lostRace translates the storage error of a lost race into invalid_grant
// and returns any other error unchanged. A lost code redemption is code
// reuse: the tokens issued from the code are revoked (RFC 6749 §4.1.2); by
// then fosite has checked that the code belongs to the authenticated client.
func (s *Server) lostRace(ctx context.Context, ar fosite.AccessRequester, st *exchangeState, err error) error {
	switch {
	case errors.Is(err, storage.ErrInvalidatedAuthorizeCode):
		if id := ar.GetID(); id != "" {
			st.revoked = true
			// Detach from the request: revocation must not be abandoned
			// because the client hung up.
			rctx := context.WithoutCancel(ctx)
			if rerr := s.store.RevokeAccessToken(rctx, id); rerr != nil && !errors.Is(rerr, storage.ErrNotFound) {
				s.log.Error("revoke after code reuse", "error", rerr)
			}
			if rerr := s.store.RevokeRefreshToken(rctx, id); rerr != nil && !errors.Is(rerr, storage.ErrNotFound) {
				s.log.Error("revoke after code reuse", "error", rerr)
			}
		}
		return fosite.ErrInvalidGrant.WithHint("The authorization code has already been used.")
	case ar.GetGrantTypes().ExactOne("refresh_token") &&
		(errors.Is(err, storage.ErrInactiveToken) || errors.Is(err, storage.ErrSerializationFailure)):
		// Lost a concurrent rotation of the same refresh token.
		return fosite.ErrInvalidGrant.WithHint("The refresh token was already used or has been revoked.")
	}
	return err
}

// supportedGrants are the grant types the token endpoint serves.
var supportedGrants = map[string]bool{"authorization_code": true, "refresh_token": true, "client_credentials": true}

// checkGrantParams answers requests fosite would misclassify: a missing
// grant_type or a required parameter is invalid_request, an unknown grant
// type is unsupported_grant_type (RFC 6749 §5.2).
//
// A code or refresh token whose HMAC does not verify is invalid_grant here,
// before the database or the replay cache sees it: a bare signature (e.g.
// read from a Redis key name) or a forged key half is worth nothing.
func (s *Server) checkGrantParams(ctx context.Context, form url.Values) error {
	if err := checkGrantParamsPresent(form); err != nil {
		return err
	}
	switch form.Get("grant_type") {
	case "authorization_code":
		if !s.provider.authenticCode(ctx, form.Get("code")) {
			return fosite.ErrInvalidGrant.WithHint("The authorization code is malformed or was not issued by this server.")
		}
	case "refresh_token":
		if !s.provider.authenticRefreshToken(ctx, form.Get("refresh_token")) {
			return fosite.ErrInvalidGrant.WithHint("The refresh token is malformed or was not issued by this server.")
		}
	}
	return nil
}

// checkGrantParamsPresent checks grant_type and the grant's required
// parameter.
func checkGrantParamsPresent(form url.Values) error {
	grant := form.Get("grant_type")
	switch {
	case grant == "":
		return fosite.ErrInvalidRequest.WithHint("The grant_type parameter is missing (RFC 6749 §3.2).")
	case !supportedGrants[grant]:
		return fosite.ErrUnsupportedGrantType.WithHintf("The grant type %q is not supported; use authorization_code, refresh_token or client_credentials.", truncate(grant, 64))
	case grant == "authorization_code" && form.Get("code") == "":
		return fosite.ErrInvalidRequest.WithHint("The code parameter is missing (RFC 6749 §4.1.3).")
	case grant == "refresh_token" && form.Get("refresh_token") == "":
		return fosite.ErrInvalidRequest.WithHint("The refresh_token parameter is missing (RFC 6749 §6).")
	}
	return nil
}

// truncate shortens client input before it is echoed in an error.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
