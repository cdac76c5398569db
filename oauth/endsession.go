package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/web/templates"
)

// idTokenHint is what an id_token_hint tells the logout endpoint.
type idTokenHint struct {
	Issuer   string          `json:"iss"`
	Subject  string          `json:"sub"`
	Audience json.RawMessage `json:"aud"`
	AZP      string          `json:"azp"`
	SID      string          `json:"sid"`
}

// endSessionRequest is a validated RP-initiated logout request.
type endSessionRequest struct {
	hint     *idTokenHint // nil without a valid hint
	clientID string
	redirect string // a registered post_logout_redirect_uri, or ""
	state    string
}

// handleEndSession is the end_session_endpoint (OpenID Connect
// RP-Initiated Logout 1.0 §2). GET carries id_token_hint, client_id,
// post_logout_redirect_uri and state. With a valid id_token_hint (an ID
// token this server signed, expired or not, §2) naming the browser's
// current session (its sid), the session ends at once; otherwise the user
// is asked (a CSRF-protected same-site form that POSTs back here, without
// the hint). An app may also POST the request (§2).
// The browser is sent to post_logout_redirect_uri, with state, only if it
// is registered for the client exactly (§3: the OP MUST NOT redirect
// otherwise); the client is named by client_id or the hint, and both must
// agree (§2). Without one, the sign-out result page is shown.
func (s *Server) handleEndSession(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	w.Header().Set("Cache-Control", "no-store")
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		if err := r.ParseForm(); err != nil {
			s.renderError(w, http.StatusBadRequest, "The sign-out request is malformed.", "Go back to the app and try again.")
			return
		}
		if r.PostForm.Has("csrf_token") {
			// The confirmation form of this page.
			if !s.cookies.checkCSRF(r) {
				s.renderError(w, http.StatusForbidden, "This form has expired or was not sent from this site.", "Reload the page and try again.")
				return
			}
			req, ok := s.endSessionParams(ctx, w, r.PostForm, false)
			if !ok {
				return
			}
			s.endSession(ctx, w, r, req)
			return
		}
		// An app's logout request sent as a form post (RP-Initiated
		// Logout §2: GET and POST): answered like a GET, and never turned
		// into a URL that would carry the id_token_hint.
		q = r.PostForm
	}
	for k, v := range q {
		if len(v) > 1 {
			s.renderError(w, http.StatusBadRequest, "The sign-out request is malformed.", "The parameter "+truncate(k, 40)+" was sent more than once.")
			return
		}
	}
	req, ok := s.endSessionParams(ctx, w, q, true)
	if !ok {
		return
	}
	cur, signed := s.currentSession(ctx, r)
	if !signed || (req.hint != nil && req.hint.SID != "" && sameSession(req.hint.SID, cur.session.ID)) {
		// Nothing to end, or the hint names this browser's current
		// session: the app's word is enough. A hint from another or an
		// ended session of the same user (an old ID token) is not proof
		// that this browser's user wants to sign out: ask.
		s.endSession(ctx, w, r, req)
		return
	}
	// Ask the user: no hint, or a hint for another session.
	hidden := []templates.HiddenField{{Name: "client_id", Value: req.clientID}}
	if req.redirect != "" {
		hidden = append(hidden, templates.HiddenField{Name: "post_logout_redirect_uri", Value: req.redirect})
	}
	if req.state != "" {
		hidden = append(hidden, templates.HiddenField{Name: "state", Value: req.state})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	token := s.cookies.csrfToken(w, r)
	if err := s.pages.Logout(w, templates.LogoutData{CSRFToken: token, Username: cur.user.Username,
		Action: pathEndSession, Hidden: hidden}); err != nil {
		s.log.Error("render logout", "error", err)
	}
}

// endSessionParams validates the parameters; on failure it has written an
// error page (never a redirect). withHint: read id_token_hint (the GET).
func (s *Server) endSessionParams(ctx context.Context, w http.ResponseWriter, p url.Values, withHint bool) (endSessionRequest, bool) {
	req := endSessionRequest{clientID: p.Get("client_id"), state: p.Get("state")}
	if len(req.state) > maxStateLen {
		s.renderError(w, http.StatusBadRequest, "The sign-out request is malformed.", "The state parameter is too long.")
		return req, false
	}
	if raw := p.Get("id_token_hint"); withHint && raw != "" {
		req.hint = s.parseHint(ctx, raw)
		if req.hint != nil {
			hintClient := req.hint.AZP
			if hintClient == "" {
				hintClient = firstAudience(req.hint.Audience)
			}
			if req.clientID != "" && req.clientID != hintClient {
				s.renderError(w, http.StatusBadRequest, "The sign-out request is inconsistent.", "The client_id does not match the id_token_hint.")
				return req, false
			}
			req.clientID = hintClient
		}
	}
	plr := p.Get("post_logout_redirect_uri")
	if plr == "" {
		return req, true
	}
	if req.clientID == "" {
		s.renderError(w, http.StatusBadRequest, "The sign-out request names no app.", "A post_logout_redirect_uri needs a client_id or an id_token_hint.")
		return req, false
	}
	fc, err := s.store.GetClient(ctx, req.clientID)
	c, _ := fc.(*storage.Client)
	if err != nil || c == nil {
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			s.log.Error("end session: get client", "error", err)
		}
		s.renderError(w, http.StatusBadRequest, "The sign-out request names an unknown app.", "Go back to the app and try again.")
		return req, false
	}
	if !slices.Contains(c.PostLogoutRedirectURIs, plr) {
		s.log.Info("end session refused: post_logout_redirect_uri not registered", "client_id", c.ID)
		s.renderError(w, http.StatusBadRequest, "The app asked to return to an address it has not registered.", "You were not signed out. Go back to the app and try again.")
		return req, false
	}
	req.redirect = plr
	return req, true
}

// parseHint returns the claims of an id_token_hint this server signed for
// its own issuer, or nil.
func (s *Server) parseHint(ctx context.Context, raw string) *idTokenHint {
	payload, err := s.keys.Verify(ctx, raw)
	if err != nil {
		return nil
	}
	var h idTokenHint
	if json.Unmarshal(payload, &h) != nil || h.Issuer != s.cfg.Issuer || h.Subject == "" {
		return nil
	}
	return &h
}

// firstAudience reads aud, a string or an array of strings (RFC 7519 §4.1.3).
func firstAudience(raw json.RawMessage) string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many[0]
	}
	return ""
}

// endSession ends the browser's session (the server-side row: a copied
// cookie dies too) and redirects or shows the result.
func (s *Server) endSession(ctx context.Context, w http.ResponseWriter, r *http.Request, req endSessionRequest) {
	if ref := s.cookies.sessionRef(r); ref != "" {
		if err := s.people.EndSession(ctx, ref); err != nil {
			s.log.Error("end session", "error", err)
			s.renderError(w, http.StatusInternalServerError, "Signing out failed.", "Please try again in a moment.")
			return
		}
	}
	s.cookies.clearSession(w)
	if req.redirect != "" {
		u, err := url.Parse(req.redirect)
		if err == nil {
			if req.state != "" {
				q := u.Query()
				q.Set("state", req.state)
				u.RawQuery = q.Encode()
			}
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
			return
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.pages.Logout(w, templates.LogoutData{Done: true}); err != nil {
		s.log.Error("render logout", "error", err)
	}
}
