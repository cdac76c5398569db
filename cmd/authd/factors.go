package main

import (
	"net/url"

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
	issuer := "authd"
	if u, err := url.Parse(oc.Issuer); err == nil && u.Host != "" {
		issuer = u.Host
	}
	svc, err := totp.New(store, totp.Options{Secret: oc.Secret, Issuer: issuer, Logger: deps.Logger, Now: deps.Now})
	if err != nil {
		return nil, err
	}
	deps.Factors = []signin.Factor{otp.New(svc)}
	deps.MFA = svc
	return svc, nil
}
