package oauth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/passkey"
	"github.com/authd/authd/storage"
)

// TestBrowserPasskeys is issue 24's walk in headless Chromium with a CDP
// virtual authenticator (CTAP2, internal transport, resident keys, user
// verification), through the real pages: sign in with a password, add a
// passkey on the account page, sign out, start an authorization request,
// press "Sign in with a passkey": the app gets a code whose ID token has
// amr hwk. Then the same user removes their password and signs in with the
// passkey through autofill (conditional mediation, which the virtual
// authenticator answers at once), and a user created without a password
// enrols through a passkey-link and signs in.
//
// The issuer is http://localhost:PORT: browsers refuse WebAuthn on an IP
// address. Skipped under -short (never when CI=true).
func TestBrowserPasskeys(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("slow browser test (-short)")
	}
	chrome := chromiumPath(t)
	h := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) {
		c.Issuer = strings.Replace(c.Issuer, "127.0.0.1", "localhost", 1)
	}})
	base := strings.Replace(h.srv.URL, "127.0.0.1", "localhost", 1)
	cb := newCallbackServer(t)
	ctx, nl := newChromiumFor(t, chrome, 120*time.Second) // two shared cores: generous

	if _, err := chromedp.Call(ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatalf("WebAuthn.enable: %v", err)
	}
	addAuthenticator := func() webauthn.AuthenticatorID {
		t.Helper()
		res, err := chromedp.Call(ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{Options: &webauthn.VirtualAuthenticatorOptions{
			Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21, Transport: webauthn.AuthenticatorTransportInternal,
			HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true,
		}})
		if err != nil {
			t.Fatalf("WebAuthn.addVirtualAuthenticator: %v", err)
		}
		return res.AuthenticatorID
	}
	authenticator := addAuthenticator()
	// Hold autofill: the virtual authenticator would answer a conditional
	// request at once, so the page would sign in before the button is
	// pressed. Removed for the autofill step below.
	hold, err := chromedp.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{
		Source: `if (window.PublicKeyCredential) PublicKeyCredential.isConditionalMediationAvailable = () => Promise.resolve(false);`})
	if err != nil {
		t.Fatal(err)
	}

	// authorize starts an authorization request and returns its verifier.
	authorize := func(waitFor chromedp.Action[chromedp.Void]) string {
		t.Helper()
		conf := h.oauthConfig(publicClient)
		conf.Endpoint.AuthURL = base + "/oauth2/authorize"
		conf.RedirectURL = cb.URL + "/callback"
		conf.Scopes = []string{"openid"}
		verifier := oauth2.GenerateVerifier()
		if err := chromedp.Do(ctx, chromedp.Navigate(conf.AuthCodeURL("state-passkey", oauth2.S256ChallengeOption(verifier))), waitFor); err != nil {
			t.Fatalf("open the login page: %v\n%s", err, nl.dump())
		}
		return verifier
	}
	// token waits for the code at the app and exchanges it: the ID
	// token's claims.
	token := func(step, verifier string) map[string]any {
		t.Helper()
		select {
		case q := <-cb.got:
			res := h.exchange(t, publicClient, q.Get("code"), verifier, cb.URL+"/callback")
			if res.status != 200 {
				t.Fatalf("%s: exchange: %d %v", step, res.status, res.body)
			}
			if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("done"))); err != nil {
				t.Fatalf("%s: the app's page: %v", step, err)
			}
			return jwtClaims(t, res.str("id_token"))
		case <-ctx.Done():
			text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
			t.Fatalf("%s: no code at the redirect_uri: %v\npage: %s\n%s", step, ctx.Err(), text, nl.dump())
		}
		return nil
	}
	wantPasskeyAMR := func(step string, claims map[string]any, sub string) {
		t.Helper()
		amr, _ := claims["amr"].([]any)
		if !slices.Contains(amr, any("hwk")) || !slices.Contains(amr, any("user")) || (sub != "" && claims["sub"] != sub) {
			t.Fatalf("%s: ID token claims %v, want amr with hwk and user (sub %s)", step, claims, sub)
		}
	}
	signOut := func() {
		t.Helper()
		// The confirmation has a form; the answer ("Signed out") a p.next.
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/logout"), chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS("main p.next"))); err != nil {
			t.Fatalf("sign out: %v", err)
		}
	}
	pressPasskey := func(step string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("passkey-signin")), chromedp.Click(chromedp.ID("passkey-signin"))); err != nil {
			t.Fatalf("%s: press Sign in with a passkey: %v", step, err)
		}
	}

	// 1. Sign in with the password.
	verifier := authorize(chromedp.WaitVisible(chromedp.ID("password")))
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("username"), testUser),
		chromedp.SendKeys(chromedp.ID("password"), testPassword),
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if amr, _ := token("password", verifier)["amr"].([]any); !slices.Contains(amr, any("pwd")) {
		t.Fatalf("password sign-in: amr %v", amr)
	}

	// 2. Add a passkey on the account page.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/account"), chromedp.Click(chromedp.ID("add-passkey")),
		chromedp.WaitVisible(chromedp.CSS(".passkeys li"))); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("add a passkey: %v\npage: %s\n%s", err, text, nl.dump())
	}
	if text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(text, "Passkey added") {
		t.Errorf("account page after adding: %s", text)
	}

	// 3. Sign out, then sign in with the passkey.
	signOut()
	verifier = authorize(chromedp.WaitVisible(chromedp.ID("passkey-signin")))
	pressPasskey("passkey")
	alice := token("passkey", verifier)
	wantPasskeyAMR("passkey", alice, "")

	// 4. Passkey-only: remove the password (every session ends), then sign
	// in through autofill alone.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/account"), chromedp.Click(chromedp.ID("remove-password")),
		chromedp.WaitVisible(chromedp.CSS(".notice"))); err != nil {
		t.Fatalf("remove password: %v", err)
	}
	if _, err := h.people().Authenticate(t.Context(), testUser, testPassword); err == nil {
		t.Fatal("the removed password still signs in")
	}
	if _, err := chromedp.Call(ctx, cdppage.RemoveScriptToEvaluateOnNewDocument, cdppage.RemoveScriptToEvaluateOnNewDocumentParams{Identifier: hold.Identifier}); err != nil {
		t.Fatal(err)
	}
	verifier = authorize(chromedp.WaitReady(chromedp.CSS("body")))
	wantPasskeyAMR("autofill", token("autofill", verifier), alice["sub"].(string))
	hold, err = chromedp.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{
		Source: `if (window.PublicKeyCredential) PublicKeyCredential.isConditionalMediationAvailable = () => Promise.resolve(false);`})
	if err != nil {
		t.Fatal(err)
	}
	signOut()

	// 5. A user created without a password enrols with a passkey-link, on
	// another device (a new authenticator), and signs in.
	bob := &storage.User{Username: "bob"}
	if err := h.store.CreateUser(t.Context(), bob); err != nil {
		t.Fatal(err)
	}
	rp, err := passkey.Configure(passkey.Settings{Issuer: base})
	if err != nil {
		t.Fatal(err)
	}
	links, err := passkey.New(rp, struct {
		storage.PasskeyStore
		storage.Store
	}{h.store.(storage.PasskeyStore), h.store}, passkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	link, _, err := links.NewLink(t.Context(), bob.Subject)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, webauthn.RemoveVirtualAuthenticator, webauthn.RemoveVirtualAuthenticatorParams{AuthenticatorID: authenticator}); err != nil {
		t.Fatal(err)
	}
	addAuthenticator()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/account/passkey-link#"+link), chromedp.Click(chromedp.ID("add-passkey")),
		chromedp.WaitVisible(chromedp.CSS("[data-passkey-done]"))); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("enrol with the link: %v\npage: %s", err, text)
	}
	// The link works once (a new page: the same URL would only move to
	// its fragment).
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/account/passkey-link?again#"+link), chromedp.Click(chromedp.ID("add-passkey")),
		chromedp.WaitVisible(chromedp.CSS("[data-passkey-error]"))); err != nil {
		t.Fatalf("the link's second use: %v", err)
	}
	verifier = authorize(chromedp.WaitVisible(chromedp.ID("passkey-signin")))
	pressPasskey("link user")
	wantPasskeyAMR("link user", token("link user", verifier), bob.Subject)
}

// jwtClaims decodes a JWT's payload (the signature is the token
// endpoint's business; other tests check it).
func jwtClaims(t *testing.T, jwt string) map[string]any {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", jwt)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	if err == nil {
		err = json.Unmarshal(b, &claims)
	}
	if err != nil {
		t.Fatalf("JWT payload: %v", err)
	}
	return claims
}

// newChromiumFor is newChromium with a longer deadline.
func newChromiumFor(t *testing.T, execPath string, d time.Duration) (context.Context, *netLog) {
	t.Helper()
	out := &lockedBuffer{}
	ctx, cancelTimeout := context.WithTimeout(context.Background(), d)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(execPath), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-extensions", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-proxy-server", true), chromedp.UserDataDir(t.TempDir()), chromedp.CombinedOutput(out))
	nl := newNetLog()
	tabCtx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithListener(nl.on))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelTimeout()
		if t.Failed() {
			t.Logf("chromium output:\n%s", out.String())
		}
	})
	if err := chromedp.Do(tabCtx); err != nil {
		t.Fatalf("start %s: %v\n%s", execPath, err, out.String())
	}
	return tabCtx, nl
}
