package oauth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/storage"
)

// TestBrowserPhoneWalk walks the pages a person sees, in headless Chromium
// at a phone viewport (390×844 CSS px): sign-in, wrong password, sign-in,
// one-tap continue (a public loopback client, RFC 8252 §8.6), consent,
// sign-out, nothing to sign out of, an error page. It checks what can be
// checked mechanically (focus after a wrong password, aria wiring, tap
// targets of at least 44 px, nothing wider than the screen) and saves a
// screenshot of every page in $AUTHD_TEST_SCREENSHOTS (default: a
// temporary directory) for a person to look at.
func TestBrowserPhoneWalk(t *testing.T) {
	t.Parallel()
	chrome := chromiumPath(t)
	h := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) {
		c.ScopeDescriptions = map[string]string{"profile": "See your name and profile picture"}
	}})
	cb := newCallbackServer(t)
	if err := h.store.CreateClient(t.Context(), &storage.Client{ID: "notes-app", Name: "Notes", RedirectURIs: []string{"http://127.0.0.1/callback"},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		Scopes: []string{"openid", "offline_access", "profile"}, TokenEndpointAuthMethod: "none",
		CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("AUTHD_TEST_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, nl := newChromium(t, chrome) // bounded by browserTimeout
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	authURL := func(client string, scopes ...string) string {
		conf := h.oauthConfig(client)
		conf.RedirectURL = cb.URL + "/callback"
		if len(scopes) > 0 {
			conf.Scopes = scopes
		}
		return conf.AuthCodeURL("state-phone-walk", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		p := filepath.Join(dir, name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s", p)
	}
	// checkLayout: every control is at least 44 px tall, and nothing is
	// wider than the viewport (no sideways scrolling on a phone).
	checkLayout := func(name string) {
		t.Helper()
		small, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('button, input:not([type=hidden]), a')).filter(e => e.getBoundingClientRect().height < 44).map(e => e.outerHTML.slice(0, 80))`))
		if err != nil {
			t.Fatalf("%s: layout: %v", name, err)
		}
		scrollW, err1 := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
		innerW, err2 := chromedp.Run(ctx, chromedp.Evaluate[int](`window.innerWidth`))
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: layout: %v %v", name, err1, err2)
		}
		if len(small) > 0 {
			t.Errorf("%s: tap targets under 44 px: %v", name, small)
		}
		if scrollW > innerW {
			t.Errorf("%s: page is %d px wide on a %d px screen", name, scrollW, innerW)
		}
	}
	text := func() string {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil {
			t.Fatalf("read page: %v", err)
		}
		return s
	}
	waitCode := func(step string) {
		t.Helper()
		select {
		case q := <-cb.got:
			if q.Get("code") == "" {
				t.Fatalf("%s: callback without a code: %v", step, q)
			}
			// Let the app's page finish loading before the next navigation.
			if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("done"))); err != nil {
				t.Fatalf("%s: the app's page: %v", step, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s: no code at the redirect_uri: %v\n%s", step, ctx.Err(), nl.dump())
		}
	}
	noCode := func(step string) {
		t.Helper()
		select {
		case q := <-cb.got:
			t.Fatalf("%s: a code arrived without a click: %v", step, q)
		case <-time.After(300 * time.Millisecond):
		}
	}

	// 1. Sign-in page.
	if err := chromedp.Do(ctx, chromedp.Navigate(authURL(publicClient)), chromedp.WaitVisible(chromedp.ID("password"))); err != nil {
		t.Fatal(err)
	}
	checkLayout("login")
	shot("01-login")

	// 2. Wrong password: the message is tied to the inputs and the focus is
	// on the password field.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("username"), "Alice"),
		chromedp.SendKeys(chromedp.ID("password"), "not the password"),
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("login-error")),
	); err != nil {
		t.Fatal(err)
	}
	focused, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id`))
	if err != nil {
		t.Fatal(err)
	}
	invalid, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('password').getAttribute('aria-invalid') || ''`))
	described, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('password').getAttribute('aria-describedby') || ''`))
	if focused != "password" || invalid != "true" || described != "login-error" {
		t.Errorf("after a wrong password: focus on %q, aria-invalid %q, aria-describedby %q; want password, true, login-error", focused, invalid, described)
	}
	checkLayout("wrong password")
	shot("02-wrong-password")

	// 3. The right password (the username is kept): a first-party app gets
	// its code.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("password"), testPassword),
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitCode("sign-in")

	// 4. Signed in, a public loopback client: the one-tap page, no code
	// until the tap.
	if err := chromedp.Do(ctx, chromedp.Navigate(authURL(publicClient)), chromedp.WaitVisible(chromedp.CSS(`form button`))); err != nil {
		t.Fatal(err)
	}
	noCode("one-tap")
	if s := text(); !strings.Contains(s, "Continue as alice") || !strings.Contains(s, "Use another account") {
		t.Errorf("one-tap page says %q", s)
	}
	checkLayout("one-tap")
	shot("03-one-tap")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`form:first-of-type button`))); err != nil {
		t.Fatal(err)
	}
	waitCode("continue")

	// 5. Consent for an app that is not first-party, scopes in words.
	if err := chromedp.Do(ctx, chromedp.Navigate(authURL("notes-app", "openid", "offline_access", "profile")), chromedp.WaitVisible(chromedp.CSS(`button[value="allow"]`))); err != nil {
		t.Fatal(err)
	}
	if s := text(); !strings.Contains(s, "Confirm who you are") || !strings.Contains(s, "Stay signed in") || !strings.Contains(s, "See your name and profile picture") {
		t.Errorf("consent page says %q", s)
	}
	checkLayout("consent")
	shot("04-consent")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`button[value="allow"]`))); err != nil {
		t.Fatal(err)
	}
	waitCode("consent")

	// 6. The user's own page: the apps with access, and withdrawing one.
	if err := chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/account"), chromedp.WaitVisible(chromedp.CSS(`form button`))); err != nil {
		t.Fatal(err)
	}
	if s := text(); !strings.Contains(s, "Notes") || !strings.Contains(s, "See your name and profile picture") {
		t.Errorf("account page: %q", s)
	}
	checkLayout("account")
	shot("09-account")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`form button`)), chromedp.WaitVisible(chromedp.CSS(`.notice`))); err != nil {
		t.Fatal(err)
	}
	checkLayout("account after withdrawal")
	shot("10-account-withdrawn")

	// 7. Sign out: confirm, done, then nothing to sign out of.
	if err := chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/logout"), chromedp.WaitVisible(chromedp.CSS(`form button`))); err != nil {
		t.Fatal(err)
	}
	checkLayout("sign out?")
	shot("05-sign-out")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`form button`)), chromedp.WaitVisible(chromedp.CSS(`.next`))); err != nil {
		t.Fatal(err)
	}
	if s := text(); !strings.Contains(s, "Signed out") {
		t.Errorf("after sign-out: %q", s)
	}
	shot("06-signed-out")
	if err := chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/logout"), chromedp.WaitVisible(chromedp.CSS(`h1`))); err != nil {
		t.Fatal(err)
	}
	if s := text(); !strings.Contains(s, "nothing to sign out of") {
		t.Errorf("/logout without a session: %q", s)
	}
	shot("07-not-signed-in")

	// 8. An error page names the problem and the next step.
	if err := chromedp.Do(ctx, chromedp.Navigate(strings.Replace(authURL(publicClient), "client_id="+publicClient, "client_id=unknown-app", 1)), chromedp.WaitVisible(chromedp.CSS(`h1`))); err != nil {
		t.Fatal(err)
	}
	if s := text(); !strings.Contains(s, "not registered") {
		t.Errorf("error page: %q", s)
	}
	checkLayout("error")
	shot("08-error")

	// 9. After sign-out the app needs the password again.
	if err := chromedp.Do(ctx, chromedp.Navigate(authURL(publicClient)), chromedp.WaitVisible(chromedp.ID("password"))); err != nil {
		t.Fatalf("after sign-out: %v", err)
	}
}
