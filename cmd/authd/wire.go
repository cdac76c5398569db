package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/authd/authd/adminapi"
	"github.com/authd/authd/dpop"
	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/federation"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/passkey/passkeyweb"
	"github.com/authd/authd/password"
	"github.com/authd/authd/revocation"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/signin/fed"
	"github.com/authd/authd/signin/pwd"
	"github.com/authd/authd/signing"
	"github.com/authd/authd/storage"
)

// backends are what serve opens before it builds the server: the store,
// the replay cache and the DPoP jti store (backends.go).
type backends struct {
	store      storage.Store
	cache      exchangecache.Cache
	dpopReplay dpop.ReplayStore
}

// newServer builds, once, the services the server is handed, and the
// server (oauth.New does no I/O and builds none of them):
//
//   - the store's decorators: the backend, the client cache in front of it
//     (AUTHD_CLIENT_CACHE_TTL), and revocation.Store around both, so that
//     every revocation also drops the replay cache entries of what it
//     revoked;
//   - the identity service (users, sessions, consent) on that store, with
//     the password hasher (AUTHD_PASSWORD_HASH_CONCURRENCY);
//   - the ID token signing keys, created here on a first start (replicas
//     starting at once create one generation between them);
//   - the DPoP verifiers: the token endpoint's with server nonces
//     (AUTHD_DPOP_NONCE), UserInfo's without (RFC 9449 §7);
//   - the sign-in methods (package signin): the password method
//     (signin/pwd, with the login back-off);
//   - the admin API (package adminapi), mounted under /admin/.
//
// The revocation store and the verifiers count their fail-open events into
// the server's metrics. keys is returned for the rotation job.
func newServer(ctx context.Context, c config, b backends, log, accessLog *slog.Logger) (srv *oauth.Server, keys *signing.Manager, err error) {
	oc := c.oauthConfig()
	metrics := oauth.NewMetrics()
	budgets, closeBudgets, err := openLimits(c.RedisURL, log, metrics.Registry())
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			closeBudgets()
		}
	}()
	store := b.store
	if c.perf.ClientCacheTTL > 0 {
		store = storage.NewCachingStore(store, c.perf.ClientCacheTTL)
	}
	revoking := revocation.Store{Store: store, OnError: metrics.RevocationCacheError(log)}
	if !oc.DisableReplay {
		revoking.Cache = b.cache
		// Drops a revocation could not make (a Cluster master down) are
		// tried again until the replay window ends, so a promoted replica
		// stops replaying the revoked responses soon after it takes over.
		revoking.Retry = revocation.NewRetrier(b.cache, oc.ReplayWindow, 0)
		go revoking.Retry.Run(ctx)
	}
	passwords := password.New(password.Options{Concurrency: c.people.PasswordHashConcurrency})
	people := identity.New(revoking, identity.Options{SessionTTL: oc.SessionTTL, SessionIdleTTL: oc.SessionIdleTTL,
		Passwords: passwords, Logger: log, MaxSessions: c.people.MaxSessions})
	keys, err = signing.New(b.store, c.keys.signingConfig(c.Secret, log))
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	if err := keys.Ensure(ctx); err != nil {
		return nil, nil, fmt.Errorf("signing keys: %w", err)
	}
	var nonces *dpop.Nonces
	if c.DPoPNonce != "off" {
		nonces = dpop.NewNonces(oc.Secret, 0, nil)
	}
	dpopStoreError := metrics.DPoPStoreError(log)
	verifiers := oauth.DPoPVerifiers{
		Token:    dpop.NewVerifier(dpop.Options{Nonces: nonces, Replay: b.dpopReplay, OnStoreError: dpopStoreError}),
		Resource: dpop.NewVerifier(dpop.Options{Replay: b.dpopReplay, OnStoreError: dpopStoreError}),
	}
	// The sign-in methods, in the login page's order.
	methods := []signin.Method{pwd.New(people, pwd.Options{Limits: oc.LoginLimits, Budgets: budgets, Logger: log})}
	passkeys, err := newPasskeys(c, oc.Issuer, b.store, revoking, log, metrics.SecurityEvents(log)) // passkeys.go
	if err != nil {
		return nil, nil, err
	}
	if passkeys != nil {
		methods = append(methods, passkeyweb.New(passkeys))
	}
	// Upstream providers (package federation): every replica reloads them
	// within federation.PollInterval of a change; their buttons follow the
	// other methods.
	providers := federation.NewRegistry(federation.RegistryConfig{Secret: oc.Secret, Store: b.store, Logger: log})
	methods = append(methods, fed.New(fed.Options{Secret: oc.Secret, Issuer: oc.Issuer, Registry: providers, Store: revoking, Logger: log}))
	deps := oauth.Deps{Store: revoking, People: people, Keys: keys, DPoP: verifiers, Metrics: metrics, Methods: methods,
		Limits: budgets, Cache: b.cache, Logger: log, AccessLog: accessLog, Passwords: passwords, AfterExchangeCommit: faultAfterCommit(),
		Federation: providers}
	if _, err := newFactors(revoking, oc, &deps); err != nil {
		return nil, nil, usagef("%v", err)
	}
	if passkeys != nil {
		// A passkey as the second factor after a password (issue 27).
		deps.Factors = append(deps.Factors, passkeyweb.NewFactor(passkeys))
	}
	srv, err = oauth.New(oc, deps)
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	// The admin API (/admin/…) writes through the same store and identity
	// service, so its writes reach the client cache and the replay cache
	// the server reads; it runs behind the server's middleware.
	admin, err := adminapi.New(adminapi.Config{Secret: oc.Secret, AdminTokens: oc.AdminTokens, IdempotencyKeyTTL: oc.IdempotencyKeyTTL,
		Store: revoking, People: people, Passkeys: passkeys, Logger: log, Issuer: oc.Issuer})
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	srv.MountAdmin(admin)
	if passkeys != nil {
		srv.MountPasskeys(passkeys)
	}
	if err := mountAccounts(c, b.store, revoking, people, passwords, budgets, srv, log); err != nil {
		return nil, nil, err
	}
	return srv, keys, nil
}
