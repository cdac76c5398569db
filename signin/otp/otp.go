// Package otp is the authenticator-app factor behind the signin.Factor
// seam: its part of the second-factor page (one input named "otp" that
// takes a TOTP code or a recovery code) and the check of what is posted,
// through package totp. The flow (package oauth) bounds the attempts and
// records the factor on the session.
package otp

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"html/template"
	"net/http"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/totp"
)

// Name is the factor's name (the form's "factor" field).
const Name = "otp"

//go:embed form.html
var formHTML string

var form = template.Must(template.New("otp").Parse(formHTML))

// Codes is what the factor needs of package totp.
type Codes interface {
	Has(ctx context.Context, subject string) (bool, error)
	Check(ctx context.Context, subject, code string) (totp.Kind, error)
}

// Factor is the authenticator-app factor.
type Factor struct{ codes Codes }

var _ signin.Factor = (*Factor)(nil)

// New returns the factor over codes (a *totp.Service).
func New(codes Codes) *Factor { return &Factor{codes: codes} }

// Name implements signin.Factor.
func (f *Factor) Name() string { return Name }

// Has implements signin.Factor.
func (f *Factor) Has(ctx context.Context, u identity.User) (bool, error) {
	return f.codes.Has(ctx, u.Subject)
}

// HasIn implements signin.ReadFactor: a confirmed authenticator app, what
// Has reads through package totp.
func (f *Factor) HasIn(fs identity.Factors) bool { return fs.TOTP }

var _ signin.ReadFactor = (*Factor)(nil)

// Render implements signin.Factor.
func (f *Factor) Render(_ context.Context, p signin.Page) template.HTML {
	var b bytes.Buffer
	if err := form.Execute(&b, p); err != nil {
		return ""
	}
	return template.HTML(b.String()) //nolint:gosec // executed by html/template above
}

// Verify implements signin.Factor: the "otp" field, a TOTP code (RFC 8176
// amr "otp") or a recovery code (also a one-time password).
func (f *Factor) Verify(ctx context.Context, u identity.User, in signin.Input) (signin.Result, error) {
	code := in.Fields.Get("otp")
	if code == "" {
		return signin.Result{}, &signin.Failure{Status: http.StatusBadRequest, Message: "Enter the code from your authenticator app, or a recovery code.", Invalid: true}
	}
	_, err := f.codes.Check(ctx, u.Subject, code)
	switch {
	case errors.Is(err, totp.ErrInvalidCode):
		return signin.Result{}, &signin.Failure{Status: http.StatusUnauthorized,
			Message: "That code is not valid. Codes change every 30 seconds and each works once; a recovery code works once.", Invalid: true}
	case err != nil:
		return signin.Result{}, err
	}
	return signin.Result{User: u, AMR: []string{"otp"}}, nil
}
