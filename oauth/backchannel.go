package oauth

import (
	"context"

	"github.com/ory/fosite"
)

// noteSessionClient records, in the code's transaction tx, that the client
// is issued a code with openid for the browser session: its ID tokens carry
// the session's sid, so the session's end must send it a back-channel
// logout (OpenID Connect Back-Channel Logout 1.0 §2.3; package
// backchannel).
func (s *Server) noteSessionClient(tx context.Context, ar fosite.AuthorizeRequester, cur signedIn) error {
	if !ar.GetGrantedScopes().Has("openid") {
		return nil
	}
	return s.people.NoteClient(tx, cur.session.ID, ar.GetClient().GetID())
}
