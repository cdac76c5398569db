package oauth_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/passkey"
	"github.com/authd/authd/passkey/passkeytest"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
)

// TestAssociationFiles: /.well-known/apple-app-site-association and
// /.well-known/assetlinks.json are served as the platforms fetch them
// (application/json, no redirect, cacheable) from AUTHD_APPLE_APP_IDS and
// AUTHD_ANDROID_APPS, and are 404 when unconfigured or with passkeys off.
func TestAssociationFiles(t *testing.T) {
	get := func(t *testing.T, srv http.Handler, path string) (*http.Response, []byte) {
		t.Helper()
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://localhost"+path, nil))
		b, _ := io.ReadAll(w.Result().Body)
		return w.Result(), b
	}
	newApp := func(t *testing.T, s passkey.Settings) *oauth.Server {
		t.Helper()
		store := memory.New()
		app, err := newServer(oauth.Config{Issuer: "http://127.0.0.1:1", Secret: []byte(testSecret)}, oauth.Deps{Store: store,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Passwords: testPasswords})
		if err != nil {
			t.Fatal(err)
		}
		if s.Issuer != "" {
			rp, err := passkey.Configure(s)
			if err != nil {
				t.Fatal(err)
			}
			svc, err := passkey.New(rp, struct {
				storage.PasskeyStore
				storage.Store
			}{store, store}, passkey.Options{})
			if err != nil {
				t.Fatal(err)
			}
			app.MountPasskeys(svc)
		}
		return app
	}
	fp := strings.TrimSuffix(strings.Repeat("AB:", 32), ":")
	on := newApp(t, passkey.Settings{Issuer: "https://id.example.com", RPID: "example.com", AppleAppIDs: "ABCDE12345.com.example.app",
		AndroidApps: `[{"package_name":"com.example.app","sha256_cert_fingerprints":["` + fp + `"]}]`})
	resp, body := get(t, on, "/.well-known/apple-app-site-association")
	var aasa struct {
		WebCredentials struct {
			Apps []string `json:"apps"`
		} `json:"webcredentials"`
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &aasa) != nil ||
		len(aasa.WebCredentials.Apps) != 1 || aasa.WebCredentials.Apps[0] != "ABCDE12345.com.example.app" ||
		!strings.Contains(resp.Header.Get("Cache-Control"), "max-age") {
		t.Fatalf("AASA: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, body = get(t, on, "/.well-known/assetlinks.json")
	var links []struct {
		Relation []string `json:"relation"`
		Target   struct {
			Namespace    string   `json:"namespace"`
			PackageName  string   `json:"package_name"`
			Fingerprints []string `json:"sha256_cert_fingerprints"`
		} `json:"target"`
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &links) != nil ||
		len(links) != 1 || links[0].Relation[0] != "delegate_permission/common.get_login_creds" ||
		links[0].Target.Namespace != "android_app" || links[0].Target.Fingerprints[0] != fp {
		t.Fatalf("assetlinks: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	for name, app := range map[string]*oauth.Server{
		"no apps":      newApp(t, passkey.Settings{Issuer: "https://id.example.com"}),
		"passkeys off": newApp(t, passkey.Settings{}),
	} {
		for _, p := range []string{"/.well-known/apple-app-site-association", "/.well-known/assetlinks.json"} {
			if resp, _ := get(t, app, p); resp.StatusCode != 404 {
				t.Errorf("%s: %s = %d, want 404", name, p, resp.StatusCode)
			}
		}
	}
}

// TestPasskeyEndpointsRefuse: the account page's script endpoints answer
// only same-origin requests with the page's CSRF token, in JSON with a
// message in words.
func TestPasskeyEndpointsRefuse(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) {
		c.Issuer = strings.Replace(c.Issuer, "127.0.0.1", "localhost", 1)
	}})
	for _, tc := range []struct {
		name, path string
		header     map[string]string
		status     int
		code       string
	}{
		{"cross-site", "/account/passkeys/options", map[string]string{"Sec-Fetch-Site": "cross-site", "X-CSRF-Token": "x"}, 403, "cross_origin"},
		{"no CSRF token", "/account/passkeys/options", map[string]string{"Sec-Fetch-Site": "same-origin"}, 403, "invalid_csrf"},
		{"link, no CSRF token", "/account/passkey-link/options", map[string]string{"Sec-Fetch-Site": "same-origin", "X-Passkey-Link": "x"}, 403, "invalid_csrf"},
		{"sign-in options, no CSRF token", "/signin/passkey/options", map[string]string{"Sec-Fetch-Site": "same-origin"}, 403, "invalid_csrf"},
	} {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+tc.path, strings.NewReader("{}"))
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || body["error"] != tc.code || body["message"] == "" ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: %d %v, want %d %s with a message", tc.name, resp.StatusCode, body, tc.status, tc.code)
		}
	}
	// A cross-site request for sign-in options is refused by the flow's
	// own check of the methods' routes (its error page) before the method
	// sees it.
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/signin/passkey/options", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("X-CSRF-Token", "x")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("cross-site sign-in options: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestPasskeySignInPage posts assertions to the login form as the page's
// script does: a refused one (user verification off) is the login page
// with its message and no session; an accepted one is a code; the same
// accepted one posted again (a double submit, a replay) is refused and
// starts no second session.
func TestPasskeySignInPage(t *testing.T) {
	var issuer string
	h := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) {
		c.Issuer = strings.Replace(c.Issuer, "127.0.0.1", "localhost", 1)
		issuer = c.Issuer
	}})
	alice, err := h.store.GetUser(t.Context(), testUser)
	if err != nil {
		t.Fatal(err)
	}
	rp, _ := passkey.Configure(passkey.Settings{Issuer: issuer})
	svc, err := passkey.New(rp, struct {
		storage.PasskeyStore
		storage.Store
	}{h.store.(storage.PasskeyStore), h.store}, passkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := &passkeytest.Authenticator{Origin: issuer}
	opts, _ := svc.BeginEnrol(t.Context(), alice.Subject, "s")
	cred, answer, _ := a.Create(opts)
	if _, err := svc.FinishEnrol(t.Context(), alice.Subject, "s", "", answer); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t)
	login := get(t, b, h.authURL(publicClient, publicRedirect))
	if !strings.Contains(login.body, "Sign in with a passkey") || !strings.Contains(login.body, `name="password"`) {
		t.Fatalf("login page without both methods: %s", login.body)
	}
	csrf := csrfRe.FindStringSubmatch(login.body)[1]
	assertion := func(flags byte) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/signin/passkey/options", nil)
		req.Header.Set("X-CSRF-Token", csrf)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		opts, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("options: %d %s", resp.StatusCode, opts)
		}
		a.Flags = flags
		answer, err := a.Get(cred, opts)
		if err != nil {
			t.Fatal(err)
		}
		return string(answer)
	}
	sessions := func() int {
		t.Helper()
		ss, err := h.people().Sessions(t.Context(), testUser)
		if err != nil {
			t.Fatal(err)
		}
		return len(ss)
	}
	post := func(answer string) page {
		return submit(t, b, h.srv.URL, login, url.Values{"step": {"login"}, "method": {"passkey"}, "credential": {answer}})
	}

	refused := post(assertion(passkeytest.FlagUP))
	if refused.status != http.StatusUnauthorized || !strings.Contains(refused.body, "did not confirm it is you") || sessions() != 0 {
		t.Fatalf("without user verification: %d, %d sessions: %s", refused.status, sessions(), refused.body)
	}
	good := assertion(passkeytest.FlagUP | passkeytest.FlagUV)
	if p := post(good); p.status != http.StatusSeeOther || p.loc == nil || p.loc.Query().Get("code") == "" || sessions() != 1 {
		t.Fatalf("passkey sign-in: %d %v, %d sessions", p.status, p.loc, sessions())
	}
	if p := post(good); p.status != http.StatusBadRequest || !strings.Contains(p.body, "already used") || sessions() != 1 {
		t.Fatalf("the same assertion again: %d, %d sessions: %s", p.status, sessions(), p.body)
	}
}

// TestAccountPasskeys manages passkeys on the account page over HTTP, as
// its script and forms do: add one ("Add a passkey"), rename it, remove
// the password (every session ends), sign in with the passkey, and be
// refused removing the last way in.
func TestAccountPasskeys(t *testing.T) {
	var issuer string
	h := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) {
		c.Issuer = strings.Replace(c.Issuer, "127.0.0.1", "localhost", 1)
		issuer = c.Issuer
	}})
	a := &passkeytest.Authenticator{Origin: issuer}
	b := newBrowser(t)
	h.signInAs(t, b, get(t, b, h.authURL(publicClient, publicRedirect)), testUser, testPassword)
	postJSON := func(path, csrf string, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(body))
		req.Header.Set("X-CSRF-Token", csrf)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	csrfOf := func(p page) string {
		t.Helper()
		m := csrfRe.FindStringSubmatch(p.body)
		if m == nil {
			m = regexp.MustCompile(`data-csrf="([^"]+)"`).FindStringSubmatch(p.body)
		}
		if m == nil {
			t.Fatalf("no CSRF token on %d: %s", p.status, p.body)
		}
		return m[1]
	}

	account := get(t, b, h.srv.URL+"/account")
	if !strings.Contains(account.body, "Add a passkey") || strings.Contains(account.body, "Remove password") {
		t.Fatalf("account page before: %s", account.body)
	}
	csrf := csrfOf(account)
	status, opts := postJSON("/account/passkeys/options", csrf, "{}")
	if status != 200 {
		t.Fatalf("enrol options: %d %s", status, opts)
	}
	cred, answer, err := a.Create(opts)
	if err != nil {
		t.Fatal(err)
	}
	if status, body := postJSON("/account/passkeys", csrf, `{"credential":`+string(answer)+`,"name":"Phone"}`); status != 201 {
		t.Fatalf("enrol: %d %s", status, body)
	}
	// The same answer again: the ceremony is used up, nothing is added.
	if status, body := postJSON("/account/passkeys", csrf, `{"credential":`+string(answer)+`,"name":"Phone"}`); status != 400 || !strings.Contains(string(body), "already used") {
		t.Fatalf("enrol again: %d %s", status, body)
	}
	account = get(t, b, h.srv.URL+"/account?passkey=added")
	id := regexp.MustCompile(`name="id" value="([^"]+)"`).FindStringSubmatch(account.body)
	if id == nil || !strings.Contains(account.body, "Passkey added") || strings.Count(account.body, `name="id"`) != 1 || !strings.Contains(account.body, "Remove password") {
		t.Fatalf("account page after adding: %s", account.body)
	}
	manage := func(fields url.Values) page {
		t.Helper()
		fields.Set("csrf_token", csrfOf(account))
		resp, err := b.PostForm(h.srv.URL+"/account/passkeys/manage", fields)
		if err != nil {
			t.Fatal(err)
		}
		return readPage(t, resp)
	}
	if p := manage(url.Values{"action": {"rename"}, "id": {id[1]}, "name": {"Work phone"}}); p.status != http.StatusSeeOther {
		t.Fatalf("rename: %d %s", p.status, p.body)
	}
	if p := get(t, b, h.srv.URL+"/account?passkey=renamed"); !strings.Contains(p.body, "Work phone") || !strings.Contains(p.body, "Passkey renamed.") {
		t.Fatalf("after rename: %s", p.body)
	}
	if p := manage(url.Values{"action": {"remove-password"}}); p.status != 200 || !strings.Contains(p.body, "every browser is signed out") {
		t.Fatalf("remove password: %d %s", p.status, p.body)
	}
	if p := get(t, b, h.srv.URL+"/account"); !strings.Contains(p.body, "Not signed in") {
		t.Fatalf("after removing the password the session stays: %s", p.body)
	}

	// Back in with the passkey; its removal is refused (the last way in).
	login := get(t, b, h.authURL(publicClient, publicRedirect))
	status, opts = postJSON("/signin/passkey/options", csrfOf(login), "")
	if status != 200 {
		t.Fatalf("sign-in options: %d %s", status, opts)
	}
	assertion, _ := a.Get(cred, opts)
	if p := submit(t, b, h.srv.URL, login, url.Values{"step": {"login"}, "method": {"passkey"}, "credential": {string(assertion)}}); p.status != http.StatusSeeOther {
		t.Fatalf("passkey sign-in: %d %s", p.status, p.body)
	}
	account = get(t, b, h.srv.URL+"/account")
	if strings.Contains(account.body, "Remove password") {
		t.Fatalf("a passkey-only account offers to remove its password: %s", account.body)
	}
	if p := manage(url.Values{"action": {"remove"}, "id": {id[1]}}); p.status != http.StatusConflict || !strings.Contains(p.body, "last way to sign in") {
		t.Fatalf("remove the last passkey: %d %s", p.status, p.body)
	}
	for _, unknown := range []string{"AAAA", "not base64!", ""} {
		if p := manage(url.Values{"action": {"remove"}, "id": {unknown}}); p.status != http.StatusNotFound {
			t.Errorf("remove passkey %q, not this user's: %d, want 404", unknown, p.status)
		}
	}
}

// TestMethodRoutesBudgetedPerSource: the methods' own routes (here the
// passkey options, each of which writes a ceremony row) spend a budget of
// the source address; beyond it, 429 with Retry-After, in JSON for the
// script, before the method runs.
func TestMethodRoutesBudgetedPerSource(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) {
		c.Issuer = strings.Replace(c.Issuer, "127.0.0.1", "localhost", 1) // passkeys need a name
		c.MethodRouteLimits = oauth.TokenLimits{PerSecond: 0.001, Burst: 3}
	}})
	statuses := make([]int, 0, 5)
	var last *http.Response
	for range 5 {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/signin/passkey/options", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("X-CSRF-Token", "token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		last = resp
	}
	if fmt.Sprint(statuses) != "[200 200 200 429 429]" {
		t.Fatalf("statuses %v, want three options then 429", statuses)
	}
	if last.Header.Get("Retry-After") == "" || !strings.HasPrefix(last.Header.Get("Content-Type"), "application/json") {
		t.Errorf("429 headers: %v", last.Header)
	}
}
