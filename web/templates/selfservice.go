package templates

import (
	"cmp"
	"io"
)

// AccountLinks are the links to the self-service pages (package
// accountweb) that other pages show; an empty one is not shown.
type AccountLinks struct {
	SignUp      string // login page: "Create account"
	Recover     string // login page: "Forgot password?"
	ChangeEmail string // account page: "Change email address"
	Delete      string // account page: "Delete account"
}

// FormData is the data of a self-service page (selfservice.html): a
// heading, a message, and a form of plain fields; every self-service page
// is one of these, so they look and behave alike.
type FormData struct {
	Title   string
	Heading string
	// Sub is the line under the heading.
	Sub string
	// Error is shown as an alert and marks the form's fields invalid;
	// Notice confirms something.
	Error  string
	Notice string
	// Action is where the form posts; no form when empty.
	Action    string
	CSRFToken string
	Hidden    []HiddenField
	Fields    []Field
	Submit    string
	// Danger styles the submit button as destructive.
	Danger bool
	Links  []Link
}

// Field is one input of a FormData form.
type Field struct {
	Name, Label, Type, Autocomplete, Value string
	// Hint is a line under the input.
	Hint string
	// Inputmode and Pattern help mobile keyboards (a code: numeric).
	Inputmode, Pattern  string
	Required, Autofocus bool
}

// Link is a link under a page's form.
type Link struct{ Href, Text string }

// SelfService renders a self-service page.
func (p *Pages) SelfService(w io.Writer, d FormData) error {
	d.Title = cmp.Or(d.Title, d.Heading)
	return p.set.ExecuteTemplate(w, "selfservice.html", d)
}
