package accountweb

import (
	"errors"
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
	if r.Method == http.MethodGet {
		h.render(w, http.StatusOK, h.recoverForm(w, r, returnTo(r.URL.Query().Get("return_to")), accounts.NewFormToken(), ""))
		return
	}
	if !h.parse(w, r) {
		return
	}
	f := r.PostForm
	rt, form := returnTo(f.Get("return_to")), f.Get("form_token")
	p, err := h.cfg.Accounts.RequestRecovery(r.Context(), accounts.RecoveryInput{FormToken: form, Email: f.Get("email"),
		App: h.app(r.Context(), rt), Source: source(r)})
	if err != nil {
		if errors.Is(err, accounts.ErrInvalidForm) {
			form = accounts.NewFormToken()
		}
		h.fail(w, r, h.recoverForm(w, r, rt, form, f.Get("email")), err)
		return
	}
	http.Redirect(w, r, PathRecoverCode+"?"+url.Values{"flow": {p.Flow}}.Encode(), http.StatusSeeOther)
}

var newPasswordField = templates.Field{Name: "password", Label: "New password", Type: "password",
	Autocomplete: "new-password", Required: true, Hint: "At least 8 characters. Every device signed in will be signed out."}

// recoverVerify: the code (or the link's token) and the new password.
func (h *Handler) recoverVerify(w http.ResponseWriter, r *http.Request) {
	if !h.cfg.Accounts.RecoveryEnabled() {
		h.notFound(w)
		return
	}
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		if !h.parse(w, r) {
			return
		}
		q = r.PostForm
	}
	flow, token := q.Get("flow"), q.Get("token")
	p, app, err := h.cfg.Accounts.Describe(r.Context(), flow, storage.FlowRecovery)
	changed := func(app accounts.App) templates.FormData {
		d := templates.FormData{Heading: "Your password was changed",
			Notice: "Every device that was signed in has been signed out. Sign in with your new password."}
		if app.ReturnTo != "" {
			d.Links = []templates.Link{{Href: app.ReturnTo, Text: "Sign in"}}
		}
		return d
	}
	if err != nil {
		if !h.closed(w, err, PathRecover, changed(app)) {
			h.fail(w, r, templates.FormData{Heading: "Check your email"}, err)
		}
		return
	}
	d := h.codeForm(w, r, PathRecoverCode, flow, token, p, newPasswordField)
	if r.Method == http.MethodGet {
		h.render(w, http.StatusOK, d)
		return
	}
	name := ""
	if app.ClientID != "" {
		name = h.cfg.ClientName(r.Context(), app.ClientID)
	}
	if _, err := h.cfg.Accounts.Recover(r.Context(), flow, accounts.Proof{Code: q.Get("code"), Token: token}, q.Get("password"), name); err != nil {
		if !h.closed(w, err, PathRecover, changed(app)) {
			h.fail(w, r, d, err)
		}
		return
	}
	h.render(w, http.StatusOK, changed(app))
}
