package main

import "testing"

// TestOTPIssuerHasNoColon: the otpauth URI's issuer is the issuer's host
// without a port or IPv6 brackets, so its "issuer:account" label splits
// where authenticator apps split it.
func TestOTPIssuerHasNoColon(t *testing.T) {
	for in, want := range map[string]string{
		"https://login.example.com":      "login.example.com",
		"http://127.0.0.1:8080":          "127.0.0.1",
		"https://login.example.com:8443": "login.example.com",
		"http://[::1]:8080":              "authd",
		"":                               "authd",
	} {
		if got := otpIssuer(in); got != want {
			t.Errorf("otpIssuer(%q) = %q, want %q", in, got, want)
		}
	}
}
