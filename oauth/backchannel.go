package oauth

import (
	"context"
	"net/http"

	"github.com/ory/fosite"
)

// noteSessionClient records, in the code's transaction tx, that the client
// is issued a code with openid for the browser session: its ID tokens carry
// the session's sid, so the session's end must send it a back-channel
// logout (OpenID Connect Back-Channel Logout 1.0 §2.3; package
// backchannel). On failure it has written the error and returns false.
func (s *Server) noteSessionClient(tx context.Context, w http.ResponseWriter, ar fosite.AuthorizeRequester, cur signedIn) bool {
	if !ar.GetGrantedScopes().Has("openid") {
		return true
	}
	if err := s.people.NoteClient(tx, cur.session.ID, ar.GetClient().GetID()); err != nil {
		s.log.Error("note session client", "error", err)
		s.writeAuthorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
		return false
	}
	return true
}
