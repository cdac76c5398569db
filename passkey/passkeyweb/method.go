// Package passkeyweb is the passkey sign-in method of the login page
// (signin.Method): the "Sign in with a passkey" button, its options route
// (/signin/passkey/options) and the check of the assertion the page
// posts; and the passkey as a second factor after a password (Factor,
// factor.go). It depends on packages passkey and signin (and their types
// in identity and storage) only.
//
// The browser side is web/templates/passkey.js (served at
// /static/passkey.js; the pages' CSP allows no inline script). On a press
// of the button, or through autofill on the username field (WebAuthn
// conditional mediation) where the browser offers it, the script
//
//  1. POSTs to /signin/passkey/options with the page's CSRF token in
//     X-CSRF-Token (same-origin only) and gets {"publicKey": …}, the
//     options of a discoverable-credential request (no username);
//  2. calls navigator.credentials.get and posts the login form to the
//     page's Action with step=login, method=passkey, csrf_token and
//     credential (the PublicKeyCredential as JSON: id, rawId, type,
//     response.clientDataJSON, authenticatorData, signature, userHandle,
//     base64url).
//
// The challenge is bound to the page's CSRF token, so only the browser
// that asked for it can answer it, once.
package passkeyweb

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"html/template"
	"net/http"

	"github.com/authd/authd/passkey"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/storage"
)

// Name is the method's name: the form's method field and its routes'
// segment (/signin/passkey/…).
const Name = "passkey"

//go:embed button.html
var buttonHTML string

var button = template.Must(template.New("button").Parse(buttonHTML))

// Method signs people in with a passkey.
type Method struct {
	svc *passkey.Service
}

var (
	_ signin.Method  = (*Method)(nil)
	_ signin.Mounter = (*Method)(nil)
)

// New returns the method over svc.
func New(svc *passkey.Service) *Method { return &Method{svc: svc} }

// Name implements signin.Method.
func (m *Method) Name() string { return Name }

// Render implements signin.Method: the button (hidden until the script
// finds WebAuthn in the browser).
func (m *Method) Render(_ context.Context, p signin.Page) template.HTML {
	var b bytes.Buffer
	err := button.Execute(&b, struct {
		Action, CSRFToken, Options string
	}{p.Action, p.CSRFToken, "/signin/" + Name + "/options"})
	if err != nil {
		return ""
	}
	return template.HTML(b.String()) //nolint:gosec // html/template's output
}

// Verify implements signin.Method: the posted assertion, checked by the
// passkey service against the ceremony bound to the posted CSRF token.
func (m *Method) Verify(ctx context.Context, in signin.Input) (signin.Result, error) {
	answer := in.Fields.Get("credential")
	if answer == "" {
		return signin.Result{}, &signin.Failure{Status: http.StatusBadRequest, Message: "Choose a passkey to sign in with."}
	}
	u, err := m.svc.FinishLogin(ctx, in.Fields.Get("csrf_token"), []byte(answer))
	if err != nil {
		return signin.Result{}, failure(err)
	}
	return signin.Result{User: u, AMR: append([]string(nil), passkey.AMR...)}, nil
}

// Options starts a sign-in for a caller other than the login page (the
// authorization challenge endpoint, whose binding is the auth_session):
// the options as the options route answers them ({"publicKey": …}).
func (m *Method) Options(ctx context.Context, binding string) ([]byte, error) {
	return m.svc.BeginLogin(ctx, binding)
}

// failure maps the service's errors onto the login page's.
func failure(err error) error {
	switch {
	case errors.Is(err, storage.ErrUnavailable):
		return signin.ErrUnavailable
	case errors.Is(err, passkey.ErrMalformed), errors.Is(err, passkey.ErrCeremony):
		return &signin.Failure{Status: http.StatusBadRequest, Message: passkey.Message(err)}
	case errors.Is(err, passkey.ErrOrigin), errors.Is(err, passkey.ErrRPID), errors.Is(err, passkey.ErrUserVerification),
		errors.Is(err, passkey.ErrVerification), errors.Is(err, passkey.ErrUnknown), errors.Is(err, passkey.ErrCloned):
		return &signin.Failure{Status: http.StatusUnauthorized, Message: passkey.Message(err)}
	}
	return err
}
