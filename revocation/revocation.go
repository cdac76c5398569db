// Package revocation makes every path that ends a grant end it everywhere
// at once (docs/architecture.md, "Revocation").
//
// The storage backends revoke tokens and mark the durable replay records of
// the grants they revoke in the same transaction (storage.ReplayStore). A
// replay served from the replay cache (Redis) reads no database, so the
// cache must forget those grants too: Store, a decorator of storage.Store,
// adds exactly that to each revoking method. authd's server, its admin API
// and its CLI all revoke through it.
//
// It never decides whether to revoke, and it never fails a revocation: a
// cache that cannot be reached is reported to OnError, and its entries are
// tried again until the replay window ends (Retrier), when they expire.
package revocation

import (
	"context"
	"errors"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/storage"
)

// Store is a storage.Store whose revoking methods also drop the replay
// cache entries of what they revoked. The zero Cache (nil) makes it the
// wrapped store.
type Store struct {
	storage.Store
	// Cache is the replay cache; nil when there is none.
	Cache exchangecache.Cache
	// OnError, when set, is told about a cache entry that could not be
	// dropped.
	OnError func(error)
	// Retry, when set, keeps trying the drops that failed until the
	// replay window ends (Retrier); its Run must be running.
	Retry *Retrier
}

// RevokeAccessToken revokes the grant: its access and refresh tokens, in
// one transaction (revokeGrant), and drops its replay cache entries.
func (s Store) RevokeAccessToken(ctx context.Context, requestID string) error {
	err := s.revokeGrant(ctx, requestID)
	s.forget(ctx, storage.ReplayScope{RequestID: requestID})
	return err
}

// RevokeRefreshToken revokes the grant: its refresh and access tokens, in
// one transaction (revokeGrant), and drops its replay cache entries.
func (s Store) RevokeRefreshToken(ctx context.Context, requestID string) error {
	err := s.revokeGrant(ctx, requestID)
	s.forget(ctx, storage.ReplayScope{RequestID: requestID})
	return err
}

// revokeGrant revokes every refresh and access token of requestID in one
// transaction (nested, when ctx carries one): both or neither.
//
// Every caller ends a grant with two calls, RevokeRefreshToken then
// RevokeAccessToken (fosite's RFC 7009 handler, its reuse handling, the
// exchanger's). Run as two transactions, an outage between them committed
// the first alone; the client's retry of the revocation then found the
// refresh token inactive, which fosite answers 200 "already revoked",
// and the access token stayed active (found by the scale-out test). The
// second call is now a no-op that costs one round trip.
func (s Store) revokeGrant(ctx context.Context, requestID string) error {
	tctx, err := s.Store.BeginTX(ctx)
	if err != nil {
		return err
	}
	for _, revoke := range []func(context.Context, string) error{s.Store.RevokeRefreshToken, s.Store.RevokeAccessToken} {
		if err := revoke(tctx, requestID); err != nil {
			_ = s.Store.Rollback(tctx)
			return err
		}
	}
	return s.Store.Commit(tctx)
}

// RevokeSubject ends the user's sessions and revokes their codes and
// tokens (disable, delete, password change), and drops their replay cache
// entries.
func (s Store) RevokeSubject(ctx context.Context, subject string) error {
	err := s.Store.RevokeSubject(ctx, subject)
	if err == nil {
		s.forget(ctx, storage.ReplayScope{Subject: subject})
	}
	return err
}

// RevokeConsent withdraws a consent, revokes the tokens issued under it and
// drops their replay cache entries.
func (s Store) RevokeConsent(ctx context.Context, subject, clientID string) error {
	err := s.Store.RevokeConsent(ctx, subject, clientID)
	if err == nil {
		s.forget(ctx, storage.ReplayScope{Subject: subject, ClientID: clientID})
	}
	return err
}

// DeleteClient deletes the client (with its codes, tokens and replay
// records) and drops its replay cache entries.
func (s Store) DeleteClient(ctx context.Context, id string) error {
	var keys []string
	if s.Cache != nil {
		keys, _ = s.Store.ReplayKeys(ctx, storage.ReplayScope{ClientID: id})
	}
	err := s.Store.DeleteClient(ctx, id)
	if err == nil {
		s.forgetKeys(ctx, keys)
	}
	return err
}

// forget drops the cache entries of the records in scope.
func (s Store) forget(ctx context.Context, scope storage.ReplayScope) {
	if s.Cache == nil {
		return
	}
	// Detached: a caller that hangs up after the commit must not leave the
	// entries replayable.
	keys, err := s.Store.ReplayKeys(context.WithoutCancel(ctx), scope)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		s.report(err)
		return
	}
	s.forgetKeys(ctx, keys)
}

// forgetKeys drops cache entries, detached from the request: a client that
// hangs up must not leave a revoked response replayable. It tries every
// key whatever failed before: in a Redis Cluster one key's node may be
// down while the others answer, and stopping at the first failure left
// the reachable entries replayable.
func (s Store) forgetKeys(ctx context.Context, keys []string) {
	if s.Cache == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, k := range keys {
		err := s.Cache.Forget(ctx, k)
		for attempt := 1; attempt < forgetAttempts && isTimeout(err); attempt++ {
			err = s.Cache.Forget(ctx, k)
		}
		if err != nil {
			s.report(err)
			if s.Retry != nil && !s.Retry.add(k) {
				s.report(errors.New("revocation: too many replay cache entries pending a drop; this one expires with the replay window"))
			}
		}
	}
}

// forgetAttempts bounds the tries per key when Forget times out. Each
// Redis call is bounded (150 ms) for the sake of logins; a busy node can
// exceed that while it answers the next call, and an entry left behind
// would replay a revoked response. Revocations are rare: they may wait a
// little longer. A refusal (node down, cluster down) is not retried.
const forgetAttempts = 3

// isTimeout reports whether err is a timeout, which a retry may not meet.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &t) && t.Timeout())
}

func (s Store) report(err error) {
	if s.OnError != nil {
		s.OnError(err)
	}
}
