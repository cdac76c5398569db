package oauth

import (
	"context"
	"errors"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/federation"
)

var _ fosite.TokenEndpointHandler = (*tokenExchangeHandler)(nil)

// tokenExchangeHandler mints authd's tokens for a verified provider ID
// token (tokenExchangeGrant), inside the exchange's transaction:
//
//  1. consume the subject token (a conditional insert: a concurrent
//     duplicate waits for this transaction, then finds it consumed and is
//     answered from the replay record this transaction commits);
//  2. find or create the user of (issuer, sub) (federation.Resolve), so a
//     first sign-in and its tokens commit together;
//  3. grant the requested scopes the client may have (openid when none).
type tokenExchangeHandler struct {
	s     *Server
	store fositeStore
}

func (h *tokenExchangeHandler) CanSkipClientAuth(context.Context, fosite.AccessRequester) bool {
	return false
}

func (h *tokenExchangeHandler) CanHandleTokenEndpointRequest(_ context.Context, ar fosite.AccessRequester) bool {
	return ar.GetGrantTypes().ExactOne(grantTokenExchange)
}

func (h *tokenExchangeHandler) HandleTokenEndpointRequest(ctx context.Context, ar fosite.AccessRequester) error {
	if !h.CanHandleTokenEndpointRequest(ctx, ar) {
		return fosite.ErrUnknownRequest
	}
	n := nativeFrom(ctx)
	if n == nil {
		return fosite.ErrServerError.WithHint("The subject token was not verified.")
	}
	client := ar.GetClient()
	requested := ar.GetRequestedScopes()
	if len(requested) == 0 {
		requested = fosite.Arguments{"openid"}
	}
	for _, sc := range requested {
		if !fosite.ExactScopeStrategy(client.GetScopes(), sc) {
			return fosite.ErrInvalidScope.WithHintf("The client may not request the scope %s.", truncate(sc, 40))
		}
	}
	tok := ar.GetRequestForm().Get("subject_token")
	first, err := h.s.store.ConsumeSubjectToken(ctx, subjectTokenKey(tok), n.id.Expiry.Add(federation.Skew))
	if err != nil {
		return fosite.ErrServerError.WithWrap(err)
	}
	if !first {
		return &errGrantUsed{subjectToken: true}
	}
	u, how, err := federation.Resolve(ctx, h.s.store, n.provider, n.id)
	if errors.Is(err, federation.ErrDisabled) {
		return fosite.ErrInvalidRequest.WithHint("The account linked to this identity is disabled.")
	}
	if err != nil {
		return fosite.ErrServerError.WithWrap(err)
	}
	if how != federation.Existing {
		// Audited before the commit: a rollback (a lost race, an outage)
		// leaves a line for a link that did not happen, never the reverse.
		h.s.log.Info("federation audit", "what", "federation."+how, "provider", n.provider.ID, "subject", u.Subject, "path", "native")
	}
	for _, sc := range requested {
		ar.GrantScope(sc)
	}
	now := h.s.now().UTC()
	sess, _ := ar.GetSession().(*fosite.DefaultSession)
	if sess == nil {
		return fosite.ErrServerError.WithHint("Unexpected session type.")
	}
	sess.Subject, sess.Username = u.Subject, u.Username
	sess.Extra = map[string]any{"auth_time": now.Unix(), "amr": []string{"fed"}, "idp": n.provider.ID}
	sess.SetExpiresAt(fosite.AccessToken, now.Add(h.s.cfg.AccessTokenTTL))
	if ar.GetGrantedScopes().Has("offline_access") {
		sess.SetExpiresAt(fosite.RefreshToken, now.Add(h.s.cfg.RefreshTokenTTL))
	}
	return nil
}

func (h *tokenExchangeHandler) PopulateTokenEndpointResponse(ctx context.Context, ar fosite.AccessRequester, resp fosite.AccessResponder) error {
	if !h.CanHandleTokenEndpointRequest(ctx, ar) {
		return fosite.ErrUnknownRequest
	}
	strategy := h.s.provider.strategy
	access, accessSig, err := strategy.GenerateAccessToken(ctx, ar)
	if err != nil {
		return fosite.ErrServerError.WithWrap(err)
	}
	var refresh, refreshSig string
	if ar.GetGrantedScopes().Has("offline_access") {
		if refresh, refreshSig, err = strategy.GenerateRefreshToken(ctx, ar); err != nil {
			return fosite.ErrServerError.WithWrap(err)
		}
	}
	if err := h.store.CreateAccessTokenSession(ctx, accessSig, ar.Sanitize(nil)); err != nil {
		return fosite.ErrServerError.WithWrap(err)
	}
	if refreshSig != "" {
		if err := h.store.CreateRefreshTokenSession(ctx, refreshSig, accessSig, ar.Sanitize(nil)); err != nil {
			return fosite.ErrServerError.WithWrap(err)
		}
	}
	resp.SetAccessToken(access)
	resp.SetTokenType("bearer")
	resp.SetExpiresIn(time.Until(ar.GetSession().GetExpiresAt(fosite.AccessToken)))
	resp.SetScopes(ar.GetGrantedScopes())
	if refresh != "" {
		resp.SetExtra("refresh_token", refresh)
	}
	return nil
}
