package main

import (
	"net/url"
	"strings"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/signin/otp"
	"github.com/authd/authd/totp"
)

// newFactors builds the second factors (issue 27) over the store every
// other service uses: the authenticator app's service (package totp, its
// secret sealed under the system secret) and its factor (signin/otp). The
// otpauth URI's issuer is the issuer's host, what the app shows.
func newFactors(store totp.Store, oc oauth.Config, deps *oauth.Deps) (*totp.Service, error) {
	svc, err := totp.New(store, totp.Options{Secret: oc.Secret, Issuer: otpIssuer(oc.Issuer), Logger: deps.Logger, Now: deps.Now})
	if err != nil {
		return nil, err
	}
	deps.Factors = []signin.Factor{otp.New(svc)}
	deps.MFA = svc
	return svc, nil
}

// otpIssuer is the name an authenticator app shows for issuer: its host
// without the port, because the otpauth URI's label is "issuer:account"
// and the Key URI Format forbids a colon in either part (an app would show
// "127.0.0.1" as the issuer and "8080:alice" as the account); an IPv6
// literal, all colons, is "authd".
func otpIssuer(issuer string) string {
	if u, err := url.Parse(issuer); err == nil && u.Hostname() != "" && !strings.Contains(u.Hostname(), ":") {
		return u.Hostname()
	}
	return "authd"
}
