package oauth_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/ory/fosite"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
)

// FuzzTokenRequest sends arbitrary bodies, content types and Authorization
// headers to the token endpoint: the answer is never a 5xx, always JSON
// with an error code or a token, and never panics.
func FuzzTokenRequest(f *testing.F) {
	seeds := []struct{ ct, auth, body string }{
		{"application/x-www-form-urlencoded", "", "grant_type=authorization_code&code=abc&client_id=mobile-app&code_verifier=" + strings.Repeat("a", 43)},
		{"application/x-www-form-urlencoded", "", "grant_type=refresh_token&refresh_token=ory_rt_x.y&client_id=mobile-app"},
		{"application/x-www-form-urlencoded", "Basic d2ViLWFwcDpzZWNyZXQ=", "grant_type=client_credentials&scope=openid"},
		{"application/x-www-form-urlencoded", "Basic !!!", "grant_type=authorization_code"},
		{"application/json", "", `{"grant_type":"authorization_code"}`},
		{"application/x-www-form-urlencoded", "", "grant_type=authorization_code&grant_type=refresh_token"},
		{"application/x-www-form-urlencoded", "", "%zz=%zz&a"},
		{"application/x-www-form-urlencoded; charset=utf-8", "Bearer x", "grant_type=password&username=a&password=b"},
		{"multipart/form-data; boundary=x", "", "--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb\r\n--x--"},
		{"application/x-www-form-urlencoded", "", "grant_type=authorization_code&code=\xff\xfe&client_id=\x00"},
	}
	for _, s := range seeds {
		f.Add(s.ct, s.auth, s.body)
	}
	store := memory.New()
	app, err := newServer(oauth.Config{Issuer: "http://127.0.0.1:1", Secret: []byte(testSecret)},
		oauth.Deps{Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	_ = store.CreateClient(f.Context(), &storage.Client{ID: publicClient, RedirectURIs: []string{publicRedirect},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		Scopes: []string{"openid", "offline_access"}, TokenEndpointAuthMethod: "none"})
	f.Fuzz(func(t *testing.T, contentType, auth, body string) {
		req := httptest.NewRequest(http.MethodPost, "/oauth2/token", strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		app.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q %q %q: %s", rec.Code, contentType, auth, body, rec.Body)
		}
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("non-JSON answer %d: %q", rec.Code, rec.Body)
		}
		if rec.Code != 200 && out["error"] == nil {
			t.Fatalf("error answer without error code: %d %s", rec.Code, rec.Body)
		}
	})
}

// FuzzRedirectURI checks registration validation against fosite's matching
// at authorization time: anything ValidateRedirectURI accepts is absolute,
// fragment-free, and matches only itself (or, for loopback, itself on
// another port, RFC 8252 §7.3).
func FuzzRedirectURI(f *testing.F) {
	for _, s := range []string{
		"com.example.app:/oauth2redirect", "https://app.example.com/cb", "http://127.0.0.1/cb",
		"http://[::1]:8080/cb", "http://localhost/cb", "https://app.example.com/cb#frag", "javascript:alert(1)",
		"https://*.example.com/cb", "myapp:/cb", "https://user@app.example.com/cb", "HTTPS://APP.EXAMPLE.COM/CB",
		"https://app.example.com/a/../b", "com.example.app://host/cb", "https://app.example.com/cb?x=1",
	} {
		f.Add(s, s+"x")
	}
	f.Fuzz(func(t *testing.T, registered, requested string) {
		if oauth.ValidateRedirectURI(registered) != nil {
			return
		}
		u, err := url.Parse(registered)
		if err != nil || !u.IsAbs() || u.Fragment != "" || strings.Contains(registered, "#") {
			t.Fatalf("accepted %q: parse=%v abs=%v", registered, err, err == nil && u.IsAbs())
		}
		c := &storage.Client{ID: "c", RedirectURIs: []string{registered}}
		if got, err := fosite.MatchRedirectURIWithClientRedirectURIs(registered, c); err != nil || got.String() == "" {
			t.Fatalf("a registered URI %q does not match itself: %v", registered, err)
		}
		got, err := fosite.MatchRedirectURIWithClientRedirectURIs(requested, c)
		if err != nil || requested == registered || requested == "" {
			return
		}
		// A different requested URI matched: only the loopback port may
		// differ.
		r, perr := url.Parse(requested)
		if perr != nil || r.Scheme != "http" || (r.Hostname() != "127.0.0.1" && r.Hostname() != "::1") ||
			r.Hostname() != u.Hostname() || r.Path != u.Path || r.RawQuery != u.RawQuery {
			t.Fatalf("registered %q, requested %q matched as %q", registered, requested, got)
		}
	})
}
