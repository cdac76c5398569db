package oauth

import (
	"context"
	"errors"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/storage"
)

// revokingStore is the store as every path that ends a grant sees it: the
// revocation endpoint (RFC 7009), reuse detection and client deletion
// (docs/architecture.md, "Revocation"). It adds one thing: after the
// backend has revoked the grant (which marks its durable replay records
// revoked, storage.ReplayStore), the grant's replay cache entries are
// dropped, so a replay served from the cache needs no database read and
// still never returns revoked tokens.
//
// A cache that cannot be reached is logged and counted (fail_open); its
// entries then expire with the replay window.
type revokingStore struct {
	storage.Store
	cache   exchangecache.Cache // nil: no replay cache
	onError func(error)
}

// RevokeAccessToken revokes the grant's access tokens and drops its
// replay cache entries.
func (s revokingStore) RevokeAccessToken(ctx context.Context, requestID string) error {
	err := s.Store.RevokeAccessToken(ctx, requestID)
	s.forget(ctx, storage.ReplayScope{RequestID: requestID})
	return err
}

// RevokeRefreshToken revokes the grant's refresh tokens and drops its
// replay cache entries.
func (s revokingStore) RevokeRefreshToken(ctx context.Context, requestID string) error {
	err := s.Store.RevokeRefreshToken(ctx, requestID)
	s.forget(ctx, storage.ReplayScope{RequestID: requestID})
	return err
}

// DeleteClient deletes the client (with its codes, tokens and replay
// records) and drops its replay cache entries.
func (s revokingStore) DeleteClient(ctx context.Context, id string) error {
	var keys []string
	if s.cache != nil {
		keys, _ = s.Store.ReplayKeys(ctx, storage.ReplayScope{ClientID: id})
	}
	err := s.Store.DeleteClient(ctx, id)
	if err == nil {
		s.forgetKeys(ctx, keys)
	}
	return err
}

// forget drops the cache entries of the records in scope.
func (s revokingStore) forget(ctx context.Context, scope storage.ReplayScope) {
	if s.cache == nil {
		return
	}
	keys, err := s.Store.ReplayKeys(ctx, scope)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		s.onError(err)
		return
	}
	s.forgetKeys(ctx, keys)
}

// forgetKeys drops cache entries, detached from the request: a client
// hanging up must not leave a revoked response replayable.
func (s revokingStore) forgetKeys(ctx context.Context, keys []string) {
	if s.cache == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, k := range keys {
		if err := s.cache.Forget(ctx, k); err != nil {
			s.onError(err)
			return
		}
	}
}
