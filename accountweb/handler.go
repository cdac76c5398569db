package accountweb

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/authd/authd/accounts"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/secrets"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/web/templates"
)

// Paths of the pages.
const (
	PathSignup       = "/signup"
	PathSignupVerify = "/signup/verify"
	PathRecover      = "/recover"
	PathRecoverCode  = "/recover/verify"
	PathEmail        = "/account/email"
	PathEmailVerify  = "/account/email/verify"
	PathDelete       = "/account/delete"
)

// Config configures the pages.
type Config struct {
	Accounts *accounts.Service
	// Session returns the browser's signed-in user and session
	// (oauth.Server.SessionUser).
	Session func(r *http.Request) (identity.User, identity.Session, bool)
	// Flow continues the authorization request a sign-up started from,
	// signed in (oauth.Server.AccountFlow).
	Flow signin.Flow
	// SignIn starts a session for a person who proved who they are, for
	// a sign-up that started from no authorization request
	// (oauth.Server.SignIn).
	SignIn func(ctx context.Context, w http.ResponseWriter, r *http.Request, u identity.User, amr []string) error
	// ClientName names a client for pages and mail ("" if unknown).
	ClientName func(ctx context.Context, clientID string) string
	// Secret keys the CSRF tokens; Secure marks cookies Secure (https
	// issuer).
	Secret []byte
	Secure bool
	Pages  *templates.Pages
	Logger *slog.Logger
}

// Handler serves the pages.
type Handler struct {
	cfg     Config
	csrfKey []byte
	mux     *http.ServeMux
	routes  map[string]string
}

// New returns the pages' handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Accounts == nil || cfg.Session == nil || cfg.SignIn == nil || cfg.Flow == nil || cfg.Pages == nil || len(cfg.Secret) < secrets.MinLen {
		return nil, errors.New("accountweb: accounts, session, sign-in, pages and secret are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ClientName == nil {
		cfg.ClientName = func(context.Context, string) string { return "" }
	}
	h := &Handler{cfg: cfg, csrfKey: secrets.Derive(cfg.Secret, "accountweb/csrf"), mux: http.NewServeMux(), routes: map[string]string{}}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.render(w, http.StatusForbidden, templates.FormData{Heading: "Refused",
			Error: "This form was not sent from this site. For your safety the request was refused."})
	}))
	for path, f := range map[string]http.HandlerFunc{
		PathSignup: h.signup, PathSignupVerify: h.signupVerify, PathRecover: h.recover, PathRecoverCode: h.recoverVerify,
		PathEmail: h.email, PathEmailVerify: h.emailVerify, PathDelete: h.delete,
	} {
		h.routes[path] = path
		h.mux.Handle("GET "+path, pageHeaders(f))
		h.mux.Handle("POST "+path, pageHeaders(cop.Handler(f)))
	}
	return h, nil
}

// ServeHTTP serves the pages; a path or method that is none of theirs
// gets 404 or 405 from the mux.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Route returns path's route label, or "" if it is not one of the pages.
func (h *Handler) Route(path string) string { return h.routes[path] }

// LoginLinks are the login page's links, carrying the authorization
// request to return to.
func (h *Handler) LoginLinks(returnTo string) templates.AccountLinks {
	var l templates.AccountLinks
	q := "?" + url.Values{"return_to": {returnTo}}.Encode()
	if h.cfg.Accounts.SignupEnabled() {
		l.SignUp = PathSignup + q
	}
	if h.cfg.Accounts.RecoveryEnabled() {
		l.Recover = PathRecover + q
	}
	return l
}

// AccountLinks are the account page's links: deletion always, email
// change only when mail can be sent.
func (h *Handler) AccountLinks() templates.AccountLinks {
	l := templates.AccountLinks{Delete: PathDelete}
	if h.cfg.Accounts.MailEnabled() {
		l.ChangeEmail = PathEmail
	}
	return l
}

// pageHeaders sets the headers of every page (as package oauth's pages).
func pageHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

const csrfCookie = "authd_account_csrf"

// csrfToken returns the form token for this browser, setting its cookie
// if it has none.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	v := ""
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) >= 22 && len(ck.Value) <= 64 {
		v = ck.Value
	} else {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		v = base64.RawURLEncoding.EncodeToString(b)
		http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", HttpOnly: true, Secure: h.cfg.Secure, SameSite: http.SameSiteLaxMode})
	}
	return h.csrfMAC(v)
}

func (h *Handler) csrfMAC(v string) string {
	m := hmac.New(sha256.New, h.csrfKey)
	m.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// parse reads a posted form and checks its CSRF token (constant time).
func (h *Handler) parse(w http.ResponseWriter, r *http.Request) bool {
	if err := r.ParseForm(); err != nil {
		h.render(w, http.StatusBadRequest, templates.FormData{Heading: "Something went wrong", Error: "The form could not be read. Go back and try again."})
		return false
	}
	ck, err := r.Cookie(csrfCookie)
	if err != nil || !hmac.Equal([]byte(r.PostForm.Get("csrf_token")), []byte(h.csrfMAC(ck.Value))) {
		h.render(w, http.StatusForbidden, templates.FormData{Heading: "This form has expired",
			Error: "This form has expired or was not sent from this site.", Links: []templates.Link{{Href: r.URL.RequestURI(), Text: "Reload the form"}}})
		return false
	}
	return true
}

func (h *Handler) render(w http.ResponseWriter, status int, d templates.FormData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if status == http.StatusUnauthorized {
		// RFC 9110 §15.5.2: a 401 carries a challenge, the same as the
		// oauth package's pages.
		w.Header().Set("WWW-Authenticate", `Cookie realm="authd"`)
	}
	w.WriteHeader(status)
	if err := h.cfg.Pages.SelfService(w, d); err != nil {
		h.cfg.Logger.Error("render self-service page", "error", err)
	}
}

// notFound answers a switched-off page as if it did not exist.
func (h *Handler) notFound(w http.ResponseWriter) {
	h.render(w, http.StatusNotFound, templates.FormData{Heading: "Not found", Error: "There is no such page."})
}

// words are the service's errors as the pages say them.
var words = []struct {
	err  error
	text string
}{
	{identity.ErrInvalidPassword, "Choose a password of 8 to 256 characters."},
	{accounts.ErrInvalidEmail, "Enter one email address, like name@example.com."},
	{accounts.ErrInvalidForm, "This form has expired. Reload the page and try again."},
	{accounts.ErrWrongCode, "That code is not right. Check the message and try again."},
	{accounts.ErrCodeExpired, "This code has expired. Start again to get a new one."},
	{accounts.ErrCodeUsed, "This code was already used."},
	{accounts.ErrAddressTaken, "This address already has an account. Sign in, or use \"Forgot password?\"."},
	{accounts.ErrEmailInUse, "This address is already used by another account."},
	{accounts.ErrReauth, "Enter your password to confirm it is you."},
	{accounts.ErrWrongPassword, "That password is not right."},
}

// fail shows d again with the error in words and its status.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, d templates.FormData, err error) {
	status := http.StatusBadRequest
	if errors.Is(err, accounts.ErrWrongPassword) {
		status = http.StatusUnauthorized
	}
	for _, x := range words {
		if errors.Is(err, x.err) {
			d.Error = x.text
			h.render(w, status, d)
			return
		}
	}
	var le *accounts.LimitError
	switch {
	case errors.As(err, &le):
		status = http.StatusTooManyRequests
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(le.RetryAfter, time.Second).Seconds()))))
		d.Error = le.Error()
	case errors.Is(err, storage.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "2")
		d.Error = "The service is busy. Try again in a few seconds."
	default:
		h.cfg.Logger.ErrorContext(r.Context(), "self-service page", "path", r.URL.Path, "error", err)
		status = http.StatusInternalServerError
		d.Error = "Something went wrong on our side. Try again in a moment."
	}
	h.render(w, status, d)
}

// returnTo is the authorization request to return to, from a form or
// query: only a local /oauth2/authorize URL (no open redirect).
func returnTo(v string) string {
	if v == "" || len(v) > 4096 || v[0] != '/' || len(v) > 1 && (v[1] == '/' || v[1] == '\\') {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Path != "/oauth2/authorize" {
		return ""
	}
	return u.RequestURI()
}

// app is the app a returnTo names.
func (h *Handler) app(ctx context.Context, rt string) accounts.App {
	a := accounts.App{ReturnTo: rt}
	if rt == "" {
		return a
	}
	if u, err := url.Parse(rt); err == nil {
		a.ClientID = u.Query().Get("client_id")
	}
	if a.ClientID != "" {
		a.Name = h.cfg.ClientName(ctx, a.ClientID)
	}
	return a
}

// source is the client's address (the peer: authd trusts no
// X-Forwarded-For, as the sign-in limits).
func source(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func hidden(kv ...string) []templates.HiddenField {
	var out []templates.HiddenField
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			out = append(out, templates.HiddenField{Name: kv[i], Value: kv[i+1]})
		}
	}
	return out
}
