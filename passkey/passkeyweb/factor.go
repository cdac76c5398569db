package passkeyweb

import (
	"bytes"
	"context"
	_ "embed"
	"html/template"
	"net/http"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/passkey"
	"github.com/authd/authd/signin"
)

// The passkey as a second factor after a password (issue 27): the same
// ceremony as the sign-in method (the options route, the script, the
// challenge bound to the page's CSRF token), posted as step=factor with
// factor=passkey; the passkey must be the signed-in user's. Its amr
// ("hwk", "user") makes the session phishing resistant (acr "phr").

//go:embed factor.html
var factorHTML string

var factorForm = template.Must(template.New("factor").Parse(factorHTML))

// Factor is the passkey factor.
type Factor struct {
	svc *passkey.Service
}

var _ signin.Factor = (*Factor)(nil)

// NewFactor returns the factor over svc. Its options come from the
// method's route (/signin/passkey/options): register the Method too.
func NewFactor(svc *passkey.Service) *Factor { return &Factor{svc: svc} }

// Name implements signin.Factor.
func (f *Factor) Name() string { return Name }

// Has implements signin.Factor: the user has a passkey that is not
// turned off.
func (f *Factor) Has(ctx context.Context, u identity.User) (bool, error) {
	list, err := f.svc.List(ctx, u.Subject)
	if err != nil {
		return false, err
	}
	for _, p := range list {
		if p.DisabledAt == nil {
			return true, nil
		}
	}
	return false, nil
}

// HasIn implements signin.ReadFactor: a passkey that is not turned off,
// as Has answers.
func (f *Factor) HasIn(fs identity.Factors) bool { return fs.Passkey }

var _ signin.ReadFactor = (*Factor)(nil)

// Render implements signin.Factor.
func (f *Factor) Render(_ context.Context, p signin.Page) template.HTML {
	var b bytes.Buffer
	err := factorForm.Execute(&b, struct {
		Action, CSRFToken, Options string
	}{p.Action, p.CSRFToken, "/signin/" + Name + "/options"})
	if err != nil {
		return ""
	}
	return template.HTML(b.String()) //nolint:gosec // html/template's output
}

// Verify implements signin.Factor: the assertion, checked as the method
// checks it, of a passkey of u.
func (f *Factor) Verify(ctx context.Context, u identity.User, in signin.Input) (signin.Result, error) {
	answer := in.Fields.Get("credential")
	if answer == "" {
		return signin.Result{}, &signin.Failure{Status: http.StatusBadRequest, Message: "Choose a passkey to continue."}
	}
	got, err := f.svc.FinishLogin(ctx, in.Fields.Get("csrf_token"), []byte(answer))
	if err != nil {
		return signin.Result{}, failure(err)
	}
	if got.Subject != u.Subject {
		return signin.Result{}, &signin.Failure{Status: http.StatusUnauthorized, Message: "This passkey belongs to another account. Use one of yours."}
	}
	return signin.Result{User: u, AMR: append([]string(nil), passkey.AMR...)}, nil
}
