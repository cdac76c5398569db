package pkce

import (
	"context"
	"errors"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"
	fositepkce "github.com/ory/fosite/handler/pkce"
)

var (
	_ fosite.AuthorizeEndpointHandler = (*Handler)(nil)
	_ fosite.TokenEndpointHandler     = (*Handler)(nil)
)

// hintChallengeRequired is the error_description hint for an authorization
// request without code_challenge.
const hintChallengeRequired = "code_challenge is required (RFC 7636 §4.4.1, RFC 9700 §2.1.1)"

// errHandlerOrder is wrapped into the server_error returned when the
// handler runs before fosite's authorize code handler.
var errHandlerOrder = errors.New("pkce: PKCE handler must be registered after the authorize code handler")

// Handler enforces PKCE (RFC 7636) on the authorization code grant. Register
// it with fosite after the authorize code handler, for both the authorize and
// the token endpoint.
//
// Unlike fosite v0.49.0's handler/pkce.Handler, it requires PKCE for every
// client, accepts only S256 unless AllowPlain is set, and never deletes the
// PKCE session before the code has been redeemed: a wrong code_verifier does
// not consume the code.
//
// All errors it returns are fosite RFC 6749 errors that wrap, where there is
// one, this package's sentinel or the storage error, for errors.Is.
type Handler struct {
	// AuthorizeCodeStrategy computes the code's signature, the key of the
	// PKCE session. It must be the strategy of the authorize code handler.
	AuthorizeCodeStrategy oauth2.AuthorizeCodeStrategy
	// Storage holds the PKCE sessions: the code_challenge and
	// code_challenge_method bound to each authorization code.
	Storage fositepkce.PKCERequestStorage
	// AllowPlain also accepts the plain method (and an empty
	// code_challenge_method, which means plain: RFC 7636 §4.3). Leave it
	// false: plain exposes the verifier in the authorization request
	// (RFC 7636 §4.2, RFC 9700 §2.1.1).
	AllowPlain bool
}

// HandleAuthorizeEndpointRequest validates code_challenge and
// code_challenge_method and binds them to the authorization code that the
// authorize code handler has put into resp. Requests whose response_type
// does not include "code" are left alone.
//
// Errors: invalid_request (RFC 6749 §4.1.2.1, RFC 7636 §4.4.1) when
// code_challenge is missing or the method or format is not accepted;
// server_error when no code has been issued yet (handler registered in the
// wrong order) or the storage fails.
func (h *Handler) HandleAuthorizeEndpointRequest(ctx context.Context, ar fosite.AuthorizeRequester, resp fosite.AuthorizeResponder) error {
	if !ar.GetResponseTypes().Has("code") { // RFC 7636 §4.3: PKCE binds authorization codes only
		return nil
	}

	if err := h.ValidateAuthorizeRequest(ar); err != nil {
		return err
	}

	code := resp.GetCode()
	if code == "" {
		return fosite.ErrServerError.WithWrap(errHandlerOrder).WithDebug(errHandlerOrder.Error())
	}

	// RFC 7636 §4.4: the server MUST associate code_challenge and
	// code_challenge_method with the code. Only those two form values
	// are stored.
	signature := h.AuthorizeCodeStrategy.AuthorizeCodeSignature(ctx, code)
	if err := h.Storage.CreatePKCERequestSession(ctx, signature, ar.Sanitize([]string{ChallengeKey, ChallengeMethodKey})); err != nil {
		return fosite.ErrServerError.WithWrap(err)
	}
	return nil
}

// ValidateAuthorizeRequest checks the PKCE parameters of an authorization
// request without storing anything, so the authorization endpoint can refuse
// a bad request before it shows the login page. It returns nil for requests
// whose response_type has no "code", and otherwise fosite's invalid_request
// (RFC 7636 §4.4.1, RFC 9700 §2.1.1) wrapping the ValidateChallenge error.
func (h *Handler) ValidateAuthorizeRequest(ar fosite.AuthorizeRequester) error {
	if !ar.GetResponseTypes().Has("code") {
		return nil
	}
	form := ar.GetRequestForm()
	method := form.Get(ChallengeMethodKey)
	// RFC 7636 §4.4.1: errors in the PKCE parameters are invalid_request.
	if err := ValidateChallenge(form.Get(ChallengeKey), method, h.AllowPlain); err != nil {
		return fosite.ErrInvalidRequest.WithHint(h.authorizeHint(err, method)).WithWrap(err)
	}
	return nil
}

// authorizeHint returns the error_description hint for a ValidateChallenge
// error. It echoes no client input.
func (h *Handler) authorizeHint(err error, method string) string {
	switch {
	case errors.Is(err, ErrChallengeRequired):
		return hintChallengeRequired
	case errors.Is(err, ErrMethodNotAllowed) && h.AllowPlain:
		return "code_challenge_method must be S256 or plain (RFC 7636 §4.3, §4.4.1)"
	case errors.Is(err, ErrMethodNotAllowed):
		return "code_challenge_method must be S256; plain is not allowed (RFC 7636 §4.2, §4.4.1)"
	case method == MethodS256:
		return "code_challenge must be 43 base64url characters without padding for S256 (RFC 7636 §4.2)"
	default:
		return "code_challenge must be 43 to 128 characters of [A-Za-z0-9-._~] for plain (RFC 7636 §4.1, §4.2)"
	}
}

// HandleTokenEndpointRequest checks the token request's code_verifier
// against the code_challenge bound to the code (RFC 7636 §4.6). It only
// reads: the PKCE session is deleted in PopulateTokenEndpointResponse, once
// the code has been redeemed, so a failed check leaves the code usable with
// the right verifier.
//
// Errors (RFC 6749 §5.2): fosite.ErrUnknownRequest for other grant types;
// invalid_request when code_verifier is missing (wrapping
// [ErrVerifierRequired]); invalid_grant when the code
// has no PKCE session, when code_verifier is malformed or does not match, or
// when the bound challenge is no longer accepted (plain disabled since);
// server_error when the storage fails.
func (h *Handler) HandleTokenEndpointRequest(ctx context.Context, request fosite.AccessRequester) error {
	if !h.CanHandleTokenEndpointRequest(ctx, request) {
		return fosite.ErrUnknownRequest
	}

	form := request.GetRequestForm()
	verifier := form.Get(VerifierKey)
	signature := h.AuthorizeCodeStrategy.AuthorizeCodeSignature(ctx, form.Get("code"))

	// Hand the storage a copy of the session: this read only needs the
	// form, and must not overwrite the session the code handler loaded.
	session := request.GetSession()
	if session != nil {
		session = session.Clone()
	}
	pkceRequest, err := h.Storage.GetPKCERequestSession(ctx, signature, session)
	switch {
	case errors.Is(err, fosite.ErrNotFound) && verifier != "":
		// RFC 9700 §4.8.2: PKCE downgrade. A verifier for a code issued
		// without code_challenge MUST be rejected.
		return fosite.ErrInvalidGrant.WithHint("code_verifier sent for a code issued without code_challenge (RFC 9700 §4.8.2)").WithWrap(err)
	case errors.Is(err, fosite.ErrNotFound):
		// RFC 9700 §2.1.1: PKCE is required; a code without a challenge
		// is not redeemable here.
		return fosite.ErrInvalidGrant.WithHint("the authorization code was issued without code_challenge; PKCE is required (RFC 9700 §2.1.1)").WithWrap(err)
	case err != nil:
		return fosite.ErrServerError.WithWrap(err)
	}

	if verifier == "" {
		// RFC 7636 §4.5: code_verifier is REQUIRED; a missing parameter
		// is invalid_request (RFC 6749 §5.2).
		return fosite.ErrInvalidRequest.WithHint("code_verifier is required (RFC 7636 §4.5)").WithWrap(ErrVerifierRequired)
	}
	if err := ValidateVerifier(verifier); err != nil {
		// RFC 7636 §4.1 format; RFC 7636 §4.6: a verifier that cannot
		// match is invalid_grant.
		return fosite.ErrInvalidGrant.WithHint("code_verifier must be 43 to 128 characters of [A-Za-z0-9-._~] (RFC 7636 §4.1)").WithWrap(err)
	}

	challenge := pkceRequest.GetRequestForm().Get(ChallengeKey)
	method := pkceRequest.GetRequestForm().Get(ChallengeMethodKey)
	// RFC 7636 §4.6: the method bound to the code is the one used to
	// verify. Re-apply today's policy to it, so that turning AllowPlain
	// off also stops plain codes already issued (RFC 9700 §2.1.1).
	if err := ValidateChallenge(challenge, method, h.AllowPlain); err != nil {
		return fosite.ErrInvalidGrant.WithHint("the code_challenge bound to this code is not accepted (RFC 7636 §4.2)").WithWrap(err)
	}

	if err := Verify(verifier, challenge, method); err != nil {
		// RFC 7636 §4.6: values not equal MUST be invalid_grant
		// (RFC 6749 §5.2).
		return fosite.ErrInvalidGrant.WithHint("code_verifier does not match code_challenge (RFC 7636 §4.6)").WithWrap(err)
	}
	return nil
}

// PopulateTokenEndpointResponse deletes the code's PKCE session. fosite
// calls it only after every earlier token handler's
// PopulateTokenEndpointResponse has succeeded, so with this handler
// registered after the authorize code handler, the code has been redeemed
// and its transaction committed.
//
// It returns fosite.ErrUnknownRequest for other grant types and nil
// otherwise, whatever the storage says; see the comment in the body.
func (h *Handler) PopulateTokenEndpointResponse(ctx context.Context, requester fosite.AccessRequester, _ fosite.AccessResponder) error {
	if !h.CanHandleTokenEndpointRequest(ctx, requester) {
		return fosite.ErrUnknownRequest
	}
	signature := h.AuthorizeCodeStrategy.AuthorizeCodeSignature(ctx, requester.GetRequestForm().Get("code"))

	// The error is deliberately dropped. fosite.ErrNotFound means someone
	// (a concurrent cleanup, the janitor) already removed the session. Any
	// other error leaves a PKCE session behind, which is harmless: it is
	// keyed by the signature of a code that is now invalidated, and the
	// authorize code handler rejects that code before this handler runs,
	// so the session can never take part in a grant again; the janitor
	// removes it. Failing here instead would turn a committed, successful
	// exchange into an error response: the tokens would be issued but not
	// delivered, and the client's retry would get invalid_grant and revoke
	// them (RFC 6749 §4.1.2).
	_ = h.Storage.DeletePKCERequestSession(ctx, signature)
	return nil
}

// CanSkipClientAuth returns false: PKCE binds the code to the client
// instance but does not authenticate the client, so fosite's client
// authentication always runs.
func (h *Handler) CanSkipClientAuth(context.Context, fosite.AccessRequester) bool {
	return false
}

// CanHandleTokenEndpointRequest reports whether requester is an
// authorization code grant: grant_type is exactly "authorization_code"
// (RFC 6749 §4.1.3).
func (h *Handler) CanHandleTokenEndpointRequest(_ context.Context, requester fosite.AccessRequester) bool {
	return requester.GetGrantTypes().ExactOne("authorization_code")
}
