package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/authd/authd/storage"
)

var _ storage.IdempotencyStore = (*Store)(nil)

// idempotencyTable holds idempotency records by idempotencyMapKey.
type idempotencyTable map[string]storage.IdempotencyRecord

// idempotencyMapKey joins the scope and key hash unambiguously.
func idempotencyMapKey(k storage.IdempotencyKey) string {
	return fmt.Sprintf("%x/%q/%x", k.Credential, k.Endpoint, k.KeyHash)
}

func cloneIdempotency(r storage.IdempotencyRecord) *storage.IdempotencyRecord {
	r.Credential = slices.Clone(r.Credential)
	r.KeyHash = slices.Clone(r.KeyHash)
	r.RequestHash = slices.Clone(r.RequestHash)
	r.Response = slices.Clone(r.Response)
	return &r
}

// setIdempotency writes r under mk, recording how to undo it. Callers hold
// s.mu.
func (s *Store) setIdempotency(ctx context.Context, mk string, r storage.IdempotencyRecord) {
	old, had := s.idempotency[mk]
	s.idempotency[mk] = r
	s.record(ctx, func() {
		if had {
			s.idempotency[mk] = old
		} else {
			delete(s.idempotency, mk)
		}
	})
}

// ClaimIdempotencyKey claims c's key for the transaction in ctx (see
// storage.IdempotencyStore). Writes are visible at once (see the package
// comment), so a key claimed by an unfinished transaction is seen as in
// flight; rolling that transaction back removes the claim.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, c storage.IdempotencyClaim) (*storage.IdempotencyRecord, bool, error) {
	if s.txFrom(ctx) == nil {
		return nil, false, errors.New("memory: claim idempotency key: no transaction in context")
	}
	var (
		stored  *storage.IdempotencyRecord
		claimed bool
		err     error
	)
	s.tx(func() {
		if s.idempotency == nil {
			s.idempotency = idempotencyTable{}
		}
		mk := idempotencyMapKey(c.IdempotencyKey)
		createdAt := storage.NormalizeTime(c.CreatedAt)
		old, ok := s.idempotency[mk]
		switch {
		case !ok || !old.ExpiresAt.After(createdAt):
			rec := storage.IdempotencyRecord{
				IdempotencyKey: c.IdempotencyKey,
				RequestHash:    c.RequestHash,
				CreatedAt:      createdAt,
				ExpiresAt:      storage.NormalizeTime(c.ExpiresAt),
			}
			s.setIdempotency(ctx, mk, *cloneIdempotency(rec))
			claimed = true
		case old.Status == 0:
			err = fmt.Errorf("memory: claim idempotency key: %w", storage.ErrIdempotencyInFlight)
		case !bytes.Equal(old.RequestHash, c.RequestHash):
			err = fmt.Errorf("memory: claim idempotency key: %w", storage.ErrIdempotencyKeyReused)
		default:
			stored = cloneIdempotency(old)
		}
	})
	return stored, claimed, err
}

// CompleteIdempotencyKey stores the response of a claimed key, or returns
// storage.ErrNotFound if the key is not in flight.
func (s *Store) CompleteIdempotencyKey(ctx context.Context, k storage.IdempotencyKey, status int, response []byte) error {
	if status == 0 {
		return errors.New("memory: complete idempotency key: status 0")
	}
	var err error
	s.tx(func() {
		mk := idempotencyMapKey(k)
		r, ok := s.idempotency[mk]
		if !ok || r.Status != 0 {
			err = fmt.Errorf("memory: complete idempotency key: %w", storage.ErrNotFound)
			return
		}
		r.Status = status
		r.Response = slices.Clone(response)
		if r.Response == nil {
			r.Response = []byte{}
		}
		s.setIdempotency(ctx, mk, r)
	})
	return err
}

// GetIdempotencyKey returns a copy of the stored record, or
// storage.ErrNotFound.
func (s *Store) GetIdempotencyKey(_ context.Context, k storage.IdempotencyKey) (*storage.IdempotencyRecord, error) {
	var (
		r  storage.IdempotencyRecord
		ok bool
	)
	s.tx(func() { r, ok = s.idempotency[idempotencyMapKey(k)] })
	if !ok {
		return nil, fmt.Errorf("memory: get idempotency key: %w", storage.ErrNotFound)
	}
	return cloneIdempotency(r), nil
}

// DeleteExpiredIdempotencyKeys deletes up to limit records (all if
// limit <= 0), earliest expiry first, whose ExpiresAt is not after now.
func (s *Store) DeleteExpiredIdempotencyKeys(ctx context.Context, now time.Time, limit int) (int, error) {
	n := 0
	s.tx(func() {
		type exp struct {
			mk string
			at time.Time
		}
		var expired []exp
		for mk, r := range s.idempotency {
			if !r.ExpiresAt.After(now) {
				expired = append(expired, exp{mk, r.ExpiresAt})
			}
		}
		sort.Slice(expired, func(i, j int) bool { return expired[i].at.Before(expired[j].at) })
		if limit > 0 && len(expired) > limit {
			expired = expired[:limit]
		}
		for _, e := range expired {
			old := s.idempotency[e.mk]
			delete(s.idempotency, e.mk)
			mk := e.mk
			s.record(ctx, func() { s.idempotency[mk] = old })
			n++
		}
	})
	return n, nil
}
