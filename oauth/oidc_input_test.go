package oauth_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// TestOIDCBadInputNever500: the OpenID endpoints answer malformed input
// with a 4xx (or the documented page), never a 500 or a panic.
func TestOIDCBadInputNever500(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	garbage := []string{"", "x", "a.b.c", "eyJhbGciOiJub25lIn0.e30.", "eyJ" + strings.Repeat("A", 5000) + ".e30.sig",
		"\x00\xff", "ory_at_" + strings.Repeat("z", 300), "%%%", "eyJhbGciOiJSUzI1NiIsImtpZCI6IngifQ.eyJpc3MiOjF9.AAAA"}
	do := func(method, path, auth, body string) int {
		req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
		if err != nil {
			return 400
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := newBrowser(t).Do(req)
		if err != nil {
			if strings.Contains(err.Error(), "invalid header field") {
				return 400 // the client refused to send it
			}
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	v := oauth2.GenerateVerifier()
	base := url.Values{"response_type": {"code"}, "client_id": {publicClient}, "redirect_uri": {publicRedirect},
		"scope": {"openid"}, "state": {"state-garbage"}, "code_challenge": {oauth2.S256ChallengeFromVerifier(v)},
		"code_challenge_method": {"S256"}}
	for _, g := range garbage {
		for _, c := range []struct{ method, path, auth, body string }{
			{"GET", "/oauth2/userinfo", "Bearer " + g, ""},
			{"POST", "/oauth2/userinfo", "", "access_token=" + url.QueryEscape(g)},
			{"POST", "/oauth2/userinfo", "Bearer x", "access_token=" + url.QueryEscape(g)},
			{"GET", "/oauth2/logout?" + url.Values{"id_token_hint": {g}, "post_logout_redirect_uri": {g}, "client_id": {g}, "state": {g}}.Encode(), "", ""},
			{"POST", "/oauth2/logout", "", "post_logout_redirect_uri=" + url.QueryEscape(g)},
		} {
			if code := do(c.method, c.path, c.auth, c.body); code >= 500 {
				t.Errorf("%s %s (%q): %d", c.method, c.path, g, code)
			}
		}
		for _, k := range []string{"prompt", "max_age", "id_token_hint", "login_hint", "ui_locales", "nonce"} {
			q := url.Values{}
			for kk, vv := range base {
				q[kk] = vv
			}
			q.Set(k, g)
			if code := do("GET", "/oauth2/authorize?"+q.Encode(), "", ""); code >= 500 {
				t.Errorf("authorize %s=%q: %d", k, g, code)
			}
		}
	}
	for _, ma := range []string{"-1", "99999999999999999999", "1e3", "0"} {
		q := url.Values{}
		for kk, vv := range base {
			q[kk] = vv
		}
		q.Set("max_age", ma)
		if code := do("GET", "/oauth2/authorize?"+q.Encode(), "", ""); code >= 500 {
			t.Errorf("max_age=%s: %d", ma, code)
		}
	}
}
