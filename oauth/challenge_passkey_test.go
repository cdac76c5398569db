package oauth_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/passkey/passkeytest"
)

// TestChallengePasskey: passkey=options, then the software authenticator's
// assertion → code → tokens (amr hwk and user); the assertion step
// repeated is one sign-in and one code (the ceremony is single use: only
// the replay answers the duplicates).
func TestChallengePasskey(t *testing.T) {
	var issuer string
	h, _, _ := newChallengeHarness(t, func(c *oauth.Config) {
		c.Issuer = strings.Replace(c.Issuer, "127.0.0.1", "localhost", 1)
		issuer = c.Issuer
	}, harnessOpts{})
	a := &passkeytest.Authenticator{Origin: issuer}
	cred := h.enrolPasskey(t, a)

	first, verifier := firstStep(fpClient)
	opts := h.repeat(t, with(first, "passkey", "options"), nil, 4, 1)
	handle := opts.str("auth_session")
	if opts.status != http.StatusForbidden || opts.str("error") != "insufficient_authorization" || handle == "" ||
		opts.body["passkey_options"] == nil || !slices.Contains(anyStrings(opts.body["methods"]), "passkey") {
		t.Fatalf("options: %d %s", opts.status, opts.raw)
	}
	var pk struct {
		Options json.RawMessage `json:"passkey_options"`
	}
	if err := json.Unmarshal(opts.raw, &pk); err != nil {
		t.Fatal(err)
	}
	assertion, err := a.Get(cred, []byte(`{"publicKey":`+string(pk.Options)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"client_id": {fpClient}, "auth_session": {handle}, "passkey_assertion": {string(assertion)}}
	done := h.repeat(t, form, nil, 16, 2)
	if done.status != 200 || done.str("authorization_code") == "" {
		t.Fatalf("assertion: %d %s", done.status, done.raw)
	}
	if n := h.countCodes(t, fpClient); n != 1 {
		t.Fatalf("%d codes minted, want 1", n)
	}
	tok := h.redeemNative(t, done.str("authorization_code"), verifier)
	c := jwtClaims(t, tok.str("id_token"))
	if amr := anyStrings(c["amr"]); !slices.Contains(amr, "hwk") || !slices.Contains(amr, "user") {
		t.Fatalf("ID token amr %v acr %v", amr, c["acr"])
	}
	// A password sign-in of this user now asks the passkey as the
	// second factor.
	first2, _ := firstStep(fpClient)
	pw := h.challenge(t, with(first2, "username", testUser, "password", testPassword), nil)
	if pw.status != http.StatusForbidden || !slices.Contains(anyStrings(pw.body["factors"]), "passkey") {
		t.Fatalf("password of a passkey user: %d %s", pw.status, pw.raw)
	}
}

// enrolPasskey signs in with the password in a browser and adds a passkey
// on the account page, as its script does.
func (h *harness) enrolPasskey(t *testing.T, a *passkeytest.Authenticator) *passkeytest.Credential {
	t.Helper()
	b := newBrowser(t)
	h.signInAs(t, b, get(t, b, h.authURL(publicClient, publicRedirect)), testUser, testPassword)
	account := get(t, b, h.srv.URL+"/account")
	m := csrfRe.FindStringSubmatch(account.body)
	if m == nil {
		t.Fatalf("no CSRF token: %s", account.body)
	}
	post := func(path, body string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(body))
		req.Header.Set("X-CSRF-Token", m[1])
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	status, opts := post("/account/passkeys/options", "{}")
	if status != 200 {
		t.Fatalf("enrol options: %d %s", status, opts)
	}
	cred, answer, err := a.Create(opts)
	if err != nil {
		t.Fatal(err)
	}
	if status, body := post("/account/passkeys", `{"credential":`+string(answer)+`,"name":"Phone"}`); status != 201 {
		t.Fatalf("enrol: %d %s", status, body)
	}
	return cred
}
