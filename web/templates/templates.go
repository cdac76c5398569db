// Package templates holds authd's HTML pages (login, consent, one-tap, error) and their
// stylesheet, embedded in the binary and parsed once at start-up.
//
// Pages never contain inline script or inline style, so they can be served
// with a strict Content-Security-Policy; they load no external assets.
// The package must never build HTML in Go strings: every page is a file here.
package templates

import (
	"cmp"
	"embed"
	"html/template"
	"io"
)

//go:embed *.html authd.css passkey.js
var files embed.FS

// CSS is the stylesheet served at /static/authd.css.
var CSS = mustRead("authd.css")

// PasskeyJS is the passkey script served at /static/passkey.js.
var PasskeyJS = mustRead("passkey.js")

func mustRead(name string) []byte {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(err) // programmer error: the file is embedded.
	}
	return b
}

// Pages is the parsed set of pages. The zero value is not usable; call Parse.
type Pages struct {
	// set holds every page, each named by its file, plus layout.html's
	// "head" and "foot".
	set *template.Template
}

// Parse parses the embedded templates. It panics only if an embedded file is
// malformed, which is a programmer error caught by any test.
func Parse() *Pages {
	return &Pages{set: template.Must(template.ParseFS(files, "*.html"))}
}

// LoginData is the data of the login page.
type LoginData struct {
	Title      string
	ClientName string
	// Error is a message for the user, e.g. "Wrong username or password.",
	// shown with the id LoginErrorID (which the methods' inputs name in
	// aria-describedby).
	Error string
	// Methods are the sign-in methods' parts of the page, in order
	// (signin.Method.Render: each method's HTML comes from its own
	// template, escaped there).
	Methods []template.HTML
	// Accounts are the self-service links ("Create account", "Forgot
	// password?"); empty ones are not shown.
	Accounts AccountLinks
}

// LoginErrorID is the id of the login page's error message.
const LoginErrorID = "login-error"

// ConsentData is the data of the consent page.
type ConsentData struct {
	Title      string
	ClientName string
	Username   string
	// Scopes are the requested scopes, in words.
	Scopes    []string
	Action    string
	CSRFToken string
	// Session binds the form to the session the page was shown for.
	Session string
}

// ContinueData is the data of the one-tap page ("Continue as alice?").
type ContinueData struct {
	Title      string
	ClientName string
	Username   string
	Action     string
	CSRFToken  string
	// Session binds the form to the session the page was shown for.
	Session string
}

// Continue renders the one-tap page.
func (p *Pages) Continue(w io.Writer, d ContinueData) error {
	d.Title = cmp.Or(d.Title, "Continue")
	return p.set.ExecuteTemplate(w, "continue.html", d)
}

// ErrorData is the data of the error page.
type ErrorData struct {
	Title   string
	Message string
	Detail  string
}

// Login renders the login page.
func (p *Pages) Login(w io.Writer, d LoginData) error {
	d.Title = cmp.Or(d.Title, "Sign in")
	return p.set.ExecuteTemplate(w, "login.html", d)
}

// Consent renders the consent page.
func (p *Pages) Consent(w io.Writer, d ConsentData) error {
	d.Title = cmp.Or(d.Title, "Allow access")
	return p.set.ExecuteTemplate(w, "consent.html", d)
}

// Error renders the error page.
func (p *Pages) Error(w io.Writer, d ErrorData) error {
	d.Title = cmp.Or(d.Title, "Something went wrong")
	return p.set.ExecuteTemplate(w, "error.html", d)
}

// DemoData is the data of the "authd dev" demo callback page.
type DemoData struct {
	Title  string
	Code   string
	State  string
	Issuer string
	// Curl is a ready token request for the code.
	Curl string
	// Error is the error the authorization server redirected with, if any.
	Error string
}

// Demo renders the demo callback page of "authd dev".
func (p *Pages) Demo(w io.Writer, d DemoData) error {
	d.Title = cmp.Or(d.Title, "Demo app")
	return p.set.ExecuteTemplate(w, "demo.html", d)
}

// LogoutData is the data of the sign-out page.
type LogoutData struct {
	Title     string
	CSRFToken string
	// Done is true once the session has been ended.
	Done bool
	// NoSession: the browser is not signed in; nothing to sign out of.
	NoSession bool
	// Username is who is signed in (the confirmation form).
	Username string
	// Action is where the confirmation form posts; default /logout.
	// Hidden are the form's further fields (RP-initiated logout: the
	// post_logout_redirect_uri, client_id and state to carry on).
	Action string
	Hidden []HiddenField
}

// HiddenField is one hidden form field.
type HiddenField struct{ Name, Value string }

// Logout renders the sign-out page: a confirmation form, or the result.
func (p *Pages) Logout(w io.Writer, d LogoutData) error {
	d.Title = cmp.Or(d.Title, "Sign out")
	return p.set.ExecuteTemplate(w, "logout.html", d)
}

// AccountData is the data of the account page.
type AccountData struct {
	Title     string
	Username  string
	CSRFToken string
	// Apps are the clients the user has consented to.
	Apps []AccountApp
	// Notice confirms the last action.
	Notice string
	// NoSession: the browser is not signed in.
	NoSession bool
	// Passkeys is on when the server offers passkeys: the section with
	// the user's passkeys, "Add a passkey" and "Remove password".
	Passkeys    bool
	PasskeyList []AccountPasskey
	HasPassword bool
	// Accounts are the self-service links (change email, delete account).
	Accounts AccountLinks
	// Error reports a refused action.
	Error string
}

// AccountPasskey is one passkey on the account page.
type AccountPasskey struct {
	ID, Name, Created, LastUsed string
	// Disabled: turned off after a sign count went backwards.
	Disabled bool
}

// EnrolData is the data of the enrolment-link page.
type EnrolData struct {
	Title     string
	CSRFToken string
}

// Enrol renders the page of an enrolment link (authd users passkey-link).
func (p *Pages) Enrol(w io.Writer, d EnrolData) error {
	d.Title = cmp.Or(d.Title, "Add a passkey")
	return p.set.ExecuteTemplate(w, "enrol.html", d)
}

// AccountApp is one consented client on the account page.
type AccountApp struct {
	ClientID string
	Name     string
	// Scopes are the granted scopes, in words.
	Scopes []string
}

// Account renders the account page.
func (p *Pages) Account(w io.Writer, d AccountData) error {
	d.Title = cmp.Or(d.Title, "Your apps")
	return p.set.ExecuteTemplate(w, "account.html", d)
}
