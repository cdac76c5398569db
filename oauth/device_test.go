package oauth_test

import (
	"context"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/authd/authd/oauth"
)

// browserFrom is a browser whose connections come from the loopback
// address ip (127.0.0.2, …): another source address on one machine.
func browserFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Jar: jar, Timeout: 10 * time.Second,
		Transport:     &http.Transport{DialContext: func(ctx context.Context, n, a string) (net.Conn, error) { return d.DialContext(ctx, n, a) }},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// TestLoginBudgetsPerSourceAndDevice: failures are charged per (username,
// source) strictly and per username loosely. Guesses from many addresses
// trip the username's budget for every new browser, but a browser that
// has signed in as that user before (the device cookie) still signs in
// with the right password; one address guessing trips its own budget
// without holding back other addresses below the username's budget.
func TestLoginBudgetsPerSourceAndDevice(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) {
		c.LoginLimits = oauth.LoginLimits{FreeFailures: 3, UserFreeFailures: 6, Backoff: time.Minute, MaxBackoff: time.Minute,
			IPFailuresPerMinute: 600, IPBurst: 100}
	}})
	authURL := func() string {
		return h.oauthConfig(publicClient).AuthCodeURL("state-device", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()),
			oauth2.SetAuthURLParam("prompt", "login"))
	}
	try := func(b *http.Client, password string) int {
		p := get(t, b, authURL())
		return submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "username": {testUser}, "password": {password}}).status
	}

	phone := browserFrom(t, "127.0.0.2")
	if st := try(phone, testPassword); st != http.StatusSeeOther {
		t.Fatalf("first sign-in on the phone: %d", st)
	}
	// One address guessing: its strict budget trips at 3.
	attacker := browserFrom(t, "127.0.0.3")
	for i := range 3 {
		if st := try(attacker, "guess"); st != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i+1, st)
		}
	}
	if st := try(attacker, testPassword); st != http.StatusTooManyRequests {
		t.Fatalf("the guessing address after its budget: %d, want 429", st)
	}
	// Another new browser is not held back yet (3 of the username's 6).
	if st := try(browserFrom(t, "127.0.0.4"), testPassword); st != http.StatusSeeOther {
		t.Fatalf("another address below the username's budget: %d", st)
	}
	// More addresses guess, twice each: the username's loose budget trips.
	for _, ip := range []string{"127.0.0.5", "127.0.0.6", "127.0.0.7"} {
		b := browserFrom(t, ip)
		for range 2 {
			try(b, "guess")
		}
	}
	if st := try(browserFrom(t, "127.0.0.8"), testPassword); st != http.StatusTooManyRequests {
		t.Fatalf("a new browser during the attack: %d, want 429", st)
	}
	// The phone, which signed in as this user before, still gets in.
	if st := try(phone, testPassword); st != http.StatusSeeOther {
		t.Fatalf("the person's own browser during the attack: %d, want a sign-in", st)
	}
}

// TestPublicClientBudgetNotSpentByOneUser: one user replaying their own
// code with a wrong verifier many times (or a revoked refresh token) is
// charged to their own address, not to the public client's budget that
// every user of the app shares: another user's exchange still succeeds.
func TestPublicClientBudgetNotSpentByOneUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) {
		c.TokenLimits = oauth.TokenLimits{PerSecond: 0.01, Burst: 3}
		c.AuthFailureLimits = oauth.TokenLimits{PerSecond: 0.01, Burst: 10}
	}})
	post := func(b *http.Client, form url.Values) int {
		resp, err := b.PostForm(h.srv.URL+"/oauth2/token", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	mallory := browserFrom(t, "127.0.0.2")
	code, _ := h.code(t, publicClient)
	wrong := url.Values{"grant_type": {"authorization_code"}, "client_id": {publicClient}, "code": {code},
		"code_verifier": {oauth2.GenerateVerifier()}, "redirect_uri": {publicRedirect}}
	limited := false
	for range 30 {
		switch st := post(mallory, wrong); st {
		case http.StatusBadRequest:
		case http.StatusTooManyRequests:
			limited = true
		default:
			t.Fatalf("wrong verifier: %d", st)
		}
	}
	if !limited {
		t.Error("30 wrong verifiers from one address were never slowed down")
	}
	// Another user of the same app, from another address.
	code2, v2 := h.code(t, publicClient)
	alice := browserFrom(t, "127.0.0.3")
	if st := post(alice, url.Values{"grant_type": {"authorization_code"}, "client_id": {publicClient}, "code": {code2},
		"code_verifier": {v2}, "redirect_uri": {publicRedirect}}); st != http.StatusOK {
		t.Fatalf("another user's exchange after one user's failures: %d, want 200", st)
	}
}
