package oauth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"golang.org/x/oauth2"

	"github.com/authd/authd/limits"
	"github.com/authd/authd/oauth"
)

// The second factor through the real pages (issue 27): set-up on the
// account page, the factor after the password, recovery codes, a code
// accepted once, step-up with acr_values, require_mfa, the bound on
// attempts and the operator's reset. The server's clock is injected so
// that a test moves to the next 30-second step without waiting.

// testClock is the server's clock: the real time plus an offset the test
// advances.
type testClock struct{ off atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *testClock) advance(d time.Duration) { c.off.Add(int64(d)) }

func newMFAHarness(t *testing.T, backend string) (*harness, *testClock) {
	t.Helper()
	clk := &testClock{}
	return newHarness(t, harnessOpts{backend: backend, now: clk.now}), clk
}

// totpCode is the authenticator app: the code of secret at the server's
// time.
func totpCode(t testing.TB, clk *testClock, secret string) string {
	t.Helper()
	c, err := totp.GenerateCodeCustom(secret, clk.now(), totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	secretRe = regexp.MustCompile(`enter this key by hand: <code>([A-Z2-7]+)</code>`)
	codeRe   = regexp.MustCompile(`<li><code>([a-z2-7]{5}-[a-z2-7]{5})</code></li>`)
	hrefRe   = regexp.MustCompile(`<a class="button" href="([^"]+)">`)
)

// postPage posts fields with the CSRF token of p to path (pages with
// several forms).
func (h *harness) postPage(t testing.TB, b *http.Client, p page, path string, fields url.Values) page {
	t.Helper()
	m := csrfRe.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token on page (status %d): %s", p.status, p.body)
	}
	fields.Set("csrf_token", m[1])
	return h.sendForm(t, b, path, fields)
}

// sendForm posts fields to path as a form of this site's page would
// (same Origin), with whatever csrf_token fields carries.
func (h *harness) sendForm(t testing.TB, b *http.Client, path string, fields url.Values) page {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(fields.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", h.srv.URL)
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return readPage(t, resp)
}

// setUpTOTP sets up an authenticator app on the account page of signed-in
// browser b and returns its secret and the recovery codes.
func (h *harness) setUpTOTP(t testing.TB, b *http.Client, clk *testClock) (secret string, codes []string) {
	t.Helper()
	acct := get(t, b, h.srv.URL+"/account")
	if !strings.Contains(acct.body, "Set up an authenticator app") {
		t.Fatalf("account page without the set-up button: %s", acct.body)
	}
	p := h.postPage(t, b, acct, "/account/mfa", url.Values{"step": {"setup"}})
	m := secretRe.FindStringSubmatch(p.body)
	if p.status != 200 || m == nil || !strings.Contains(p.body, "otpauth://totp/") || !strings.Contains(p.body, `src="/account/mfa/qr.png"`) {
		t.Fatalf("set-up page: %d %s", p.status, p.body)
	}
	secret = m[1]
	resp, err := b.Get(h.srv.URL + "/account/mfa/qr.png")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("QR code: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if bad := submit(t, b, h.srv.URL, p, url.Values{"step": {"factor-setup"}, "otp": {"000000"}}); bad.status != http.StatusUnauthorized && totpCode(t, clk, secret) != "000000" {
		t.Fatalf("wrong set-up code: %d", bad.status)
	}
	p = submit(t, b, h.srv.URL, p, url.Values{"step": {"factor-setup"}, "otp": {totpCode(t, clk, secret)}})
	for _, c := range codeRe.FindAllStringSubmatch(p.body, -1) {
		codes = append(codes, c[1])
	}
	if p.status != 200 || len(codes) != 10 {
		t.Fatalf("recovery codes page: %d, %d codes: %s", p.status, len(codes), p.body)
	}
	return secret, codes
}

// idClaims decodes an ID token's payload (its signature is checked by the
// go-oidc test).
func idClaims(t testing.TB, res tokenResult) map[string]any {
	t.Helper()
	parts := strings.Split(res.str("id_token"), ".")
	if len(parts) != 3 {
		t.Fatalf("no ID token: %v", res.body)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func amrOf(c map[string]any) []string {
	var out []string
	for _, v := range c["amr"].([]any) {
		out = append(out, v.(string))
	}
	return out
}

// startAuth opens an authorization request of the public client with
// extra parameters and returns the first page and the PKCE verifier.
func (h *harness) startAuth(t testing.TB, b *http.Client, extra ...oauth2.AuthCodeOption) (page, string) {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	opts := append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}, extra...)
	return get(t, b, h.oauthConfig(publicClient).AuthCodeURL("state-mfa", opts...)), verifier
}

// finish redeems the code of the redirect p.
func (h *harness) finish(t testing.TB, p page, verifier string) tokenResult {
	t.Helper()
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		t.Fatalf("no code: %d %v %s", p.status, p.loc, p.body)
	}
	return h.redeem(t, p.loc.Query().Get("code"), verifier)
}

// passwordThenFactor signs in with the password on a fresh request and
// returns the page after it (the second-factor page when one is asked).
func (h *harness) passwordThenFactor(t testing.TB, b *http.Client) (page, string) {
	t.Helper()
	p, verifier := h.startAuth(t, b)
	return h.signInAs(t, b, p, testUser, testPassword), verifier
}

func TestMFASetUpSignOutPasswordOTP(t *testing.T) {
	for _, backend := range backends[:2] {
		t.Run(backend, func(t *testing.T) {
			h, clk := newMFAHarness(t, backend)
			b := newBrowser(t)
			one := h.tokensFor(t, b, testUser, testPassword)
			if c := idClaims(t, one); c["acr"] != "urn:authd:acr:1fa" || !slices.Equal(amrOf(c), []string{"pwd"}) {
				t.Fatalf("one-factor ID token: acr %v amr %v", c["acr"], c["amr"])
			}
			secret, codes := h.setUpTOTP(t, b, clk)

			// Sign out, then password → otp → code.
			out := get(t, b, h.srv.URL+"/logout")
			if out = submit(t, b, h.srv.URL, out, url.Values{}); !strings.Contains(out.body, "Signed out") {
				t.Fatalf("sign-out: %d %s", out.status, out.body)
			}
			clk.advance(30 * time.Second) // the set-up's step is used
			p, verifier := h.passwordThenFactor(t, b)
			if !strings.Contains(p.body, `name="otp"`) || strings.Contains(p.body, `name="password"`) {
				t.Fatalf("expected the second-factor form: %d %s", p.status, p.body)
			}
			if bad := submit(t, b, h.srv.URL, p, url.Values{"step": {"factor"}, "otp": {"12345x"}}); bad.status != http.StatusUnauthorized {
				t.Fatalf("wrong code: %d", bad.status)
			}
			code := totpCode(t, clk, secret)
			done := submit(t, b, h.srv.URL, p, url.Values{"step": {"factor"}, "otp": {code}})
			res := h.finish(t, done, verifier)
			c := idClaims(t, res)
			amr := amrOf(c)
			if c["acr"] != "urn:authd:acr:2fa" || !slices.Contains(amr, "pwd") || !slices.Contains(amr, "otp") || !slices.Contains(amr, "mfa") {
				t.Fatalf("two-factor ID token: acr %v amr %v", c["acr"], amr)
			}
			// Introspection and UserInfo carry them too (RFC 9470 §3).
			in := h.introspectBody(t, res.str("access_token"))
			if in["acr"] != "urn:authd:acr:2fa" || in["auth_time"] == nil || in["amr"] == nil {
				t.Fatalf("introspection: %v", in)
			}
			// The same form posted again (a flaky network): answered, not
			// refused, and not charged.
			again := submit(t, b, h.srv.URL, p, url.Values{"step": {"factor"}, "otp": {code}})
			if again.loc == nil || again.loc.Query().Get("code") == "" {
				t.Fatalf("retried factor post: %d %s", again.status, again.body)
			}

			// A recovery code works once.
			b2 := newBrowser(t)
			p, verifier = h.passwordThenFactor(t, b2)
			res = h.finish(t, submit(t, b2, h.srv.URL, p, url.Values{"step": {"factor"}, "otp": {strings.ToUpper(codes[0])}}), verifier)
			if c := idClaims(t, res); c["acr"] != "urn:authd:acr:2fa" {
				t.Fatalf("recovery code: acr %v", c["acr"])
			}
			b3 := newBrowser(t)
			p, _ = h.passwordThenFactor(t, b3)
			if p = submit(t, b3, h.srv.URL, p, url.Values{"step": {"factor"}, "otp": {codes[0]}}); p.status != http.StatusUnauthorized || p.loc != nil {
				t.Fatalf("recovery code used twice: %d", p.status)
			}
		})
	}
}

// The same TOTP code from two browsers at once: accepted at most once.
func TestMFASameCodeConcurrently(t *testing.T) {
	for _, backend := range backends[:2] {
		t.Run(backend, func(t *testing.T) {
			h, clk := newMFAHarness(t, backend)
			b := newBrowser(t)
			h.tokensFor(t, b, testUser, testPassword)
			secret, _ := h.setUpTOTP(t, b, clk)
			clk.advance(30 * time.Second)
			const n = 6
			browsers, pages := make([]*http.Client, n), make([]page, n)
			for i := range n {
				browsers[i] = newBrowser(t)
				pages[i], _ = h.passwordThenFactor(t, browsers[i])
			}
			code := totpCode(t, clk, secret)
			var (
				wg       sync.WaitGroup
				accepted atomic.Int32
				start    = make(chan struct{})
			)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					if p := submit(t, browsers[i], h.srv.URL, pages[i], url.Values{"step": {"factor"}, "otp": {code}}); p.loc != nil {
						accepted.Add(1)
					} else if p.status != http.StatusUnauthorized && p.status != http.StatusTooManyRequests {
						t.Errorf("browser %d: %d", i, p.status)
					}
				}()
			}
			close(start)
			wg.Wait()
			if got := accepted.Load(); got != 1 {
				t.Fatalf("one code accepted %d times, want 1", got)
			}
		})
	}
}

// Step-up: a one-factor session (signed in before the factor was set up
// elsewhere) asked for the two-factor acr sees only the second-factor
// form; prompt=none cannot meet it.
func TestMFAStepUp(t *testing.T) {
	h, clk := newMFAHarness(t, "memory")
	old := newBrowser(t)
	h.tokensFor(t, old, testUser, testPassword) // one factor
	b := newBrowser(t)
	h.tokensFor(t, b, testUser, testPassword)
	secret, _ := h.setUpTOTP(t, b, clk)
	clk.advance(30 * time.Second)

	acr := oauth2.SetAuthURLParam("acr_values", "urn:authd:acr:2fa")
	// Setting up raised the session it was done in to two factors.
	p, _ := h.startAuth(t, b, acr, oauth2.SetAuthURLParam("prompt", "none"))
	if p.loc == nil || strings.Contains(p.loc.Query().Get("error_description"), "second factor") {
		t.Fatalf("the set-up's own session is not at two factors: %v", p.loc)
	}
	p, _ = h.startAuth(t, old, acr, oauth2.SetAuthURLParam("prompt", "none"))
	if p.loc == nil || p.loc.Query().Get("error") != "interaction_required" {
		t.Fatalf("prompt=none with an unmet acr: %d %v", p.status, p.loc)
	}
	// The claims parameter's essential acr (Core §5.5.1.1) asks the same.
	claims := oauth2.SetAuthURLParam("claims", `{"id_token":{"acr":{"essential":true,"values":["urn:authd:acr:2fa"]}}}`)
	p, _ = h.startAuth(t, old, claims, oauth2.SetAuthURLParam("prompt", "none"))
	if p.loc == nil || p.loc.Query().Get("error") != "interaction_required" {
		t.Fatalf("prompt=none with an unmet essential acr claim: %d %v", p.status, p.loc)
	}
	p, _ = h.startAuth(t, old, oauth2.SetAuthURLParam("claims", "not json"))
	if p.loc == nil || p.loc.Query().Get("error") != "invalid_request" {
		t.Fatalf("claims that are not JSON: %d %v", p.status, p.loc)
	}
	p, verifier := h.startAuth(t, old, acr)
	if !strings.Contains(p.body, `name="otp"`) || strings.Contains(p.body, `name="password"`) {
		t.Fatalf("step-up shows more than the second factor: %d %s", p.status, p.body)
	}
	res := h.finish(t, submit(t, old, h.srv.URL, p, url.Values{"step": {"factor"}, "otp": {totpCode(t, clk, secret)}}), verifier)
	if c := idClaims(t, res); c["acr"] != "urn:authd:acr:2fa" {
		t.Fatalf("stepped-up acr %v", c["acr"])
	}
	// Now prompt=none meets the acr (this public client's loopback-less
	// custom scheme still needs its one tap, RFC 8252 §8.6).
	p, _ = h.startAuth(t, old, acr, oauth2.SetAuthURLParam("prompt", "none"))
	if p.loc == nil || strings.Contains(p.loc.Query().Get("error_description"), "second factor") {
		t.Fatalf("prompt=none after step-up: %d %v %s", p.status, p.loc, p.body)
	}
}

// completeSetup walks the set-up page shown during sign-in and follows its
// Continue link to the redirect.
func (h *harness) completeSetup(t testing.TB, b *http.Client, clk *testClock, p page) page {
	t.Helper()
	m := secretRe.FindStringSubmatch(p.body)
	if m == nil || !strings.Contains(p.body, "Set up an authenticator app") {
		t.Fatalf("expected the set-up page: %d %s", p.status, p.body)
	}
	p = submit(t, b, h.srv.URL, p, url.Values{"step": {"factor-setup"}, "otp": {totpCode(t, clk, m[1])}})
	link := hrefRe.FindStringSubmatch(p.body)
	if link == nil || len(codeRe.FindAllString(p.body, -1)) != 10 {
		t.Fatalf("recovery codes page: %d %s", p.status, p.body)
	}
	p = get(t, b, h.srv.URL+strings.NewReplacer("&amp;", "&", "&#43;", "+").Replace(link[1]))
	if p.loc == nil && strings.Contains(p.body, `value="continue"`) {
		p = submit(t, b, h.srv.URL, p, url.Values{"step": {"continue"}})
	}
	return p
}

func TestMFARequired(t *testing.T) {
	t.Run("client", func(t *testing.T) {
		// Registered through the admin API with require_mfa, on
		// PostgreSQL: the metadata, its column and the flow.
		clk := &testClock{}
		h := newHarness(t, harnessOpts{backend: "postgres", now: clk.now})
		res := h.admin(t, adminReq{method: "POST", path: "/admin/clients", body: `{"client_name":"Bank","redirect_uris":["` + publicRedirect + `"],` +
			`"grant_types":["authorization_code"],"response_types":["code"],"token_endpoint_auth_method":"none",` +
			`"scope":"openid","skip_consent":true,"require_mfa":true}`})
		if res.status != 201 || res.body["require_mfa"] != true {
			t.Fatalf("register: %s", res)
		}
		conf := h.oauthConfig(publicClient)
		conf.ClientID, conf.Scopes = res.str("client_id"), []string{"openid"}
		if got := h.admin(t, adminReq{method: "GET", path: "/admin/clients/" + conf.ClientID}); got.body["require_mfa"] != true {
			t.Fatalf("read back: %s", got)
		}
		b := newBrowser(t)
		pkce := oauth2.GenerateVerifier()
		p := h.signInAs(t, b, get(t, b, conf.AuthCodeURL("state-bank", oauth2.S256ChallengeOption(pkce))), testUser, testPassword)
		p = h.completeSetup(t, b, clk, p)
		if p.loc == nil || p.loc.Query().Get("code") == "" {
			t.Fatalf("no code: %d %v %s", p.status, p.loc, p.body)
		}
		tok := h.exchange(t, conf.ClientID, p.loc.Query().Get("code"), pkce, publicRedirect)
		if c := idClaims(t, tok); c["acr"] != "urn:authd:acr:2fa" {
			t.Fatalf("require_mfa client: acr %v", c["acr"])
		}
		// The same user at a client without require_mfa: asked the
		// factor all the same (a user with a factor is always asked).
		b2 := newBrowser(t)
		clk.advance(30 * time.Second)
		p, _ = h.passwordThenFactor(t, b2)
		if !strings.Contains(p.body, `name="otp"`) {
			t.Fatalf("user with a factor not asked: %d %s", p.status, p.body)
		}
	})
	t.Run("user", func(t *testing.T) {
		h, clk := newMFAHarness(t, "memory")
		if _, err := h.people().RequireMFA(context.Background(), testUser, true); err != nil {
			t.Fatal(err)
		}
		b := newBrowser(t)
		p, verifier := h.passwordThenFactor(t, b)
		res := h.finish(t, h.completeSetup(t, b, clk, p), verifier)
		if c := idClaims(t, res); c["acr"] != "urn:authd:acr:2fa" {
			t.Fatalf("required user: acr %v", c["acr"])
		}
	})
}

// Five wrong codes, then a page saying when to retry; a right code is
// refused meanwhile.
func TestMFAAttemptsBounded(t *testing.T) {
	h, clk := newMFAHarness(t, "memory")
	b := newBrowser(t)
	h.tokensFor(t, b, testUser, testPassword)
	secret, _ := h.setUpTOTP(t, b, clk) // one wrong set-up code charged: 4 left
	clk.advance(30 * time.Second)
	b2 := newBrowser(t)
	p, _ := h.passwordThenFactor(t, b2)
	for i := range 4 {
		if r := submit(t, b2, h.srv.URL, p, url.Values{"step": {"factor"}, "otp": {"99999x"}}); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong code %d: %d", i, r.status)
		}
	}
	r := submit(t, b2, h.srv.URL, p, url.Values{"step": {"factor"}, "otp": {totpCode(t, clk, secret)}})
	if r.status != http.StatusTooManyRequests || r.loc != nil || !strings.Contains(r.body, "Try again in") {
		t.Fatalf("attempt over the bound: %d %s", r.status, r.body)
	}
}

// The operator's reset (admin API, Idempotency-Key) deletes the factor
// and ends the user's sessions.
func TestMFAResetEndsSessions(t *testing.T) {
	h, clk := newMFAHarness(t, "memory")
	b := newBrowser(t)
	h.tokensFor(t, b, testUser, testPassword)
	h.setUpTOTP(t, b, clk)
	res := h.admin(t, adminReq{method: http.MethodPost, path: "/admin/users/" + testUser + "/reset-mfa", key: "reset-1"})
	if res.status != 200 || res.body["factors_removed"] != true || res.body["sessions_ended"].(float64) < 1 {
		t.Fatalf("reset: %d %v", res.status, res.body)
	}
	if again := h.admin(t, adminReq{method: http.MethodPost, path: "/admin/users/" + testUser + "/reset-mfa", key: "reset-1"}); string(again.raw) != string(res.raw) {
		t.Fatalf("replayed reset: %s, want %s", again.raw, res.raw)
	}
	if acct := get(t, b, h.srv.URL+"/account"); !strings.Contains(acct.body, "Not signed in") {
		t.Fatalf("session survived the reset: %s", acct.body)
	}
	// The password alone signs in again.
	p, verifier := h.passwordThenFactor(t, b)
	if strings.Contains(p.body, `name="otp"`) {
		t.Fatal("a factor is still asked after the reset")
	}
	h.finish(t, p, verifier)
}

func TestMFADiscoveryACR(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	resp, err := http.Get(h.srv.URL + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		ACR    []string `json:"acr_values_supported"`
		Claims bool     `json:"claims_parameter_supported"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.ACR, []string{"urn:authd:acr:1fa", "urn:authd:acr:2fa", "phr"}) {
		t.Fatalf("acr_values_supported = %v", m.ACR)
	}
	// The claims parameter's essential acr steps up (TestMFAStepUp), so
	// discovery must not tell relying parties it is unsupported.
	if !m.Claims {
		t.Error("claims_parameter_supported is false, yet the claims parameter's acr is honoured")
	}
}

// go-oidc verifies the two-factor ID token and reads its acr and amr;
// UserInfo carries them too.
func TestMFAGoOIDCReadsACR(t *testing.T) {
	h, clk := newMFAHarness(t, "memory")
	b := newBrowser(t)
	h.tokensFor(t, b, testUser, testPassword)
	secret, _ := h.setUpTOTP(t, b, clk)
	clk.advance(30 * time.Second)

	ctx := oidc.ClientContext(context.Background(), http.DefaultClient)
	provider, err := oidc.NewProvider(ctx, h.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	conf := h.oauthConfig(publicClient)
	pkce := oauth2.GenerateVerifier()
	b2 := newBrowser(t)
	p := get(t, b2, conf.AuthCodeURL("state-oidc-acr", oauth2.S256ChallengeOption(pkce), oauth2.SetAuthURLParam("acr_values", "urn:authd:acr:2fa")))
	p = h.signInAs(t, b2, p, testUser, testPassword)
	if !strings.Contains(p.body, `name="otp"`) {
		t.Fatalf("expected the second-factor form: %d %s", p.status, p.body)
	}
	p = submit(t, b2, h.srv.URL, p, url.Values{"step": {"factor"}, "otp": {totpCode(t, clk, secret)}})
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		t.Fatalf("no code: %d %s", p.status, p.body)
	}
	tok, err := conf.Exchange(ctx, p.loc.Query().Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := provider.Verifier(&oidc.Config{ClientID: publicClient}).Verify(ctx, raw)
	if err != nil {
		t.Fatalf("ID token does not verify: %v", err)
	}
	var c struct {
		ACR      string   `json:"acr"`
		AMR      []string `json:"amr"`
		AuthTime int64    `json:"auth_time"`
	}
	if err := idt.Claims(&c); err != nil {
		t.Fatal(err)
	}
	if c.ACR != "urn:authd:acr:2fa" || !slices.Contains(c.AMR, "otp") || c.AuthTime == 0 {
		t.Fatalf("verified claims: %+v", c)
	}
	ui, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		t.Fatal(err)
	}
	var uc struct {
		ACR string `json:"acr"`
	}
	if err := ui.Claims(&uc); err != nil || uc.ACR != "urn:authd:acr:2fa" {
		t.Fatalf("UserInfo acr %q (%v)", uc.ACR, err)
	}
}

// Removing the authenticator app on /account needs a current code; new
// recovery codes replace the old ones.
func TestMFAAccountRemoveAndRegenerate(t *testing.T) {
	h, clk := newMFAHarness(t, "memory")
	b := newBrowser(t)
	h.tokensFor(t, b, testUser, testPassword)
	secret, codes := h.setUpTOTP(t, b, clk)
	acct := get(t, b, h.srv.URL+"/account")
	if !strings.Contains(acct.body, "Recovery codes left: 10") {
		t.Fatalf("account page: %s", acct.body)
	}
	p := h.postPage(t, b, acct, "/account/mfa", url.Values{"step": {"regenerate"}})
	fresh := codeRe.FindAllStringSubmatch(p.body, -1)
	if p.status != 200 || len(fresh) != 10 || fresh[0][1] == codes[0] {
		t.Fatalf("new recovery codes: %d %s", p.status, p.body)
	}
	if r := h.postPage(t, b, acct, "/account/mfa", url.Values{"step": {"remove"}, "otp": {codes[1]}}); r.status != http.StatusUnauthorized {
		t.Fatalf("removal with a replaced recovery code: %d", r.status)
	}
	if r := h.postPage(t, b, acct, "/account/mfa", url.Values{"step": {"remove"}}); r.status != http.StatusUnauthorized {
		t.Fatalf("removal without a code: %d", r.status)
	}
	clk.advance(30 * time.Second)
	r := h.postPage(t, b, acct, "/account/mfa", url.Values{"step": {"remove"}, "otp": {totpCode(t, clk, secret)}})
	if r.status != 200 || !strings.Contains(r.body, "Authenticator app removed.") || !strings.Contains(r.body, "Set up an authenticator app") {
		t.Fatalf("removal: %d %s", r.status, r.body)
	}
}

// The per-session bound alone: with a loose per-user budget, a session's
// fifth failure blocks that session, not a new one.
func TestMFAAttemptsPerSession(t *testing.T) {
	clk := &testClock{}
	h := newHarness(t, harnessOpts{backend: "memory", now: clk.now, cfg: func(c *oauth.Config) {
		c.FactorLimits.PerUser = limits.Rate{PerSecond: 1, Burst: 100}
	}})
	b := newBrowser(t)
	h.tokensFor(t, b, testUser, testPassword)
	h.setUpTOTP(t, b, clk)
	b2 := newBrowser(t)
	p, _ := h.passwordThenFactor(t, b2)
	for i := range 5 {
		if r := submit(t, b2, h.srv.URL, p, url.Values{"step": {"factor"}, "otp": {"99999x"}}); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong code %d: %d", i, r.status)
		}
	}
	if r := submit(t, b2, h.srv.URL, p, url.Values{"step": {"factor"}, "otp": {"99999x"}}); r.status != http.StatusTooManyRequests || !strings.Contains(r.body, "Try again in") {
		t.Fatalf("sixth attempt in one session: %d", r.status)
	}
	b3 := newBrowser(t)
	p, _ = h.passwordThenFactor(t, b3)
	if r := submit(t, b3, h.srv.URL, p, url.Values{"step": {"factor"}, "otp": {"99999x"}}); r.status != http.StatusUnauthorized {
		t.Fatalf("another session: %d", r.status)
	}
}
