package oauth_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/passkey"
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
