package accountweb

import (
	"net/http"
	"net/url"

	"github.com/authd/authd/accounts"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/web/templates"
)

// signedOut is the answer to an account page without a session.
func (h *Handler) signedOut(w http.ResponseWriter) {
	h.render(w, http.StatusUnauthorized, templates.FormData{Heading: "Not signed in",
		Sub: "Sign in from one of your apps, then come back to this page."})
}

func (h *Handler) emailForm(w http.ResponseWriter, r *http.Request, current, form, email string) templates.FormData {
	return templates.FormData{Heading: "Change email address", Action: PathEmail, CSRFToken: h.csrfToken(w, r),
		Sub:    "Your address is " + current + ". We send a code to the new one; the change is made when you enter it.",
		Hidden: hidden("form_token", form),
		Fields: []templates.Field{{Name: "email", Label: "New email address", Type: "email", Autocomplete: "email", Value: email, Required: true, Autofocus: true}},
		Submit: "Send code", Links: []templates.Link{{Href: "/account", Text: "Back to your account"}}}
}

// email: the signed-in user asks to change their address (not offered
// without mail: the new address is proved by a code sent to it).
func (h *Handler) email(w http.ResponseWriter, r *http.Request) {
	if !h.cfg.Accounts.MailEnabled() {
		h.notFound(w)
		return
	}
	u, _, ok := h.cfg.Session(r)
	if !ok {
		h.signedOut(w)
		return
	}
	current := u.Email
	if current == "" {
		current = "not set"
	}
	h.requestCode(w, r, PathEmailVerify, func(_ url.Values, form, email string) templates.FormData {
		return h.emailForm(w, r, current, form, email)
	}, func(v url.Values, form string) (accounts.Pending, error) {
		return h.cfg.Accounts.RequestEmailChange(r.Context(), u.Subject, form, v.Get("email"), source(r))
	})
}

// emailVerify: the code sent to the new address.
func (h *Handler) emailVerify(w http.ResponseWriter, r *http.Request) {
	if !h.cfg.Accounts.MailEnabled() {
		h.notFound(w)
		return
	}
	u, _, ok := h.cfg.Session(r)
	if !ok {
		h.signedOut(w)
		return
	}
	changed := templates.FormData{Heading: "Your address was changed", Notice: "Your account uses " + u.Email + ".",
		Links: []templates.Link{{Href: "/account", Text: "Back to your account"}}}
	c, ok := h.codePage(w, r, storage.FlowEmailChange, PathEmailVerify, PathEmail, func(accounts.App) templates.FormData { return changed })
	if !ok {
		return
	}
	got, err := h.cfg.Accounts.ConfirmEmailChange(r.Context(), u.Subject, c.flow, c.proof)
	if err != nil {
		if !h.closed(w, err, PathEmail, changed) {
			h.fail(w, r, c.page, err)
		}
		return
	}
	h.render(w, http.StatusOK, templates.FormData{Heading: "Your address was changed", Notice: "Your account now uses " + got.Email + ".",
		Links: []templates.Link{{Href: "/account", Text: "Back to your account"}}})
}

// delete: "Delete account", with the password again when the sign-in is
// older than accounts.ReauthWindow.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request) {
	u, sess, ok := h.cfg.Session(r)
	if !ok {
		h.signedOut(w)
		return
	}
	d := templates.FormData{Heading: "Delete account", Action: PathDelete, CSRFToken: h.csrfToken(w, r),
		Sub:    "This deletes the account " + u.Username + " for good: every app is signed out and its data is removed. It cannot be undone.",
		Submit: "Delete my account", Danger: true, Links: []templates.Link{{Href: "/account", Text: "Keep my account"}}}
	if h.cfg.Accounts.NeedsReauth(sess.AuthTime) {
		d.Fields = []templates.Field{{Name: "password", Label: "Your password", Type: "password", Autocomplete: "current-password", Required: true, Autofocus: true,
			Hint: "You signed in a while ago: enter your password to confirm it is you."}}
	}
	if r.Method == http.MethodGet {
		h.render(w, http.StatusOK, d)
		return
	}
	if !h.parse(w, r) {
		return
	}
	if err := h.cfg.Accounts.DeleteAccount(r.Context(), u.Subject, sess.AuthTime, r.PostForm.Get("password")); err != nil {
		h.fail(w, r, d, err)
		return
	}
	notice := "Every app was signed out and your data was removed."
	if h.cfg.Accounts.MailEnabled() && u.Email != "" {
		notice += " A confirmation is on its way to your email."
	}
	h.render(w, http.StatusOK, templates.FormData{Heading: "Your account was deleted", Notice: notice})
}
