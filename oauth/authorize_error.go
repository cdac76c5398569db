package oauth

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

// refuseRequest checks what fosite does not, before it parses the request,
// and answers with an error page (never a redirect, never a code) when:
//   - a parameter is sent twice (RFC 6749 §3.1);
//   - the state is too long to echo back;
//   - client_id is missing or unknown;
//   - redirect_uri is not registered for the client, compared exactly
//     (RFC 9700 §2.1), loopback ports aside (RFC 8252 §7.3);
//   - redirect_uri is missing while the client has several.
//
// Each refusal is logged with its reason.
func (s *Server) refuseRequest(w http.ResponseWriter, r *http.Request, rawQuery string) bool {
	q, err := url.ParseQuery(rawQuery)
	refuse := func(detail, reason string) bool {
		s.log.Info("authorization request refused", "reason", reason, "client_id", q.Get("client_id"), "request_id", w.Header().Get("X-Request-Id"))
		s.renderError(w, http.StatusBadRequest, "This sign-in link is not valid.", detail)
		return true
	}
	if err != nil {
		return refuse("The sign-in link is malformed.", "query does not parse")
	}
	if k := duplicateParam(rawQuery); k != "" {
		return refuse("The app sent the parameter "+clip(k, 40)+" more than once.", "duplicate parameter "+clip(k, 40))
	}
	if len(q.Get("state")) > maxStateLen {
		return refuse("The state parameter is too long.", "state too long")
	}
	id := q.Get("client_id")
	if id == "" {
		return refuse("The client_id parameter is missing.", "missing client_id")
	}
	fc, err := s.store.GetClient(r.Context(), id)
	if errors.Is(err, storage.ErrUnavailable) {
		s.renderUnavailable(w)
		return true
	}
	if err != nil {
		if !errors.Is(err, storage.ErrNotFound) {
			s.log.Error("get client", "error", err)
		}
		return refuse("The app that sent you here is not registered with this server.", "unknown client_id")
	}
	if _, pushed := parQuery(q); pushed {
		// The redirect_uri was checked when the request was pushed (RFC
		// 9126 §2.1); the front channel carries only client_id and
		// request_uri.
		return false
	}
	registered := fc.GetRedirectURIs()
	ru, has := q["redirect_uri"]
	switch {
	case !has && len(registered) != 1:
		return refuse("The redirect_uri parameter is missing.", "missing redirect_uri")
	case !has && slices.Contains(strings.Fields(q.Get("scope")), "openid"):
		// OpenID Connect Core §3.1.2.1: redirect_uri is REQUIRED (fosite
		// enforces it too).
		return refuse("The redirect_uri parameter is missing (it is required with the openid scope).", "missing redirect_uri with openid")
	case has && !redirectRegistered(registered, ru[0]):
		return refuse("The app asked to return to an address that is not registered for it.", "redirect_uri not registered")
	}
	return false
}

// fositePARHint is fosite's hint for a request_uri its PAR storage did not
// return (unknown, used, expired or another client's: GetPARSession);
// parUnknownHint says it in words, with what to do.
const (
	fositePARHint  = "Invalid PAR session"
	parUnknownHint = "The request_uri is unknown, used or expired; push the request again (RFC 9126)."
)

// writeAuthorizeError answers a failed authorization request. Per RFC 6749
// §4.1.2.1, when the client or redirect_uri is invalid the user agent is
// NOT redirected: a page explains the error. Otherwise the error is sent to
// the redirect_uri with state and iss (RFC 9207 §2).
//
// A storage outage (storage.ErrUnavailable) is temporarily_unavailable
// (RFC 6749 §4.1.2.1), so the app can offer to try again.
func (s *Server) writeAuthorizeError(w http.ResponseWriter, ar fosite.AuthorizeRequester, err error) {
	rfc := toRFC6749(err)
	if rfc == errUnavailable {
		s.log.Info("authorization request failed: storage unavailable", "error", err)
	} else if rfc.CodeField >= 500 {
		s.log.Error("authorization endpoint error", "error", err)
	} else {
		s.log.Info("authorization request failed", "error", rfc.ErrorField, "reason", rfc.HintField)
	}
	original := rfc.ErrorField
	if original == fosite.ErrInvalidRequestURI.ErrorField && rfc.HintField == fositePARHint {
		e := *rfc
		e.HintField = parUnknownHint
		rfc = &e
	}
	if !authorizeErrorCodes[rfc.ErrorField] {
		// fosite also uses codes outside RFC 6749 §4.1.2.1 (invalid_state,
		// unsupported_response_mode); clients only know these.
		e := *rfc
		e.ErrorField = fosite.ErrInvalidRequest.ErrorField
		rfc = &e
	}
	if ar == nil || !ar.IsRedirectURIValid() {
		if rfc == errUnavailable {
			s.renderUnavailable(w)
			return
		}
		// refuseRequest has already named a missing or unknown client and
		// an unregistered redirect_uri; say what else fosite found.
		detail := "The app sent an invalid sign-in request."
		switch {
		case original == fosite.ErrInvalidClient.ErrorField:
			detail = "The app that sent you here is not registered with this server."
		case original == fosite.ErrUnsupportedResponseMode.ErrorField:
			detail = "The app asked for a response mode this server does not support (only response_mode=query)."
		case rfc.HintField == parUnknownHint:
			detail = parUnknownHint
		case strings.Contains(rfc.HintField, "redirect"):
			detail = "The app asked to return to an address that is not registered for it."
		case rfc.HintField != "":
			detail = "The app sent an invalid sign-in request: " + clip(errorDescription(rfc.HintField), 200)
		}
		s.renderError(w, http.StatusBadRequest, "This sign-in link is not valid.", detail)
		return
	}
	u := *ar.GetRedirectURI()
	u.Fragment = ""
	q := u.Query()
	for k, v := range rfc.ToValues() {
		if k != "error" {
			// fosite's descriptions and hints (which carry "§" and may
			// echo the request) in RFC 6749 §5.2's charset, bounded.
			for i := range v {
				v[i] = errorDescription(v[i])
			}
		}
		q[k] = v
	}
	if st := ar.GetState(); st != "" {
		q.Set("state", st)
	}
	q.Set("iss", s.cfg.Issuer)
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", u.String())
	w.WriteHeader(http.StatusSeeOther)
}
