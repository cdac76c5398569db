package oauth_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestChallengeRevokeMidFlow: a password change or an admin sign-out of
// the user, between the password step and the second factor, ends the
// auth_session (its first factor is void, as the browser's half-signed-in
// session ends): the second factor is invalid_session and no code is
// minted.
func TestChallengeRevokeMidFlow(t *testing.T) {
	for _, backend := range []string{"memory", "postgres"} {
		for name, admin := range map[string]adminReq{
			"password change": {method: "POST", path: "/admin/users/" + testUser + "/password", body: `{"password":"a-brand-new-password-123"}`},
			"sign-out":        {method: "POST", path: "/admin/users/" + testUser + "/sign-out"},
		} {
			t.Run(backend+"/"+name, func(t *testing.T) {
				clk := &testClock{}
				h := newHarness(t, harnessOpts{backend: backend, now: clk.now})
				seedFirstParty(t, h)
				b := newBrowser(t)
				h.tokensFor(t, b, testUser, testPassword)
				secret, _ := h.setUpTOTP(t, b, clk)
				clk.advance(30 * time.Second)
				first, _ := firstStep(fpClient)
				pw := h.challenge(t, with(first, "username", testUser, "password", testPassword), nil)
				if pw.status != http.StatusForbidden || pw.str("auth_session") == "" {
					t.Fatalf("password step: %d %s", pw.status, pw.raw)
				}
				if r := h.admin(t, admin); r.status != http.StatusOK {
					t.Fatalf("admin: %d %s", r.status, r.raw)
				}
				next := url.Values{"client_id": {fpClient}, "auth_session": {pw.str("auth_session")}, "otp": {totpCode(t, clk, secret)}}
				if r := h.challenge(t, next, nil); r.status != http.StatusBadRequest || r.str("error") != "invalid_session" {
					t.Fatalf("second factor after the %s: %d %s", name, r.status, r.raw)
				}
				if backend == "postgres" {
					if n := h.countCodes(t, fpClient); n != 0 {
						t.Fatalf("%d codes minted", n)
					}
				}
			})
		}
	}
}
