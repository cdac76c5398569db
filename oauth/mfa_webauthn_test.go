package oauth_test

import (
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/passkey"
	"github.com/authd/authd/passkey/passkeytest"
	"github.com/authd/authd/storage"
)

// The passkey as a factor with the software authenticator of the passkey
// issue (passkeytest): after the password, the second-factor page offers
// the user's passkey; its assertion (user verification on) raises the
// session to phr; another account's passkey is refused; and a passkey
// sign-in with user verification is two factors for a user who also has
// an authenticator app (no code asked).
func TestMFAPasskeyWebAuthn(t *testing.T) {
	var issuer string
	clk := &testClock{}
	h := newHarness(t, harnessOpts{backend: "memory", now: clk.now, cfg: func(c *oauth.Config) {
		c.Issuer = strings.Replace(c.Issuer, "127.0.0.1", "localhost", 1)
		issuer = c.Issuer
	}})
	rp, _ := passkey.Configure(passkey.Settings{Issuer: issuer})
	svc, err := passkey.New(rp, struct {
		storage.PasskeyStore
		storage.Store
	}{h.store.(storage.PasskeyStore), h.store}, passkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := h.store.GetUser(t.Context(), testUser)
	a := &passkeytest.Authenticator{Origin: issuer}
	opts, _ := svc.BeginEnrol(t.Context(), alice.Subject, "s")
	cred, answer, _ := a.Create(opts)
	if _, err := svc.FinishEnrol(t.Context(), alice.Subject, "s", "", answer); err != nil {
		t.Fatal(err)
	}
	// bob has a passkey too.
	if _, err := h.people().Add(t.Context(), identity.NewUser{Username: "bob", Password: "bob-password-1"}); err != nil {
		t.Fatal(err)
	}
	bob, _ := h.store.GetUser(t.Context(), "bob")
	ab := &passkeytest.Authenticator{Origin: issuer}
	opts, _ = svc.BeginEnrol(t.Context(), bob.Subject, "s2")
	bobCred, answer, _ := ab.Create(opts)
	if _, err := svc.FinishEnrol(t.Context(), bob.Subject, "s2", "", answer); err != nil {
		t.Fatal(err)
	}

	assert := func(b *http.Client, p page, who *passkeytest.Authenticator, c *passkeytest.Credential) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/signin/passkey/options", nil)
		req.Header.Set("X-CSRF-Token", csrfRe.FindStringSubmatch(p.body)[1])
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		opts, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		who.Flags = passkeytest.FlagUP | passkeytest.FlagUV
		out, err := who.Get(c, opts)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}

	b := newBrowser(t)
	p, verifier := h.passwordThenFactor(t, b)
	if !strings.Contains(p.body, `name="factor" value="passkey"`) || strings.Contains(p.body, `name="password"`) {
		t.Fatalf("second-factor page without the passkey: %d %s", p.status, p.body)
	}
	refused := submit(t, b, h.srv.URL, p, url.Values{"step": {"factor"}, "factor": {"passkey"}, "credential": {assert(b, p, ab, bobCred)}})
	if refused.status != http.StatusUnauthorized || refused.loc != nil || !strings.Contains(refused.body, "another account") {
		t.Fatalf("another account's passkey: %d %s", refused.status, refused.body)
	}
	done := submit(t, b, h.srv.URL, p, url.Values{"step": {"factor"}, "factor": {"passkey"}, "credential": {assert(b, p, a, cred)}})
	if done.loc == nil && strings.Contains(done.body, `value="continue"`) {
		done = submit(t, b, h.srv.URL, done, url.Values{"step": {"continue"}})
	}
	c := idClaims(t, h.finish(t, done, verifier))
	amr := amrOf(c)
	if c["acr"] != "phr" || !slices.Contains(amr, "pwd") || !slices.Contains(amr, "hwk") || !slices.Contains(amr, "mfa") {
		t.Fatalf("password + passkey: acr %v amr %v", c["acr"], amr)
	}

	// alice adds an authenticator app; a passkey sign-in still asks no
	// code: it is two factors already.
	h.setUpTOTP(t, b, clk)
	b2 := newBrowser(t)
	login, verifier := h.startAuth(t, b2)
	p = submit(t, b2, h.srv.URL, login, url.Values{"step": {"login"}, "method": {"passkey"}, "credential": {assert(b2, login, a, cred)}})
	if p.loc == nil && strings.Contains(p.body, `value="continue"`) {
		p = submit(t, b2, h.srv.URL, p, url.Values{"step": {"continue"}})
	}
	if c := idClaims(t, h.finish(t, p, verifier)); c["acr"] != "phr" {
		t.Fatalf("UV passkey sign-in: acr %v", c["acr"])
	}
}
