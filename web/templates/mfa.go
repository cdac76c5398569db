package templates

import (
	"cmp"
	"html/template"
	"io"
)

// FactorData is the data of the second-factor page.
type FactorData struct {
	Title      string
	Username   string
	ClientName string
	// Error is shown with the id LoginErrorID.
	Error string
	// Factors are the factors' parts of the page (signin.Factor.Render).
	Factors []template.HTML
}

// Factor renders the second-factor page.
func (p *Pages) Factor(w io.Writer, d FactorData) error {
	d.Title = cmp.Or(d.Title, "Second step")
	return p.set.ExecuteTemplate(w, "factor.html", d)
}

// MFASetupData is the data of the authenticator app's set-up page.
type MFASetupData struct {
	Title string
	// QR is the URL of the otpauth URI as a QR code (a PNG served by
	// this server for the signed-in user's set-up in progress).
	QR     string
	URI    string
	Secret string
	// Action is where the confirmation posts (step=factor-setup, otp).
	Action    string
	CSRFToken string
	Error     string
	// Required: the user must set it up to continue signing in.
	Required bool
}

// MFASetup renders the set-up page.
func (p *Pages) MFASetup(w io.Writer, d MFASetupData) error {
	d.Title = cmp.Or(d.Title, "Set up an authenticator app")
	return p.set.ExecuteTemplate(w, "mfa_setup.html", d)
}

// MFACodesData is the data of the recovery codes page.
type MFACodesData struct {
	Title     string
	Codes     []string
	Next      string
	NextLabel string
}

// MFACodes renders the recovery codes, shown once.
func (p *Pages) MFACodes(w io.Writer, d MFACodesData) error {
	d.Title = cmp.Or(d.Title, "Recovery codes")
	return p.set.ExecuteTemplate(w, "mfa_codes.html", d)
}

// AccountMFA is the account page's two-step sign-in section.
type AccountMFA struct {
	Has       bool
	CodesLeft int
	CSRFToken string
}
