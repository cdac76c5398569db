package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// TestEndSessionHintNamesCurrentSession: an id_token_hint signs out
// without asking only when its sid is the browser's current session; a
// hint from an ended session of the same user asks. A relying party's
// POST is answered directly (never redirected to a URL with the hint).
func TestEndSessionHintNamesCurrentSession(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	registerPostLogout(t, h, publicClient, "https://app.example.com/bye")
	b := newBrowser(t)
	idToken := func() string {
		v := oauth2.GenerateVerifier()
		loc := h.login(t, b, h.oauthConfig(publicClient).AuthCodeURL("state-hint-1", oauth2.S256ChallengeOption(v)))
		res := h.exchange(t, publicClient, loc.Query().Get("code"), v, publicRedirect)
		if res.str("id_token") == "" {
			t.Fatalf("no ID token: %d %v", res.status, res.body)
		}
		return res.str("id_token")
	}
	signedIn := func() bool {
		p := get(t, b, h.oauthConfig(publicClient).AuthCodeURL("state-check", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
		return !strings.Contains(p.body, `name="password"`)
	}
	logoutURL := func(hint string) string {
		return h.srv.URL + "/oauth2/logout?" + url.Values{"id_token_hint": {hint},
			"post_logout_redirect_uri": {"https://app.example.com/bye"}, "state": {"s"}}.Encode()
	}
	rpPost := func(hint string) *http.Response {
		form := url.Values{"id_token_hint": {hint}, "post_logout_redirect_uri": {"https://app.example.com/bye"}, "state": {"s"}}
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/logout", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Origin", "https://app.example.com")
		resp, err := b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	old := idToken()
	// The hint of the current session: signed out at once.
	if p := get(t, b, logoutURL(old)); p.loc == nil || p.loc.Host != "app.example.com" {
		t.Fatalf("hint of the current session: %d %v; want the redirect", p.status, p.loc)
	}
	if signedIn() {
		t.Fatal("still signed in")
	}
	// A new session; the old session's hint (same user) asks.
	current := idToken()
	p := get(t, b, logoutURL(old))
	if p.loc != nil || !strings.Contains(p.body, `name="csrf_token"`) || !signedIn() {
		t.Fatalf("hint of an ended session: %d %v; want the confirmation page and the session kept", p.status, p.loc)
	}
	if strings.Contains(p.body, old) {
		t.Fatal("the confirmation page carries the hint")
	}
	// A relying party's POST with the old hint: the page, no redirect.
	if resp := rpPost(old); resp.StatusCode != http.StatusOK || resp.Header.Get("Location") != "" || !signedIn() {
		t.Fatalf("RP POST with an old hint: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// With the current session's hint: signed out, redirected to the
	// post_logout_redirect_uri with state only.
	resp := rpPost(current)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "https://app.example.com/bye") || strings.Contains(loc, "id_token_hint") || strings.Contains(loc, current) {
		t.Fatalf("RP POST with the current hint: %d %q", resp.StatusCode, loc)
	}
	if signedIn() {
		t.Fatal("still signed in after the RP POST")
	}
}
