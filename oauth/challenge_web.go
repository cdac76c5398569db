package oauth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ory/fosite"

	"github.com/authd/authd/signin"
)

// passkeyName is the passkey method's and factor's name
// (passkey/passkeyweb.Name; not imported: oauth names no method).
const passkeyName = "passkey"

// optionsMethod is a sign-in method whose proof answers a challenge it
// issues first (a passkey's, passkeyweb.Method.Options): the challenge
// endpoint asks for it bound to the auth_session, so only the app holding
// that handle can answer it, once.
type optionsMethod interface {
	Options(ctx context.Context, binding string) ([]byte, error)
}

// passkeyOptions answers passkey=options: insufficient_authorization with
// the auth_session and passkey_options, the
// PublicKeyCredentialRequestOptions for the platform's passkey API
// (WebAuthn L3 §5.5). The ceremony is the login page's (single use, 60
// s), bound to the auth_session handle instead of a CSRF token.
func (s *Server) passkeyOptions(tx context.Context, st *stepState) (*challengeReply, error) {
	m, ok := s.methods.byName[passkeyName].(optionsMethod)
	if !ok {
		return nil, fosite.ErrInvalidRequest.WithHint("Passkey sign-in is not enabled.")
	}
	if amrLevel(st.as.AMR) >= 2 {
		return nil, fosite.ErrInvalidRequest.WithHint("This auth_session needs no passkey.")
	}
	opts, err := m.Options(tx, st.handle)
	if err != nil {
		return nil, fosite.ErrServerError.WithWrap(err)
	}
	var wrapped struct {
		PublicKey json.RawMessage `json:"publicKey"`
	}
	if err := json.Unmarshal(opts, &wrapped); err != nil || len(wrapped.PublicKey) == 0 {
		return nil, fosite.ErrServerError.WithHint("The passkey options could not be read.")
	}
	b := challengeBody{Error: "insufficient_authorization", AuthSession: st.handle, PasskeyOptions: wrapped.PublicKey,
		Description: "Answer the passkey challenge (passkey_options) with passkey_assertion."}
	if st.as.Subject == "" {
		b.Methods = []string{passkeyName}
	} else {
		b.Factors = []string{passkeyName}
	}
	return replyOf(http.StatusForbidden, b), nil
}

// passkeyStep checks a passkey_assertion: the sign-in (amr hwk, user) when
// no user is known yet, else the user's second factor (a passkey of the
// same user).
func (s *Server) passkeyStep(tx context.Context, st *stepState) error {
	in := signin.Input{Fields: url.Values{"credential": st.req.step.fields["credential"], "csrf_token": {st.handle}},
		RemoteIP: clientIP(st.req.r)}
	if st.as.Subject == "" {
		m := s.methods.byName[passkeyName]
		if m == nil {
			return fosite.ErrInvalidRequest.WithHint("Passkey sign-in is not enabled.")
		}
		res, err := m.Verify(tx, in)
		return s.stepResult(st, res, err)
	}
	if amrLevel(st.as.AMR) >= 2 {
		return nil
	}
	i := slices.IndexFunc(s.factors, func(f signin.Factor) bool { return f.Name() == passkeyName })
	if i < 0 {
		return fosite.ErrInvalidRequest.WithHint("The passkey second factor is not enabled.")
	}
	res, err := s.factors[i].Verify(tx, st.user, in)
	return s.stepResult(st, res, err)
}

// redirectToWeb is §5.2.2's redirect_to_web (403): the sign-in must
// continue in the browser (a factor to set up, consent). The request is
// pushed (RFC 9126) with the first request's parameters, the app's
// client authentication and its DPoP key, so the app opens
// /oauth2/authorize?client_id=…&request_uri=… and the code comes back to
// its redirect_uri as in any browser sign-in (the same code_verifier
// redeems it). The auth_session ends.
func (s *Server) redirectToWeb(tx context.Context, st *stepState, desc string) (*challengeReply, error) {
	r := st.req.r
	form := url.Values{"client_id": {st.client.ID}, "response_type": {"code"},
		"code_challenge": {st.as.CodeChallenge}, "code_challenge_method": {"S256"}}
	for _, k := range []string{"scope", "nonce", "acr_values", "prompt", "redirect_uri", "login_hint", "state"} {
		if v := st.params.Get(k); v != "" {
			form.Set(k, v)
		}
	}
	if form.Get("redirect_uri") == "" && len(st.client.RedirectURIs) == 1 {
		// OpenID Connect Core §3.1.2.1 requires one; the client's only
		// registered URI is the one it would name.
		form.Set("redirect_uri", st.client.RedirectURIs[0])
	}
	if form.Get("redirect_uri") == "" {
		// Several registered and the app named none (RFC 6749 §3.1.2.3):
		// no request to push. The draft's plain redirect_to_web: the
		// app starts an authorization request of its own.
		st.as.Done = true
		return replyOf(http.StatusForbidden, challengeBody{Error: "redirect_to_web", Description: errorDescription(desc +
			" Send redirect_uri on the first request to get a request_uri.")}), nil
	}
	if form.Get("state") == "" {
		// The browser's redirect carries a state (RFC 6749 §10.12); the
		// app gets it with the request_uri to compare.
		var b [16]byte
		_, _ = rand.Read(b[:])
		form.Set("state", base64.RawURLEncoding.EncodeToString(b[:]))
	}
	if form.Get("login_hint") == "" && st.user.Username != "" {
		form.Set("login_hint", st.user.Username)
	}
	if st.as.JKT != "" {
		form.Set("dpop_jkt", st.as.JKT)
	}
	for _, k := range []string{"client_secret", "client_assertion", "client_assertion_type"} {
		if v := r.PostForm.Get(k); v != "" {
			form.Set(k, v)
		}
	}
	pr, err := http.NewRequestWithContext(tx, http.MethodPost, s.cfg.Issuer+pathPAR, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fosite.ErrServerError.WithWrap(err)
	}
	pr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if v := r.Header.Get("Authorization"); v != "" {
		pr.Header.Set("Authorization", v)
	}
	ar, err := s.provider.NewPushedAuthorizeRequest(tx, pr)
	if err != nil {
		return nil, err
	}
	if err := s.provider.pkce.ValidateAuthorizeRequest(ar); err != nil {
		return nil, err
	}
	sess := newSession("")
	sess.Extra = map[string]any{extraPARRedirect: ar.GetRedirectURI().String()}
	resp, err := s.provider.NewPushedAuthorizeResponse(tx, ar, sess)
	if err != nil {
		return nil, err
	}
	st.as.Done = true
	return replyOf(http.StatusForbidden, challengeBody{Error: "redirect_to_web", Description: errorDescription(desc),
		RequestURI: resp.GetRequestURI(), ExpiresIn: int64(resp.GetExpiresIn()), State: form.Get("state")}), nil
}
