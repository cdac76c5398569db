package passkeyweb_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/authd/authd/passkey"
	"github.com/authd/authd/passkey/passkeytest"
	"github.com/authd/authd/passkey/passkeyweb"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
)

const origin = "https://id.example.com"

func setup(t *testing.T) (*passkeyweb.Method, *passkey.Service, *passkeytest.Authenticator, *passkeytest.Credential) {
	t.Helper()
	rp, _ := passkey.Configure(passkey.Settings{Issuer: origin})
	store := memory.New()
	svc, err := passkey.New(rp, store, passkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u := &storage.User{Username: "alice", PasswordHash: []byte("x")}
	if err := store.CreateUser(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	a := &passkeytest.Authenticator{Origin: origin}
	opts, _ := svc.BeginEnrol(t.Context(), u.Subject, "s")
	c, answer, _ := a.Create(opts)
	if _, err := svc.FinishEnrol(t.Context(), u.Subject, "s", "", answer); err != nil {
		t.Fatal(err)
	}
	return passkeyweb.New(svc), svc, a, c
}

func TestRender(t *testing.T) {
	m, _, _, _ := setup(t)
	h := string(m.Render(t.Context(), signin.Page{Action: "/oauth2/authorize?x=1&y=2", CSRFToken: "tok"}))
	for _, want := range []string{"Sign in with a passkey", `name="method" value="passkey"`, `name="step" value="login"`,
		`action="/oauth2/authorize?x=1&amp;y=2"`, `data-csrf="tok"`, `<script src="/static/passkey.js" defer></script>`} {
		if !strings.Contains(h, want) {
			t.Errorf("Render lacks %s:\n%s", want, h)
		}
	}
	if strings.Contains(h, "style=") || strings.Count(h, "<script") != 1 || strings.Contains(h, "<script>") {
		t.Errorf("inline script or style:\n%s", h)
	}
}

func options(t *testing.T, m *passkeyweb.Method, csrf string, hdr map[string]string) (int, []byte) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, origin+"/signin/passkey/options", nil)
	if csrf != "" {
		r.Header.Set("X-CSRF-Token", csrf)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	var h http.Handler
	for _, rt := range m.Routes(nil) {
		if rt.Path == "options" && rt.Method == http.MethodPost {
			h = rt.Handler
		}
	}
	h.ServeHTTP(w, r)
	b, _ := io.ReadAll(w.Result().Body)
	if w.Result().Header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q", w.Result().Header.Get("Cache-Control"))
	}
	return w.Code, b
}

func TestOptions(t *testing.T) {
	m, _, _, _ := setup(t)
	if code, body := options(t, m, "tok", map[string]string{"Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden || !strings.Contains(string(body), `"message"`) {
		t.Errorf("cross-site: %d %s", code, body)
	}
	if code, _ := options(t, m, "", map[string]string{"Sec-Fetch-Site": "same-origin"}); code != http.StatusForbidden {
		t.Errorf("no CSRF token: %d", code)
	}
	code, body := options(t, m, "tok", map[string]string{"Sec-Fetch-Site": "same-origin"})
	o, err := passkeytest.ParseOptions(body)
	if code != http.StatusOK || err != nil || o.PublicKey.Challenge == "" || o.PublicKey.RPID != "id.example.com" {
		t.Fatalf("options: %d %s", code, body)
	}
	if !strings.Contains(string(body), `"userVerification":"required"`) {
		t.Errorf("options do not require user verification: %s", body)
	}
}

func TestVerify(t *testing.T) {
	m, _, a, c := setup(t)
	_, body := options(t, m, "tok", map[string]string{"Sec-Fetch-Site": "same-origin"})
	answer, err := a.Get(c, body)
	if err != nil {
		t.Fatal(err)
	}
	in := signin.Input{Fields: url.Values{"credential": {string(answer)}, "csrf_token": {"tok"}, "method": {"passkey"}}}
	res, err := m.Verify(t.Context(), in)
	if err != nil || res.User.Username != "alice" || !slices.Equal(res.AMR, []string{"hwk", "user"}) {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
	// The same post again (a double submit, a replay): refused, no user.
	res, err = m.Verify(t.Context(), in)
	var f *signin.Failure
	if !errors.As(err, &f) || f.Status != http.StatusBadRequest || res.User.Subject != "" || !strings.Contains(f.Message, "already used") {
		t.Fatalf("replayed Verify = %+v, %v", res, err)
	}
	// Another page's CSRF token: the challenge is not this browser's.
	_, body = options(t, m, "tok", map[string]string{"Sec-Fetch-Site": "same-origin"})
	answer, _ = a.Get(c, body)
	_, err = m.Verify(t.Context(), signin.Input{Fields: url.Values{"credential": {string(answer)}, "csrf_token": {"other"}}})
	if !errors.As(err, &f) || f.Status != http.StatusBadRequest {
		t.Fatalf("other CSRF token: %v", err)
	}
	// User verification off: 401 in words.
	a.Flags = passkeytest.FlagUP
	_, body = options(t, m, "tok", map[string]string{"Sec-Fetch-Site": "same-origin"})
	answer, _ = a.Get(c, body)
	_, err = m.Verify(t.Context(), signin.Input{Fields: url.Values{"credential": {string(answer)}, "csrf_token": {"tok"}}})
	if !errors.As(err, &f) || f.Status != http.StatusUnauthorized || !strings.Contains(f.Message, "confirm") {
		t.Fatalf("no UV: %v", err)
	}
	if _, err := m.Verify(t.Context(), signin.Input{Fields: url.Values{}}); !errors.As(err, &f) {
		t.Fatalf("empty: %v", err)
	}
}
