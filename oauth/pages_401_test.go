package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestPages401CarryAChallenge: every 401 of a page (a wrong password, no
// session on the account pages, the passkey script's "sign in again") has
// a WWW-Authenticate challenge (RFC 9110 §15.5.2), and the Bearer
// challenges of UserInfo are left as they are.
func TestPages401CarryAChallenge(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	b := newBrowser(t)
	check := func(what string, resp *http.Response, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: %d, want 401", what, resp.StatusCode)
		}
		if c := resp.Header.Get("WWW-Authenticate"); c == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", what)
		}
	}
	// A wrong password on the login form.
	p, _ := h.startAuth(t, b)
	m, a := csrfRe.FindStringSubmatch(p.body), actionRe.FindStringSubmatch(p.body)
	if m == nil || a == nil {
		t.Fatalf("no login form: %s", p.body)
	}
	action := strings.NewReplacer("&amp;", "&", "&#43;", "+").Replace(a[1])
	form := url.Values{"csrf_token": {m[1]}, "step": {"login"}, "username": {testUser}, "password": {"not-the-password"}}
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+action, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", h.srv.URL)
	resp, err := b.Do(req)
	check("wrong password", resp, err)

	// The authenticator-app QR code without a session.
	resp, err = b.Get(h.srv.URL + "/account/mfa/qr.png")
	check("QR code without a session", resp, err)

	// UserInfo keeps its own Bearer challenge.
	resp, err = http.Get(h.srv.URL + "/oauth2/userinfo")
	check("UserInfo without a token", resp, err)
	if c := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(c, "Bearer ") {
		t.Errorf("UserInfo challenge %q, want Bearer", c)
	}
}
