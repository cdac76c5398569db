// Package oauthtest builds an oauth.Server for tests the way authd serve
// does (cmd/authd's newServer): the backend behind the client cache and
// revocation.Store, the identity service, the signing keys, the DPoP
// verifiers and the admin API mounted under /admin/. It is a test kit, like
// storage/storagetest: production code never imports it.
package oauthtest

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/authd/authd/adminapi"
	"github.com/authd/authd/dpop"
	"github.com/authd/authd/federation"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/passkey"
	"github.com/authd/authd/passkey/passkeyweb"
	"github.com/authd/authd/password"
	"github.com/authd/authd/revocation"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/signin/fed"
	"github.com/authd/authd/signin/otp"
	"github.com/authd/authd/signin/pwd"
	"github.com/authd/authd/signing"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/totp"
)

// Services are the settings of what NewServer builds around the backend;
// the zero value is serve's defaults.
type Services struct {
	ClientCacheTTL time.Duration    // the client cache (0: off)
	DPoPNonceOff   bool             // DPoP proofs need no server nonce
	DPoPReplay     dpop.ReplayStore // the DPoP jti store (nil: in memory)
	// Methods builds the sign-in methods over the identity service and
	// the password method serve registers (Deps.Methods); nil: that
	// password method alone. Ignored when deps.Methods is set.
	Methods func(people *identity.Service, password signin.Method) []signin.Method
	// TOTP receives the authenticator app's service serve builds (the
	// second factor, Deps.Factors and Deps.MFA), for tests that make
	// codes; nil: not kept. Ignored when deps.MFA is set.
	TOTP **totp.Service
	// Factors builds the second factors over the authenticator app's
	// (nil: that one alone), e.g. to add a passkey factor.
	Factors func(otp signin.Factor) []signin.Factor
}

// NewServer is the tests' oauth.New: deps.Store is the backend (a
// storage.Store), around which it builds the services authd serve builds
// before calling oauth.New, all counting into one oauth.Metrics. The
// admin API is mounted when cfg has admin tokens.
func NewServer(cfg oauth.Config, deps oauth.Deps, sv Services) (*oauth.Server, error) {
	backend, ok := deps.Store.(storage.Store)
	if !ok {
		return nil, fmt.Errorf("oauthtest: Deps.Store is a %T, not a storage.Store backend", deps.Store)
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Passwords == nil {
		deps.Passwords = password.New(password.Options{})
	}
	deps.Metrics = oauth.NewMetrics()
	raw := backend
	if sv.ClientCacheTTL > 0 {
		backend = storage.NewCachingStore(backend, sv.ClientCacheTTL)
	}
	revoking := revocation.Store{Store: backend, OnError: deps.Metrics.RevocationCacheError(deps.Logger)}
	if !cfg.DisableReplay && cfg.ReplayWindow >= 0 {
		revoking.Cache = deps.Cache
	}
	deps.Store = revoking
	people := identity.New(revoking, identity.Options{SessionTTL: cfg.SessionTTL, SessionIdleTTL: cfg.SessionIdleTTL,
		Now: deps.Now, Passwords: deps.Passwords, Logger: deps.Logger})
	deps.People = people
	if deps.Federation == nil {
		deps.Federation = federation.NewRegistry(federation.RegistryConfig{Secret: cfg.Secret, Store: backend, Now: deps.Now, Logger: deps.Logger})
	}
	// Passkeys, as serve builds them (cmd/authd/passkeys.go): on for a
	// domain-name issuer (http://localhost:PORT in the browser tests), off
	// for an IP address.
	var pk *passkey.Service
	if rp, err := passkey.Configure(passkey.Settings{Issuer: cfg.Issuer}); err == nil && rp.Enabled {
		if ps, ok := raw.(storage.PasskeyStore); ok {
			pk, err = passkey.New(rp, struct {
				storage.PasskeyStore
				revocation.Store
			}{ps, revoking}, passkey.Options{Logger: deps.Logger, Now: deps.Now, Security: deps.Metrics.SecurityEvents(deps.Logger)})
			if err != nil {
				return nil, err
			}
		}
	}
	if len(deps.Methods) == 0 {
		pw := pwd.New(people, pwd.Options{Limits: cfg.LoginLimits, Budgets: deps.Limits, Logger: deps.Logger, Now: deps.Now})
		deps.Methods = []signin.Method{pw}
		if pk != nil {
			deps.Methods = append(deps.Methods, passkeyweb.New(pk))
		}
		deps.Methods = append(deps.Methods, fed.New(fed.Options{Secret: cfg.Secret, Issuer: cfg.Issuer, Registry: deps.Federation,
			Store: revoking, Logger: deps.Logger, Now: deps.Now}))
		if sv.Methods != nil {
			deps.Methods = sv.Methods(people, pw)
		}
	}
	if deps.MFA == nil {
		svc, err := totp.New(revoking, totp.Options{Secret: cfg.Secret, Issuer: "authd-test", Logger: deps.Logger, Now: deps.Now})
		if err != nil {
			return nil, err
		}
		deps.Factors, deps.MFA = []signin.Factor{otp.New(svc)}, svc
		if pk != nil {
			deps.Factors = append(deps.Factors, passkeyweb.NewFactor(pk))
		}
		if sv.Factors != nil {
			deps.Factors = sv.Factors(deps.Factors[0])
		}
		if sv.TOTP != nil {
			*sv.TOTP = svc
		}
	}
	keys, err := signing.New(backend, signing.Config{Secret: cfg.Secret, TokenTTL: cfg.IDTokenTTL, Now: deps.Now, Logger: deps.Logger})
	if err != nil {
		return nil, err
	}
	if err := keys.Ensure(context.Background()); err != nil {
		return nil, err
	}
	deps.Keys = keys
	if sv.DPoPReplay == nil {
		sv.DPoPReplay = dpop.NewMemory()
	}
	var nonces *dpop.Nonces
	if !sv.DPoPNonceOff {
		nonces = dpop.NewNonces(cfg.Secret, 0, deps.Now)
	}
	onStoreError := deps.Metrics.DPoPStoreError(deps.Logger)
	deps.DPoP = oauth.DPoPVerifiers{
		Token:    dpop.NewVerifier(dpop.Options{Now: deps.Now, Nonces: nonces, Replay: sv.DPoPReplay, OnStoreError: onStoreError}),
		Resource: dpop.NewVerifier(dpop.Options{Now: deps.Now, Replay: sv.DPoPReplay, OnStoreError: onStoreError}),
	}
	srv, err := oauth.New(cfg, deps)
	if err != nil {
		return nil, err
	}
	if len(cfg.AdminTokens) > 0 {
		api, err := adminapi.New(adminapi.Config{Secret: cfg.Secret, AdminTokens: cfg.AdminTokens, IdempotencyKeyTTL: cfg.IdempotencyKeyTTL,
			Store: revoking, People: people, Passkeys: pk, Logger: deps.Logger, Now: deps.Now, Issuer: cfg.Issuer})
		if err != nil {
			return nil, err
		}
		srv.MountAdmin(api)
	}
	if pk != nil {
		srv.MountPasskeys(pk)
	}
	return srv, nil
}
