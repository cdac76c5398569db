package accountweb

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/authd/authd/accounts"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/mail"
	"github.com/authd/authd/password"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
	"github.com/authd/authd/web/templates"
)

var secret = []byte("0123456789abcdef0123456789abcdef-accountweb")

type flow struct{ completed []signin.Result }

func (f *flow) Complete(w http.ResponseWriter, _ *http.Request, returnTo string, res signin.Result) {
	f.completed = append(f.completed, res)
	http.Redirect(w, &http.Request{}, returnTo, http.StatusSeeOther)
}
func (f *flow) Fail(http.ResponseWriter, *http.Request, string, *signin.Failure) {}

func newHandler(t *testing.T, signedIn *identity.User) *Handler {
	t.Helper()
	return newHandlerOn(t, postgres.New(pgtest.New(t)), signedIn)
}

func newHandlerOn(t *testing.T, store *postgres.Store, signedIn *identity.User) *Handler {
	t.Helper()
	cheap := password.New(password.Options{Params: password.Params{Memory: 64, Time: 1, Threads: 1}})
	people := identity.New(store, identity.Options{Passwords: cheap})
	outbox, err := mail.NewOutbox(store, mail.OutboxConfig{Secret: secret, Domain: "example.test"})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := accounts.New(accounts.Config{Secret: secret, Store: store, Outbox: outbox, People: people, Passwords: cheap,
		LinkBase: "https://login.example.test", Signup: true, Recovery: true})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Accounts: svc, Flow: &flow{}, Secret: secret, Pages: templates.Parse(),
		Session: func(*http.Request) (identity.User, identity.Session, bool) {
			if signedIn == nil {
				return identity.User{}, identity.Session{}, false
			}
			return *signedIn, identity.Session{AuthTime: time.Now()}, true
		},
		SignIn: func(context.Context, http.ResponseWriter, *http.Request, identity.User, []string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestPagesCarryTheSignInPagesHeaders(t *testing.T) {
	h := newHandler(t, nil)
	for _, path := range []string{PathSignup, PathRecover, PathSignupVerify + "?flow=x", PathDelete} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		hd := rec.Header()
		if !strings.Contains(hd.Get("Content-Security-Policy"), "default-src 'none'") || hd.Get("X-Frame-Options") != "DENY" ||
			hd.Get("Cache-Control") != "no-store" || hd.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: headers %v", path, hd)
		}
		if strings.Contains(rec.Body.String(), "<script") || strings.Contains(rec.Body.String(), "style=") {
			t.Errorf("%s: inline script or style", path)
		}
	}
}

// A POST without the CSRF token, or from another site, changes nothing.
func TestFormsRefuseForgedPosts(t *testing.T) {
	h := newHandler(t, nil)
	get := httptest.NewRecorder()
	h.ServeHTTP(get, httptest.NewRequest(http.MethodGet, PathSignup, nil))
	cookies := get.Result().Cookies()
	form := url.Values{"email": {"x@example.test"}, "password": {"a long passphrase"}, "form_token": {accounts.NewFormToken()}}
	for name, prep := range map[string]func(r *http.Request){
		"no token": func(r *http.Request) {
			for _, c := range cookies {
				r.AddCookie(c)
			}
		},
		"no cookie": func(*http.Request) {},
		"cross-site": func(r *http.Request) {
			for _, c := range cookies {
				r.AddCookie(c)
			}
			r.Header.Set("Sec-Fetch-Site", "cross-site")
		},
	} {
		req := httptest.NewRequest(http.MethodPost, PathSignup, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		prep(req)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s: %d", name, rec.Code)
		}
	}
}

func TestReturnToIsOnlyTheAuthorizationEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"/oauth2/authorize?client_id=app&state=x": "/oauth2/authorize?client_id=app&state=x",
		"https://evil.example/oauth2/authorize":   "",
		"//evil.example/oauth2/authorize":         "",
		"/\\evil.example":                         "",
		"/account":                                "",
		"/oauth2/authorize/../token":              "",
		"":                                        "",
	} {
		if got := returnTo(in); got != want {
			t.Errorf("returnTo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAccountPagesNeedASession(t *testing.T) {
	h := newHandler(t, nil)
	for _, path := range []string{PathEmail, PathEmailVerify, PathDelete} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("%s without a session: %d", path, rec.Code)
		}
		// RFC 9110 §15.5.2: a 401 carries a challenge.
		if rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s without a session: 401 without WWW-Authenticate", path)
		}
	}
}

func TestLoginLinksCarryTheRequest(t *testing.T) {
	h := newHandler(t, nil)
	l := h.LoginLinks("/oauth2/authorize?client_id=app&state=s")
	if l.SignUp != "/signup?return_to=%2Foauth2%2Fauthorize%3Fclient_id%3Dapp%26state%3Ds" || !strings.HasPrefix(l.Recover, "/recover?return_to=") {
		t.Fatalf("%+v", l)
	}
	if h.Route("/signup") == "" || h.Route("/oauth2/token") != "" {
		t.Fatal("Route claims the wrong paths")
	}
}
