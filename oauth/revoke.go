package oauth

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

// handleRevoke implements RFC 7009 token revocation: parse, authenticate
// the client as at the token endpoint (RFC 7009 §2.1), revoke, write.
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	client, err := s.formClient(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	token := r.PostForm.Get("token")
	if token == "" {
		// RFC 7009 §2.1: token is REQUIRED.
		s.writeError(w, r, fosite.ErrInvalidRequest.WithHint("The token parameter is missing (RFC 7009 Section 2.1)."))
		return
	}
	if err := s.revoke(ctx, client, token, r.PostForm.Get("token_type_hint")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// revoke ends the grant that token belongs to (RFC 7009 §2.1): its refresh
// and access tokens, and through revocation.Store its replay records and
// cache entries. The token may be one that is no longer active — a
// refresh token already rotated, an access token already replaced: the app
// revokes what it holds, and that must still end the grant (the new pair
// may be one whose response it never received). Rules:
//   - token_type_hint only orders the lookups (§2.1);
//   - a token this server did not issue, or an unknown one, is 200 with
//     nothing revoked (§2.2: invalid tokens do not cause an error);
//   - a token issued to another client is refused with unauthorized_client
//     and stays active (§2.1: "the request is refused and the client is
//     informed of the error");
//   - a storage failure is 503 with Retry-After (§2.2.1), so the client
//     retries.
func (s *Server) revoke(ctx context.Context, client fosite.Client, token, hint string) error {
	p := s.provider
	lookups := []func() (fosite.Requester, error){
		func() (fosite.Requester, error) {
			if p.strategy.Enigma.Validate(ctx, strings.TrimPrefix(token, "ory_rt_")) != nil || !strings.HasPrefix(token, "ory_rt_") {
				return nil, storage.ErrNotFound
			}
			return s.revoker.GetRefreshTokenSession(ctx, p.strategy.RefreshTokenSignature(ctx, token), newSession(""))
		},
		func() (fosite.Requester, error) {
			if p.strategy.Enigma.Validate(ctx, strings.TrimPrefix(token, "ory_at_")) != nil || !strings.HasPrefix(token, "ory_at_") {
				return nil, storage.ErrNotFound
			}
			return s.revoker.GetAccessTokenSession(ctx, p.strategy.AccessTokenSignature(ctx, token), newSession(""))
		},
	}
	if hint == "access_token" {
		lookups[0], lookups[1] = lookups[1], lookups[0]
	}
	var grant fosite.Requester
	for _, look := range lookups {
		req, err := look()
		if req != nil && (err == nil || errors.Is(err, storage.ErrInactiveToken)) {
			grant = req
			break
		}
		if err != nil && !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, storage.ErrInactiveToken) {
			return fosite.ErrTemporarilyUnavailable.WithHint("The token could not be looked up; retry the request.").WithWrap(err)
		}
	}
	if grant == nil {
		return nil
	}
	if grant.GetClient().GetID() != client.GetID() {
		return fosite.ErrUnauthorizedClient.WithHint("The token was not issued to this client; it was not revoked (RFC 7009 Section 2.1).")
	}
	id := grant.GetID()
	rctx := context.WithoutCancel(ctx) // a revocation is not abandoned halfway
	// One transaction for the grant's refresh and access tokens
	// (revocation.Store), then its replay cache entries; a retry of a
	// revocation interrupted anywhere finds the token (inactive or not)
	// and finishes the job.
	if err := s.revoker.RevokeRefreshToken(rctx, id); err != nil {
		return fosite.ErrTemporarilyUnavailable.WithHint("The token could not be revoked; retry the request.").WithWrap(err)
	}
	return nil
}
