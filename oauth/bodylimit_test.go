package oauth_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/authd/authd/web/templates"
)

// formPages stands for the self-service pages: one form route that
// answers 400 when its form cannot be read, as accountweb's do.
type formPages struct{}

func (formPages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "The form could not be read.", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusOK)
}
func (formPages) Route(path string) string {
	if path == "/signup" {
		return path
	}
	return ""
}
func (formPages) LoginLinks(string) templates.AccountLinks { return templates.AccountLinks{} }
func (formPages) AccountLinks() templates.AccountLinks     { return templates.AccountLinks{} }

// chunked hides its length, so the client sends it chunked (no
// Content-Length): the body limit must find out by reading.
type chunked struct{ io.Reader }

// TestBodyOverLimitIs413 sends every route that reads a body more than
// 64 KiB, declared and chunked: each answers 413 (RFC 9110 §15.5.14),
// never a parse error's 400; the OAuth API in RFC 6749 §5.2 JSON, pages
// with a page in words.
func TestBodyOverLimitIs413(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	h.app.MountAccounts(formPages{})
	big := "a=" + strings.Repeat("b", 70<<10)
	for _, tc := range []struct {
		path string
		json bool
	}{
		{"/oauth2/token", true}, {"/oauth2/revoke", true}, {"/oauth2/introspect", true}, {"/oauth2/par", true},
		{"/oauth2/userinfo", true}, {"/oauth2/authorize", false}, {"/logout", false}, {"/oauth2/logout", false},
		{"/account", false}, {"/signup", false},
	} {
		for _, isChunked := range []bool{false, true} {
			var body io.Reader = strings.NewReader(big)
			if isChunked {
				body = chunked{body}
			}
			req, _ := http.NewRequest(http.MethodPost, h.srv.URL+tc.path, body)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			name := tc.path + map[bool]string{false: " declared", true: " chunked"}[isChunked]
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("%s: %d, want 413: %.200s", name, resp.StatusCode, raw)
				continue
			}
			if tc.json {
				var e struct {
					Error string `json:"error"`
				}
				if json.Unmarshal(raw, &e) != nil || e.Error != "invalid_request" || resp.Header.Get("Cache-Control") != "no-store" {
					t.Errorf("%s: not an RFC 6749 §5.2 error: %s %v", name, raw, resp.Header)
				}
			} else if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(raw), "too large") {
				t.Errorf("%s: not a page in words: %s %.300s", name, resp.Header.Get("Content-Type"), raw)
			}
		}
	}
}
