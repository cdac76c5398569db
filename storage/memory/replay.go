package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/authd/authd/storage"
)

// PutReplayRecord inserts rec and marks the grant's other records revoked
// (superseded), in one critical section recorded in ctx's transaction.
func (s *Store) PutReplayRecord(ctx context.Context, rec *storage.ReplayRecord) ([]string, error) {
	var (
		superseded []string
		err        error
	)
	s.tx(func() {
		if _, taken := s.replays[rec.Key]; taken {
			err = fmt.Errorf("memory: put replay record: %w", storage.ErrAlreadyExists)
			return
		}
		if _, ok := s.clients[rec.ClientID]; !ok {
			err = fmt.Errorf("memory: put replay record: client %q: %w", rec.ClientID, storage.ErrNotFound)
			return
		}
		for key, r := range s.replays {
			if r.RequestID == rec.RequestID && !r.Revoked {
				s.setReplay(ctx, key, func(r *storage.ReplayRecord) { r.Revoked = true })
				superseded = append(superseded, key)
			}
		}
		c := *rec
		c.Sealed = slices.Clone(rec.Sealed)
		c.WindowEnd = storage.NormalizeTime(rec.WindowEnd)
		key := rec.Key
		s.replays[key] = c
		s.record(ctx, func() { delete(s.replays, key) })
	})
	return superseded, err
}

// GetReplayRecord returns a copy of the record with key, or
// storage.ErrNotFound.
func (s *Store) GetReplayRecord(_ context.Context, key string) (*storage.ReplayRecord, error) {
	var (
		r  storage.ReplayRecord
		ok bool
	)
	s.tx(func() { r, ok = s.replays[key] })
	if !ok {
		return nil, fmt.Errorf("memory: get replay record: %w", storage.ErrNotFound)
	}
	r.Sealed = slices.Clone(r.Sealed)
	return &r, nil
}

// DeleteEndedReplayRecord deletes the record with key if its window ended.
func (s *Store) DeleteEndedReplayRecord(ctx context.Context, key string, now time.Time) error {
	s.tx(func() {
		if r, ok := s.replays[key]; ok && !now.Before(r.WindowEnd) {
			delete(s.replays, key)
			s.record(ctx, func() { s.replays[key] = r })
		}
	})
	return nil
}

// ReplayKeys returns the keys of the records in scope.
func (s *Store) ReplayKeys(_ context.Context, scope storage.ReplayScope) ([]string, error) {
	if scope == (storage.ReplayScope{}) {
		return nil, fmt.Errorf("memory: replay keys: an empty scope")
	}
	var keys []string
	s.tx(func() {
		for key, r := range s.replays {
			if (scope.RequestID == "" || r.RequestID == scope.RequestID) &&
				(scope.ClientID == "" || r.ClientID == scope.ClientID) &&
				(scope.Subject == "" || r.Subject == scope.Subject) {
				keys = append(keys, key)
			}
		}
	})
	return keys, nil
}

// revokeReplays marks the records of requestID revoked. Callers hold s.mu.
func (s *Store) revokeReplays(ctx context.Context, requestID string) {
	for key, r := range s.replays {
		if r.RequestID == requestID && !r.Revoked {
			s.setReplay(ctx, key, func(r *storage.ReplayRecord) { r.Revoked = true })
		}
	}
}

// setReplay applies f to the record with key, recording the undo step.
// Callers hold s.mu.
func (s *Store) setReplay(ctx context.Context, key string, f func(*storage.ReplayRecord)) {
	old := s.replays[key]
	r := old
	f(&r)
	s.replays[key] = r
	s.record(ctx, func() { s.replays[key] = old })
}

// deleteExpiredReplays deletes up to limit records whose window closed
// before the cutoff. Callers hold s.mu.
func (s *Store) deleteExpiredReplays(ctx context.Context, expired func(r storage.ReplayRecord) bool, limit int) int {
	n := 0
	for key, r := range s.replays {
		if n == limit {
			break
		}
		if expired(r) {
			delete(s.replays, key)
			s.record(ctx, func() { s.replays[key] = r })
			n++
		}
	}
	return n
}

// ---- the emulated row lock (see the package comment) ----

// root returns the outermost transaction of t.
func (t *memTx) root() *memTx {
	for t.parent != nil {
		t = t.parent
	}
	return t
}

// lockRow records that ctx's root transaction holds key until it ends.
// Outside a transaction the write is final at once and nothing is locked.
// Callers hold s.mu.
func (s *Store) lockRow(ctx context.Context, key string) {
	if t := s.txFrom(ctx); t != nil {
		s.rowLocks[key] = t.root()
	}
}

// waitRow waits until no other open transaction holds key. Callers hold
// s.mu (cond.Wait releases it while waiting).
func (s *Store) waitRow(ctx context.Context, key string) {
	var mine *memTx
	if t := s.txFrom(ctx); t != nil {
		mine = t.root()
	}
	for {
		holder, ok := s.rowLocks[key]
		if !ok || holder == mine || holder.done {
			return
		}
		s.cond.Wait()
	}
}

// unlockRows releases the locks of t when t is a root transaction that
// ended. Callers hold s.mu.
func (s *Store) unlockRows(t *memTx) {
	if t.parent != nil {
		return
	}
	released := false
	for key, holder := range s.rowLocks {
		if holder == t {
			delete(s.rowLocks, key)
			released = true
		}
	}
	if released {
		s.cond.Broadcast()
	}
}

// GrantActive reports whether any refresh token of requestID is active.
func (s *Store) GrantActive(_ context.Context, requestID string) (bool, error) {
	ok := false
	s.tx(func() {
		for _, e := range s.refresh {
			if e.rec.RequestID == requestID && e.active {
				ok = true
				return
			}
		}
	})
	return ok, nil
}

// BeginDeferredTX is BeginTX: the memory store has no round trips to save.
func (s *Store) BeginDeferredTX(ctx context.Context) (context.Context, error) {
	return s.BeginTX(ctx)
}

// CommitWithReplayRecord is PutReplayRecord then Commit.
func (s *Store) CommitWithReplayRecord(ctx context.Context, rec *storage.ReplayRecord) ([]string, error) {
	keys, err := s.PutReplayRecord(ctx, rec)
	if err != nil {
		_ = s.Rollback(ctx)
		return nil, err
	}
	return keys, s.Commit(ctx)
}

// GetAuthorizeCodeRecord reads the code as stored, undecoded.
func (s *Store) GetAuthorizeCodeRecord(_ context.Context, sig string) (*storage.StoredRequest, error) {
	return s.stored("authorize code", s.codes, sig)
}
