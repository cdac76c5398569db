package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/authd/authd/storage"
)

// The memory store has no job queue: one process owns it, so its cleanup
// needs no lease (jobs.RunSweeper drives DeleteExpired on a ticker).
var _ storage.Cleaner = (*Store)(nil)

// memoryCleanupKinds are the storage.Cleanup* kinds the memory store holds.
var memoryCleanupKinds = []string{
	storage.CleanupAuthorizeCodes,
	storage.CleanupAccessTokens,
	storage.CleanupRefreshTokens,
	storage.CleanupPKCESessions,
	storage.CleanupPushedRequests,
	storage.CleanupClientAssertionJWTs,
	storage.CleanupIdempotencyKeys,
	storage.CleanupReplayRecords,
	storage.CleanupPasskeyCeremonies,
	storage.CleanupPasskeyLinks,
	storage.CleanupSessions,
	storage.CleanupFederationExchanges,
	storage.CleanupFederationLogins,
	storage.CleanupAccountFlows,
	storage.CleanupMailOutbox,
	storage.CleanupLogoutDeliveries,
	storage.CleanupAuthSessions,
}

// CleanupKinds returns the kinds DeleteExpired cleans: every
// storage.Cleanup* kind except jobs.
func (s *Store) CleanupKinds(context.Context) ([]string, error) {
	return append([]string(nil), memoryCleanupKinds...), nil
}

// DeleteExpired deletes up to limit expired rows of kind, as the PostgreSQL
// store does (see the storage.Cleanup* constants), in one critical section,
// and returns how many it deleted. A row without an expiry never expires.
// It returns an error matching storage.ErrNotFound for another kind.
func (s *Store) DeleteExpired(ctx context.Context, kind string, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	expired := func(at time.Time) bool { return !at.IsZero() && at.Before(before) }
	var t table
	switch kind {
	case storage.CleanupAuthorizeCodes:
		t = s.codes
	case storage.CleanupAccessTokens:
		t = s.access
	case storage.CleanupRefreshTokens:
		t = s.refresh
	case storage.CleanupPKCESessions:
		t = s.pkce
	case storage.CleanupPushedRequests:
		t = s.par
	case storage.CleanupIdempotencyKeys:
		return s.DeleteExpiredIdempotencyKeys(ctx, before, limit)
	case storage.CleanupReplayRecords:
		n := 0
		s.tx(func() {
			n = s.deleteExpiredReplays(ctx, func(r storage.ReplayRecord) bool { return r.WindowEnd.Before(before) }, limit)
		})
		return n, nil
	case storage.CleanupSessions:
		return s.DeleteExpiredSessions(ctx, before, limit)
	case storage.CleanupFederationExchanges:
		return s.DeleteExpiredSubjectTokens(ctx, before, limit)
	case storage.CleanupFederationLogins:
		return s.deleteExpiredLogins(before, limit), nil
	case storage.CleanupAccountFlows, storage.CleanupMailOutbox:
		return s.deleteExpiredOutbox(ctx, kind, before, limit), nil
	case storage.CleanupLogoutDeliveries:
		return s.deleteFinishedLogouts(ctx, before, limit), nil
	case storage.CleanupPasskeyCeremonies:
		return s.DeleteExpiredCeremonies(ctx, before, limit)
	case storage.CleanupPasskeyLinks:
		return s.deleteExpiredLinks(ctx, before, limit)
	case storage.CleanupAuthSessions:
		return s.DeleteExpiredAuthSessions(ctx, before, limit)
	case storage.CleanupClientAssertionJWTs:
		n := 0
		s.tx(func() {
			for jti, exp := range s.jtis {
				if n == limit {
					return
				}
				if expired(exp) {
					delete(s.jtis, jti)
					s.record(ctx, func() { s.jtis[jti] = exp })
					n++
				}
			}
		})
		return n, nil
	default:
		return 0, fmt.Errorf("memory: delete expired %q: unknown kind: %w", kind, storage.ErrNotFound)
	}
	n := 0
	s.tx(func() {
		for sig, e := range t {
			if n == limit {
				return
			}
			if expired(e.expiresAt) {
				s.deleteEntry(ctx, t, sig)
				n++
			}
		}
	})
	return n, nil
}
