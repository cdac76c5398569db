package oauth

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/dpop"
	"github.com/authd/authd/secrets"
	"github.com/authd/authd/storage"
)

// Pushed authorization requests (RFC 9126) at /oauth2/par, with fosite's
// handler (handler/par) and this server's storage.
//
// A request_uri is single use, but "use" is the issuance of a code, not
// the parsing of the front-channel request: authd parses the authorization
// request again on every step of the sign-in (the login form, the one-tap
// page and the consent form post back to the same URL), so a request_uri
// consumed when first read would break every interactive sign-in. fosite's
// DeletePARSession therefore does nothing here, and issueCode marks the
// request used with a conditional write in the transaction that stores
// the code: exactly one code per request_uri, and a request_uri that
// issued one is refused from then on. It lives parLifetime.

const (
	// parURIPrefix is RFC 9126 §2.2's URN prefix of a request_uri.
	parURIPrefix = "urn:ietf:params:oauth:request_uri:"
	// parLifetime is a pushed request's lifetime (RFC 9126 §2.2: short;
	// its example is 60 s; a sign-in with a password takes longer).
	parLifetime = 5 * time.Minute
	// extraPARRedirect is the session Extra key of the pushed request's
	// resolved redirect_uri (the client may have omitted it).
	extraPARRedirect = "par_redirect_uri"
)

// parStorage is fosite's PARStorage over storage.PARStore: the
// request_uri is stored as its signature, HMAC under a key of its own
// (as codes are), never in the clear.
type parStorage struct {
	Store
	key []byte
	now func() time.Time
}

func (p parStorage) signature(requestURI string) string {
	return hex.EncodeToString(secrets.MAC(p.key, []byte(requestURI)))
}

// CreatePARSession implements fosite.PARStorage.
func (p parStorage) CreatePARSession(ctx context.Context, requestURI string, r fosite.AuthorizeRequester) error {
	return p.Store.CreatePARRequest(ctx, p.signature(requestURI), r)
}

// GetPARSession implements fosite.PARStorage: an unused, unexpired pushed
// request (any other is invalid_request_uri, RFC 9126 §4).
func (p parStorage) GetPARSession(ctx context.Context, requestURI string) (fosite.AuthorizeRequester, error) {
	req, active, err := p.Store.GetPARRequest(ctx, p.signature(requestURI), newSession(""))
	if err != nil {
		return nil, err
	}
	sess := req.GetSession()
	if !active {
		return nil, errors.New("oauth: the request_uri was already used")
	}
	if exp := sess.GetExpiresAt(fosite.PushedAuthorizeRequestContext); exp.IsZero() || !p.now().Before(exp) {
		return nil, errors.New("oauth: the request_uri has expired")
	}
	r, ok := req.(*fosite.Request)
	if !ok {
		return nil, errors.New("oauth: unexpected pushed request type")
	}
	if front, ok := ctx.Value(parClientKey{}).(string); ok && (r.GetClient() == nil || r.GetClient().GetID() != front) {
		// RFC 9126 §2.2: the request_uri is bound to the client that
		// pushed it. Refused here, before fosite has a redirect_uri to
		// send the error (and the pushed state) to: an error page.
		return nil, errors.New("oauth: the request_uri was pushed by another client")
	}
	form := r.GetRequestForm()
	ar := &fosite.AuthorizeRequest{Request: *r,
		ResponseTypes:        fosite.RemoveEmpty(strings.Split(form.Get("response_type"), " ")),
		State:                form.Get("state"),
		ResponseMode:         fosite.ResponseModeType(form.Get("response_mode")),
		HandledResponseTypes: fosite.Arguments{},
	}
	if ru := sessionJKT(sess, extraPARRedirect); ru != "" {
		ar.RedirectURI, _ = url.Parse(ru)
	}
	return ar, nil
}

// parClientKey carries the front channel's client_id to GetPARSession.
type parClientKey struct{}

// withPARClient tells GetPARSession which client opened the request_uri.
func withPARClient(ctx context.Context, clientID string) context.Context {
	return context.WithValue(ctx, parClientKey{}, clientID)
}

// DeletePARSession implements fosite.PARStorage: nothing; the request is
// used up when a code is issued from it (see above, issueCode).
func (p parStorage) DeletePARSession(context.Context, string) error { return nil }

// isPAR reports whether an authorization request came by request_uri.
func isPAR(ar fosite.AuthorizeRequester) (string, bool) {
	u := ar.GetRequestForm().Get("request_uri")
	return u, strings.HasPrefix(u, parURIPrefix)
}

// parQuery reduces a front-channel authorization request that carries a
// pushed request_uri to client_id and request_uri: RFC 9126 §4, the
// pushed parameters are the request; nothing may be added from the front
// channel (a dpop_jkt, say).
func parQuery(q url.Values) (url.Values, bool) {
	if !strings.HasPrefix(q.Get("request_uri"), parURIPrefix) {
		return q, false
	}
	return url.Values{"client_id": {q.Get("client_id")}, "request_uri": {q.Get("request_uri")}}, true
}

// handlePAR serves the pushed authorization request endpoint (RFC 9126
// §2): the token endpoint's form rules and client authentication, the
// authorization request's validation (fosite, then PKCE), and a DPoP
// binding from dpop_jkt or a DPoP proof (RFC 9449 §10.1). The answer is
// 201 with request_uri and expires_in (§2.2); errors go through the one
// writer.
func (s *Server) handlePAR(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if err := parseTokenForm(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.chargePARSource(ctx, r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := requestBounds(r.PostForm); err != nil {
		s.writeError(w, r, err)
		return
	}
	ar, err := s.provider.NewPushedAuthorizeRequest(ctx, r)
	if err != nil {
		s.writeError(w, r, s.chargeAuthFailure(r, err))
		return
	}
	if err := s.chargePARClient(ctx, ar.GetClient().GetID()); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.provider.pkce.ValidateAuthorizeRequest(ar); err != nil {
		s.writeError(w, r, err)
		return
	}
	// The OpenID Connect parameters the authorization endpoint checks
	// (prompt, max_age, id_token_hint, claims) are refused here as there,
	// not stored for an error redirect later (RFC 9126 §2.1).
	if _, err := s.authnParamsOf(r, ar); err != nil {
		s.writeError(w, r, err)
		return
	}
	form := ar.GetRequestForm()
	jkt := form.Get("dpop_jkt")
	if jkt != "" && !jktRe.MatchString(jkt) {
		s.writeError(w, r, fosite.ErrInvalidRequest.WithHint("dpop_jkt must be a base64url SHA-256 JWK thumbprint (RFC 9449 Section 10, RFC 7638)."))
		return
	}
	proofs := r.Header.Values("DPoP")
	if len(proofs) > 1 {
		s.writeError(w, r, errInvalidDPoPProof("More than one DPoP header (RFC 9449 Section 4.3)."))
		return
	}
	if len(proofs) == 1 {
		if n := s.dpopToken.Nonces(); n != nil {
			w.Header().Set("DPoP-Nonce", n.Current())
		}
		p, err := s.dpopToken.Verify(ctx, proofs[0], dpop.Request{Method: http.MethodPost, URL: s.cfg.Issuer + pathPAR})
		if errors.Is(err, dpop.ErrUseNonce) {
			s.writeError(w, r, errUseDPoPNonce)
			return
		}
		if err != nil {
			s.writeError(w, r, errInvalidDPoPProof(errorDescription(err.Error())))
			return
		}
		// RFC 9449 §10.1: both given, they must agree.
		if jkt != "" && jkt != p.JKT {
			s.writeError(w, r, errInvalidDPoPProof("dpop_jkt is not the thumbprint of the DPoP proof's key (RFC 9449 Section 10.1)."))
			return
		}
		jkt = p.JKT
	}
	if jkt != "" {
		form.Set("dpop_jkt", jkt)
	}
	sess := newSession("")
	sess.Extra = map[string]any{extraPARRedirect: ar.GetRedirectURI().String()}
	resp, err := s.provider.NewPushedAuthorizeResponse(ctx, ar, sess)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"request_uri": resp.GetRequestURI(), "expires_in": resp.GetExpiresIn()})
}

// requiresPAR reports whether an authorization request of client must
// come by PAR (RFC 9126 §6: the client's metadata, or the server's).
func (s *Server) requiresPAR(c *storage.Client) bool {
	return s.cfg.RequirePAR || c.RequirePushedAuthorizationRequests
}
