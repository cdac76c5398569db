package mail

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"
)

// The templates. Each is a file in templates/: a "Subject:" line, a blank
// line, and the plain-text body. They are short, name the app the request
// came from (when it came from one) and the address the message was sent
// to, so a person who did not ask can tell what happened.
const (
	TemplateSignupCode      = "signup_code"      // Code, Link: verify the address of a new account
	TemplateSignupExists    = "signup_exists"    // someone tried to sign up with an address that has an account
	TemplateRecoveryCode    = "recovery_code"    // Code, Link: set a new password
	TemplatePasswordChanged = "password_changed" // notice after a recovery
	TemplateEmailChangeCode = "email_change_code"
	TemplateEmailChanged    = "email_changed" // notice to the old address; Address is the new one
	TemplateAccountDeleted  = "account_deleted"
)

//go:embed templates/*.txt
var files embed.FS

// templates holds every template, parsed once; a name not here is refused
// by Enqueue.
var templates = func() map[string]*template.Template {
	m := map[string]*template.Template{}
	for _, name := range []string{TemplateSignupCode, TemplateSignupExists, TemplateRecoveryCode,
		TemplatePasswordChanged, TemplateEmailChangeCode, TemplateEmailChanged, TemplateAccountDeleted} {
		m[name] = template.Must(template.ParseFS(files, "templates/"+name+".txt"))
	}
	return m
}()

// view is what a template sees: the row's data and its recipient.
type view struct {
	Data
	To string
}

// render returns the subject and body of template name for the recipient to.
func render(name, to string, d Data) (subject, body string, err error) {
	t, ok := templates[name]
	if !ok {
		return "", "", fmt.Errorf("mail: unknown template %q", name)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, view{Data: d, To: to}); err != nil {
		return "", "", err
	}
	head, rest, ok := strings.Cut(b.String(), "\n\n")
	subject, found := strings.CutPrefix(head, "Subject: ")
	if !ok || !found || strings.ContainsAny(subject, "\r\n") {
		return "", "", fmt.Errorf("mail: template %q has no Subject line", name)
	}
	return subject, rest, nil
}
