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
	h.requestCode(w, r, PathSignupVerify, func(v url.Values, form, email string) templates.FormData {
		return h.signupForm(w, r, returnTo(v.Get("return_to")), form, email)
	}, func(v url.Values, form string) (accounts.Pending, error) {
		return h.cfg.Accounts.SignUp(r.Context(), accounts.SignUpInput{FormToken: form, Email: v.Get("email"),
			Password: v.Get("password"), App: h.app(r.Context(), returnTo(v.Get("return_to"))), Source: source(r)})
	})
}

// requestCode answers a page whose form starts a code flow (sign-up,
// recovery, email change): GET shows the form with a fresh one-time token;
// POST runs start and redirects to the flow's code page at verify. A
// refusal shows the form again in words, with a fresh token if its own
// was refused. form builds the page from the request's values (the query,
// or the posted form).
func (h *Handler) requestCode(w http.ResponseWriter, r *http.Request, verify string,
	form func(v url.Values, token, email string) templates.FormData,
	start func(v url.Values, token string) (accounts.Pending, error)) {
	if r.Method == http.MethodGet {
		h.render(w, http.StatusOK, form(r.URL.Query(), accounts.NewFormToken(), ""))
		return
	}
	if !h.parse(w, r) {
		return
	}
	v := r.PostForm
	token := v.Get("form_token")
	p, err := start(v, token)
	if err != nil {
		if errors.Is(err, accounts.ErrInvalidForm) {
			token = accounts.NewFormToken()
		}
		h.fail(w, r, form(v, token, v.Get("email")), err)
		return
	}
	http.Redirect(w, r, verify+"?"+url.Values{"flow": {p.Flow}}.Encode(), http.StatusSeeOther)
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

// codeStep is a posted code page: its flow, the pending step it names,
// the app it came from, the code or link token presented, and the page.
type codeStep struct {
	flow    string
	pending accounts.Pending
	app     accounts.App
	proof   accounts.Proof
	page    templates.FormData
}

// codePage answers the code page of a flow of purpose at action up to the
// check of the code: a GET shows the page (the code field, or a click for
// a link's token); a flow that can no longer be used is answered with
// closed (start again at start, or done for a used code). ok is true for
// a POST whose code the caller checks; extra are the page's further
// fields.
func (h *Handler) codePage(w http.ResponseWriter, r *http.Request, purpose, action, start string, done func(accounts.App) templates.FormData, extra ...templates.Field) (c codeStep, ok bool) {
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		if !h.parse(w, r) {
			return c, false
		}
		q = r.PostForm
	}
	c.flow = q.Get("flow")
	c.proof = accounts.Proof{Code: q.Get("code"), Token: q.Get("token")}
	p, app, err := h.cfg.Accounts.Describe(r.Context(), c.flow, purpose)
	if err != nil {
		if !h.closed(w, err, start, done(app)) {
			h.fail(w, r, templates.FormData{Heading: "Check your email"}, err)
		}
		return c, false
	}
	c.pending, c.app = p, app
	c.page = h.codeForm(w, r, action, c.flow, c.proof.Token, p, extra...)
	if r.Method == http.MethodGet {
		h.render(w, http.StatusOK, c.page)
		return c, false
	}
	return c, true
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
	ready := func(app accounts.App) templates.FormData {
		return templates.FormData{Heading: "Your account is ready", Notice: "This code was already used: the account exists.",
			Links: []templates.Link{{Href: next(app, "/account"), Text: "Continue"}}}
	}
	c, ok := h.codePage(w, r, storage.FlowSignup, PathSignupVerify, PathSignup, ready)
	if !ok {
		return
	}
	u, app, err := h.cfg.Accounts.VerifySignUp(r.Context(), c.flow, c.proof)
	if err != nil {
		if !h.closed(w, err, PathSignup, ready(app)) {
			h.fail(w, r, h.codeForm(w, r, PathSignupVerify, c.flow, "", c.pending), err)
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
