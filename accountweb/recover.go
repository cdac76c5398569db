package accountweb

import (
	"net/http"
	"net/url"

	"github.com/authd/authd/accounts"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/web/templates"
)

func (h *Handler) recoverForm(w http.ResponseWriter, r *http.Request, rt, form, email string) templates.FormData {
	d := templates.FormData{Heading: "Forgot your password?", Action: PathRecover, CSRFToken: h.csrfToken(w, r),
		Sub:    "Enter your account's email address. If it has an account, we send it a code to set a new password.",
		Hidden: hidden("return_to", rt, "form_token", form),
		Fields: []templates.Field{{Name: "email", Label: "Email address", Type: "email", Autocomplete: "email", Value: email, Required: true, Autofocus: true}},
		Submit: "Send code"}
	if rt != "" {
		d.Links = []templates.Link{{Href: rt, Text: "Back to sign-in"}}
	}
	return d
}

// recover: GET shows the form; POST starts a recovery and redirects to
// the code page, whatever the address.
func (h *Handler) recover(w http.ResponseWriter, r *http.Request) {
	if !h.cfg.Accounts.RecoveryEnabled() {
		h.notFound(w)
		return
	}
	h.requestCode(w, r, PathRecoverCode, func(v url.Values, form, email string) templates.FormData {
		return h.recoverForm(w, r, returnTo(v.Get("return_to")), form, email)
	}, func(v url.Values, form string) (accounts.Pending, error) {
		return h.cfg.Accounts.RequestRecovery(r.Context(), accounts.RecoveryInput{FormToken: form, Email: v.Get("email"),
			App: h.app(r.Context(), returnTo(v.Get("return_to"))), Source: source(r)})
	})
}

var newPasswordField = templates.Field{Name: "password", Label: "New password", Type: "password",
	Autocomplete: "new-password", Required: true, Hint: "At least 8 characters. Every device signed in will be signed out."}

// recoverVerify: the code (or the link's token) and the new password.
func (h *Handler) recoverVerify(w http.ResponseWriter, r *http.Request) {
	if !h.cfg.Accounts.RecoveryEnabled() {
		h.notFound(w)
		return
	}
	changed := func(app accounts.App) templates.FormData {
		d := templates.FormData{Heading: "Your password was changed",
			Notice: "Every device that was signed in has been signed out. Sign in with your new password."}
		if app.ReturnTo != "" {
			d.Links = []templates.Link{{Href: app.ReturnTo, Text: "Sign in"}}
		}
		return d
	}
	c, ok := h.codePage(w, r, storage.FlowRecovery, PathRecoverCode, PathRecover, changed, newPasswordField)
	if !ok {
		return
	}
	name := ""
	if c.app.ClientID != "" {
		name = h.cfg.ClientName(r.Context(), c.app.ClientID)
	}
	if _, err := h.cfg.Accounts.Recover(r.Context(), c.flow, c.proof, r.PostForm.Get("password"), name); err != nil {
		if !h.closed(w, err, PathRecover, changed(c.app)) {
			h.fail(w, r, c.page, err)
		}
		return
	}
	h.render(w, http.StatusOK, changed(c.app))
}
