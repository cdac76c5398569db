package oauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"

	"github.com/authd/authd/federation/federationtest"
	"github.com/authd/authd/storage"
)

// addProvider registers a provider through the admin API (secrets sealed
// as in production).
func addProvider(t *testing.T, h *harness, body map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/admin/providers", strings.NewReader(string(raw)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("add provider: %d", resp.StatusCode)
	}
}

var providerFormRe = regexp.MustCompile(`name="provider" value="([^"]+)">\s*<input type="hidden" name="return_to" value="([^"]+)">\s*<input type="hidden" name="csrf_token" value="([^"]+)">\s*<button[^>]*>([^<]+)</button>`)

// fedStart opens the login page of a new authorization request and
// presses the provider's button: the redirect to the upstream.
func fedStart(t *testing.T, h *harness, b *http.Client, provider string) *url.URL {
	t.Helper()
	p := get(t, b, h.oauthConfig(publicClient).AuthCodeURL("state-fed-0001", oauth2.S256ChallengeOption(fedVerifier)))
	for _, m := range providerFormRe.FindAllStringSubmatch(p.body, -1) {
		if m[1] != provider {
			continue
		}
		post := func(form url.Values) page { return h.sendForm(t, b, "/signin/fed/start", form) }
		form := url.Values{"provider": {provider}, "return_to": {html.UnescapeString(m[2])}}
		// Without the page's CSRF token, or with another's, nothing starts.
		for _, token := range []string{"", "forged-" + m[3]} {
			form.Set("csrf_token", token)
			if sp := post(form); sp.status != http.StatusForbidden || sp.loc != nil {
				t.Fatalf("start with csrf_token %q: %d %v", token, sp.status, sp.loc)
			}
		}
		form.Set("csrf_token", m[3])
		sp := post(form)
		if sp.status != http.StatusSeeOther || sp.loc == nil {
			t.Fatalf("start: %d %s", sp.status, sp.body)
		}
		return sp.loc
	}
	t.Fatalf("no button for %s on the login page: %d %v %s", provider, p.status, p.loc, p.body)
	return nil
}

// fedCallback follows the upstream's redirect to authd's callback and
// returns authd's answer.
func fedCallback(t *testing.T, b *http.Client, authorize *url.URL) page {
	t.Helper()
	up := get(t, b, authorize.String())
	if up.status != http.StatusFound {
		t.Fatalf("upstream authorize: %d %s", up.status, up.body)
	}
	return get(t, b, up.loc.String())
}

func codeOf(t *testing.T, p page) string {
	t.Helper()
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		t.Fatalf("no code: %d %v %s", p.status, p.loc, p.body)
	}
	return p.loc.Query().Get("code")
}

func TestFederationBrowser(t *testing.T) {
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			h := newHarness(t, harnessOpts{backend: backend})
			up := federationtest.New(t)
			up.ClientID, up.ClientSecret = "authd-web", "upstream-secret"
			addProvider(t, h, map[string]any{"id": "corp", "kind": "oidc", "issuer": up.Issuer, "client_id": "authd-web",
				"client_secret": "upstream-secret", "display_name": "Corp"})
			up2 := federationtest.New(t)
			up2.ClientID, up2.ClientSecret = "authd-web", "s2"
			addProvider(t, h, map[string]any{"id": "linking", "kind": "oidc", "issuer": up2.Issuer, "client_id": "authd-web",
				"client_secret": "s2", "display_name": "Linking", "link_by_verified_email": true})
			ctx := context.Background()

			// A new user signs in, gets a code and tokens.
			up.Next = federationtest.Claims{Subject: "corp-1", Email: "new@example.com", EmailVerified: true, Name: "New User"}
			b := newBrowser(t)
			p := fedCallback(t, b, fedStart(t, h, b, "corp"))
			link, err := h.store.GetFederatedIdentity(ctx, up.Issuer, "corp-1")
			if err != nil {
				t.Fatalf("no link: %v (%d %s)", err, p.status, p.body)
			}
			tokens := h.redeem(t, codeOf(t, p), fedVerifier)
			if amr := idTokenAMR(t, tokens.str("id_token")); amr != `["fed"]` {
				t.Fatalf("amr %s", amr)
			}
			// The account page lists the link; it is the user's only way in,
			// so Unlink is refused.
			acct := get(t, b, h.srv.URL+"/account")
			if !strings.Contains(acct.body, "Unlink") || !strings.Contains(acct.body, "Corp") {
				t.Fatalf("account page: %d %s", acct.status, acct.body)
			}
			unlink := func(b *http.Client, page page, issuer, sub string) page {
				return h.postPage(t, b, page, "/account", url.Values{"action": {"unlink"}, "issuer": {issuer}, "sub": {sub}})
			}
			if p := unlink(b, acct, up.Issuer, "corp-1"); !strings.Contains(p.body, "only way to sign in") {
				t.Fatalf("last way in unlinked: %s", p.body)
			}
			if _, err := h.store.GetFederatedIdentity(ctx, up.Issuer, "corp-1"); err != nil {
				t.Fatal("the last way in was removed")
			}
			// A second sign-in (another browser) reuses the same user.
			b2 := newBrowser(t)
			fedCallback(t, b2, fedStart(t, h, b2, "corp"))
			again, _ := h.store.GetFederatedIdentity(ctx, up.Issuer, "corp-1")
			if again.Subject != link.Subject {
				t.Fatal("second sign-in made another user")
			}
			// Without link_by_verified_email, the same verified email as an
			// existing user makes a new user.
			if err := h.store.CreateUser(ctx, &storage.User{Username: "verified", PasswordHash: []byte("x"), Email: "v@example.com", EmailVerified: true}); err != nil {
				t.Fatal(err)
			}
			existing, _ := h.store.GetUser(ctx, "verified")
			up.Next = federationtest.Claims{Subject: "corp-2", Email: "v@example.com", EmailVerified: true}
			b3 := newBrowser(t)
			codeOf(t, fedCallback(t, b3, fedStart(t, h, b3, "corp")))
			if l, _ := h.store.GetFederatedIdentity(ctx, up.Issuer, "corp-2"); l == nil || l.Subject == existing.Subject {
				t.Fatal("merged by email without link_by_verified_email")
			}
			// With it, a verified email links; an unverified one does not.
			if err := h.store.CreateUser(ctx, &storage.User{Username: "linkme", PasswordHash: []byte("x"), Email: "l@example.com", EmailVerified: true}); err != nil {
				t.Fatal(err)
			}
			existing, _ = h.store.GetUser(ctx, "linkme")
			up2.Next = federationtest.Claims{Subject: "l-1", Email: "l@example.com", EmailVerified: false}
			b4 := newBrowser(t)
			codeOf(t, fedCallback(t, b4, fedStart(t, h, b4, "linking")))
			if l, _ := h.store.GetFederatedIdentity(ctx, up2.Issuer, "l-1"); l == nil || l.Subject == existing.Subject {
				t.Fatal("linked by an unverified email")
			}
			up2.Next = federationtest.Claims{Subject: "l-2", Email: "L@example.com", EmailVerified: true}
			b5 := newBrowser(t)
			codeOf(t, fedCallback(t, b5, fedStart(t, h, b5, "linking")))
			if l, _ := h.store.GetFederatedIdentity(ctx, up2.Issuer, "l-2"); l == nil || l.Subject != existing.Subject {
				t.Fatal("not linked by a verified email with link_by_verified_email")
			}
			// That user has a password too: the link can go.
			acct5 := get(t, b5, h.srv.URL+"/account")
			if p := unlink(b5, acct5, up2.Issuer, "l-2"); !strings.Contains(p.body, "Unlinked Linking") {
				t.Fatalf("unlink: %s", p.body)
			}
			if _, err := h.store.GetFederatedIdentity(ctx, up2.Issuer, "l-2"); err == nil {
				t.Fatal("still linked")
			}
		})
	}
}

// TestFederationBrowserState: a state replayed, or carried to another
// browser, is refused.
func TestFederationBrowserState(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	up := federationtest.New(t)
	up.ClientID, up.ClientSecret = "authd-web", "upstream-secret"
	addProvider(t, h, map[string]any{"id": "corp", "kind": "oidc", "issuer": up.Issuer, "client_id": "authd-web",
		"client_secret": "upstream-secret", "display_name": "Corp"})
	up.Next = federationtest.Claims{Subject: "s-1"}
	b := newBrowser(t)
	upPage := get(t, b, fedStart(t, h, b, "corp").String())
	callback := upPage.loc.String()
	codeOf(t, get(t, b, callback))
	if p := get(t, b, callback); p.status != http.StatusBadRequest || p.loc != nil {
		t.Fatalf("replayed state: %d %v", p.status, p.loc)
	}
	// Swapped: browser A's callback in browser B (which started its own).
	a, other := newBrowser(t), newBrowser(t)
	aUp := get(t, a, fedStart(t, h, a, "corp").String())
	fedStart(t, h, other, "corp")
	if p := get(t, other, aUp.loc.String()); p.status != http.StatusBadRequest || p.loc != nil {
		t.Fatalf("swapped state: %d %v", p.status, p.loc)
	}
	// A's own callback still works: the swap consumed nothing of A's.
	codeOf(t, get(t, a, aUp.loc.String()))
}

// TestFederationApple: the stand-in checks Apple's ES256 client secret,
// answers with form_post (a cross-site POST the callback lets through) and
// a string email_verified.
func TestFederationApple(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	up := federationtest.New(t)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	up.ClientID = "com.example.web"
	up.CheckSecret = func(s string) error {
		tok, err := jwt.ParseSigned(s, []jose.SignatureAlgorithm{jose.ES256})
		if err != nil {
			return err
		}
		var c jwt.Claims
		if err := tok.Claims(&key.PublicKey, &c); err != nil {
			return err
		}
		if tok.Headers[0].KeyID != "KEY123" || c.Issuer != "TEAM123" || c.Subject != "com.example.web" ||
			!c.Audience.Contains("https://appleid.apple.com") || c.Expiry.Time().Before(time.Now()) {
			return errors.New("bad apple client secret")
		}
		return nil
	}
	addProvider(t, h, map[string]any{"id": "apple", "kind": "apple", "issuer": up.Issuer, "client_id": "com.example.web",
		"team_id": "TEAM123", "key_id": "KEY123", "private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))})
	up.Next = federationtest.Claims{Subject: "apple-7", Email: "x@privaterelay.appleid.com", EmailVerified: "true"}
	b := newBrowser(t)
	authz := fedStart(t, h, b, "apple")
	if authz.Query().Get("response_mode") != "form_post" {
		t.Fatalf("no form_post: %s", authz)
	}
	form := get(t, b, authz.String())
	vals := url.Values{}
	for _, m := range regexp.MustCompile(`name="(\w+)" value='?"?([^'">]*)`).FindAllStringSubmatch(form.body, -1) {
		vals.Set(m[1], html.UnescapeString(m[2]))
	}
	vals.Set("user", `{"name":{"firstName":"Ann","lastName":"Apple"}}`)
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/signin/fed/apple/callback", strings.NewReader(vals.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://appleid.apple.com") // cross-site, as Apple's form_post
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	codeOf(t, readPage(t, resp))
	l, err := h.store.GetFederatedIdentity(context.Background(), up.Issuer, "apple-7")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := h.store.GetUserBySubject(context.Background(), l.Subject)
	if !u.EmailVerified || u.Name != "Ann Apple" {
		t.Fatalf("user %+v: Apple's string email_verified or posted name not read", u)
	}
	// Apple's refresh token is kept (sealed) and queued for revocation
	// when the user is deleted.
	if err := h.store.DeleteUser(context.Background(), u.Subject); err != nil {
		t.Fatal(err)
	}
	queued, err := h.store.ClaimProviderRevocations(context.Background(), time.Now().Add(time.Second), 10)
	if err != nil || len(queued) != 1 || strings.Contains(string(queued[0].Sealed), "upstream-rt") {
		t.Fatalf("queued revocations: %v %v", queued, err)
	}
}

// fedVerifier is the PKCE verifier of fedStart's authorization requests.
var fedVerifier = oauth2.GenerateVerifier()

// idTokenAMR returns the amr claim of an ID token, as JSON.
func idTokenAMR(t *testing.T, raw string) string {
	t.Helper()
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := tok.UnsafeClaimsWithoutVerification(&c); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(c["amr"])
	return string(b)
}
