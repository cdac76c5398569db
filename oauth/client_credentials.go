package oauth

import (
	"context"

	"github.com/ory/fosite"
	fositeoauth2 "github.com/ory/fosite/handler/oauth2"
)

var _ fosite.TokenEndpointHandler = (*clientCredentialsHandler)(nil)

// clientCredentialsHandler is the client_credentials grant (RFC 6749 §4.4):
// fosite's handler plus the rules fosite leaves to the server.
//
//   - Only a confidential client registered for the grant may use it
//     (§4.4: "MUST only be used by confidential clients"); anyone else gets
//     unauthorized_client (§5.2) before any token is minted. fosite alone
//     would answer a public client with invalid_grant.
//   - The requested scopes, already checked against the client's by
//     fosite, are granted; offline_access is not, since this grant never
//     issues a refresh token (§4.4.3). The response's scope says what was
//     granted (§3.3).
//   - The token's subject is the client itself (there is no resource
//     owner), so introspection reports sub = client_id (RFC 7662 §2.2).
type clientCredentialsHandler struct {
	*fositeoauth2.ClientCredentialsGrantHandler
}

// HandleTokenEndpointRequest validates a client_credentials request.
func (h *clientCredentialsHandler) HandleTokenEndpointRequest(ctx context.Context, req fosite.AccessRequester) error {
	if !h.CanHandleTokenEndpointRequest(ctx, req) {
		return fosite.ErrUnknownRequest
	}
	client := req.GetClient()
	if client == nil || client.IsPublic() || !client.GetGrantTypes().Has("client_credentials") {
		return fosite.ErrUnauthorizedClient.WithHint("Only a confidential client registered for the client_credentials grant may use it (RFC 6749 §4.4).")
	}
	if err := h.ClientCredentialsGrantHandler.HandleTokenEndpointRequest(ctx, req); err != nil {
		return err
	}
	for _, scope := range req.GetRequestedScopes() {
		if scope != "offline_access" {
			req.GrantScope(scope)
		}
	}
	if sess, ok := req.GetSession().(*fosite.DefaultSession); ok && sess.Subject == "" {
		sess.Subject = client.GetID()
	}
	return nil
}
