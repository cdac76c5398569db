package accountweb

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/authd/authd/accounts"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/web/templates"
)

// signupForm is the sign-up page.
func (h *Handler) signupForm(w http.ResponseWriter, r *http.Request, rt, form, email string) templates.FormData {
	app := h.app(r.Context(), rt)
	d := templates.FormData{Heading: "Create account", Action: PathSignup, CSRFToken: h.csrfToken(w, r),
		Hidden: hidden("return_to", rt, "form_token", form),
		Fields: []templates.Field{
			{Name: "email", Label: "Email address", Type: "email", Autocomplete: "email", Value: email, Required: true, Autofocus: true},
			{Name: "password", Label: "Password", Type: "password", Autocomplete: "new-password", Required: true, Hint: "At least 8 characters."},
		},
		Submit: "Create account"}
	if app.Name != "" {
		d.Sub = "to continue to " + app.Name
	}
	if rt != "" {
		d.Links = []templates.Link{{Href: rt, Text: "I already have an account"}}
	}
	return d
}

// signup: GET shows the form with a fresh one-time token; POST starts the
// sign-up and redirects to the code page (the same for any address; a
// repeated form lands on the same page).
func (h *Handler) signup(w http.ResponseWriter, r *http.Request) {
	if !h.cfg.Accounts.SignupEnabled() {
		h.notFound(w)
		return
	}
	if r.Method == http.MethodGet {
		h.render(w, http.StatusOK, h.signupForm(w, r, returnTo(r.URL.Query().Get("return_to")), accounts.NewFormToken(), ""))
		return
	}
	if !h.parse(w, r) {
		return
	}
	f := r.PostForm
	rt, form := returnTo(f.Get("return_to")), f.Get("form_token")
	p, err := h.cfg.Accounts.SignUp(r.Context(), accounts.SignUpInput{FormToken: form, Email: f.Get("email"),
		Password: f.Get("password"), App: h.app(r.Context(), rt), Source: source(r)})
	if err != nil {
		if errors.Is(err, accounts.ErrInvalidForm) {
			form = accounts.NewFormToken()
		}
		h.fail(w, r, h.signupForm(w, r, rt, form, f.Get("email")), err)
		return
	}
	http.Redirect(w, r, PathSignupVerify+"?"+url.Values{"flow": {p.Flow}}.Encode(), http.StatusSeeOther)
}

// codeForm is the "enter the code" page of a flow. A link from the mail
// carries its token: the page then asks only for a click (a GET never
// uses a code: mail scanners open links).
func (h *Handler) codeForm(w http.ResponseWriter, r *http.Request, action, flow, token string, p accounts.Pending, extra ...templates.Field) templates.FormData {
	d := templates.FormData{Heading: "Check your email", Action: action, CSRFToken: h.csrfToken(w, r),
		Sub:    "We sent a message to " + p.Email + ". It has a 6-digit code, valid for 15 minutes.",
		Hidden: hidden("flow", flow, "token", token), Submit: "Continue"}
	if token == "" {
		d.Fields = append(d.Fields, templates.Field{Name: "code", Label: "Code", Autocomplete: "one-time-code",
			Inputmode: "numeric", Pattern: "[0-9 ]{6,7}", Required: true, Autofocus: len(extra) == 0})
	} else {
		d.Sub = "Confirm to continue with " + p.Email + "."
	}
	d.Fields = append(d.Fields, extra...)
	return d
}

// closed answers a flow whose code can no longer be used: expired (start
// again), or used already (a repeated form: say where to go on, since
// what the code did is done).
func (h *Handler) closed(w http.ResponseWriter, err error, start string, used templates.FormData) bool {
	switch {
	case errors.Is(err, accounts.ErrCodeUsed):
		h.render(w, http.StatusOK, used)
	case errors.Is(err, accounts.ErrCodeExpired):
		h.render(w, http.StatusBadRequest, templates.FormData{Heading: "This code can no longer be used",
			Error: "This code has expired or had too many wrong tries. Start again to get a new one.",
			Links: []templates.Link{{Href: start, Text: "Start again"}}})
	default:
		return false
	}
	return true
}

// next is where a finished flow goes on: the authorization request it
// came from, else def.
func next(app accounts.App, def string) string {
	if app.ReturnTo != "" {
		return app.ReturnTo
	}
	return def
}

// signupVerify: GET shows the code page; POST verifies, creates the user,
// signs them in and continues the authorization request the sign-up
// started from.
func (h *Handler) signupVerify(w http.ResponseWriter, r *http.Request) {
	if !h.cfg.Accounts.SignupEnabled() {
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
	p, app, err := h.cfg.Accounts.Describe(r.Context(), flow, storage.FlowSignup)
	ready := func(app accounts.App) templates.FormData {
		return templates.FormData{Heading: "Your account is ready", Notice: "This code was already used: the account exists.",
			Links: []templates.Link{{Href: next(app, "/account"), Text: "Continue"}}}
	}
	if err != nil {
		if !h.closed(w, err, PathSignup, ready(app)) {
			h.fail(w, r, templates.FormData{Heading: "Check your email"}, err)
		}
		return
	}
	d := h.codeForm(w, r, PathSignupVerify, flow, token, p)
	if r.Method == http.MethodGet {
		h.render(w, http.StatusOK, d)
		return
	}
	u, app, err := h.cfg.Accounts.VerifySignUp(r.Context(), flow, accounts.Proof{Code: q.Get("code"), Token: token})
	if err != nil {
		if !h.closed(w, err, PathSignup, ready(app)) {
			h.fail(w, r, h.codeForm(w, r, PathSignupVerify, flow, "", p), err)
		}
		return
	}
	// The address is proved by the code (RFC 8176 "otp"); the password
	// was chosen, not presented. The flow continues the authorization
	// request the sign-up started from: consent, one tap or the code.
	amr := []string{"otp"}
	if app.ReturnTo != "" {
		h.cfg.Flow.Complete(w, r, app.ReturnTo, signin.Result{User: u, AMR: amr})
		return
	}
	if err := h.cfg.SignIn(r.Context(), w, r, u, amr); err != nil {
		h.fail(w, r, templates.FormData{Heading: "Your account is ready"}, err)
		return
	}
	http.Redirect(w, r, "/account", http.StatusSeeOther)
}
