package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/authd/authd/storage"
)

// authSessions holds the auth sessions by ID; created on first use.
func (s *Store) authSessionsT() map[string]storage.AuthSession {
	if s.authSessions == nil {
		s.authSessions = map[string]storage.AuthSession{}
	}
	return s.authSessions
}

func cloneAuthSession(a storage.AuthSession) *storage.AuthSession {
	a.AMR = slices.Clone(a.AMR)
	return &a
}

// CreateAuthSession stores a copy of a.
func (s *Store) CreateAuthSession(ctx context.Context, a *storage.AuthSession) error {
	cp := *cloneAuthSession(*a)
	cp.ExpiresAt, cp.CreatedAt = storage.NormalizeTime(cp.ExpiresAt), storage.NormalizeTime(cp.CreatedAt)
	if !cp.AuthTime.IsZero() {
		cp.AuthTime = storage.NormalizeTime(cp.AuthTime)
	}
	var err error
	s.tx(func() {
		t := s.authSessionsT()
		if _, ok := s.clients[cp.ClientID]; !ok {
			err = fmt.Errorf("memory: create auth session: client: %w", storage.ErrNotFound)
			return
		}
		if _, ok := t[cp.ID]; ok {
			err = fmt.Errorf("memory: create auth session: %w", storage.ErrAlreadyExists)
			return
		}
		t[cp.ID] = cp
		id := cp.ID
		s.record(ctx, func() { delete(t, id) })
	})
	return err
}

// GetAuthSession returns a copy of the open, unexpired session.
func (s *Store) GetAuthSession(_ context.Context, id string, now time.Time) (*storage.AuthSession, error) {
	var out *storage.AuthSession
	s.tx(func() {
		a, ok := s.authSessionsT()[id]
		if ok && !a.Done && now.Before(a.ExpiresAt) {
			if _, client := s.clients[a.ClientID]; client {
				out = cloneAuthSession(a)
			}
		}
	})
	if out == nil {
		return nil, fmt.Errorf("memory: get auth session: %w", storage.ErrNotFound)
	}
	return out, nil
}

// UpdateAuthSession is the conditional write on the version.
func (s *Store) UpdateAuthSession(ctx context.Context, a *storage.AuthSession, now time.Time) error {
	var err error
	s.tx(func() {
		t := s.authSessionsT()
		s.waitRow(ctx, "as:"+a.ID)
		old, ok := t[a.ID]
		if !ok || old.Version != a.Version || old.Done || !now.Before(old.ExpiresAt) {
			err = fmt.Errorf("memory: update auth session: %w", storage.ErrNotFound)
			return
		}
		n := old
		n.Subject, n.AMR, n.Done, n.Version = a.Subject, slices.Clone(a.AMR), a.Done, old.Version+1
		if !a.AuthTime.IsZero() {
			n.AuthTime = storage.NormalizeTime(a.AuthTime)
		}
		t[a.ID] = n
		s.lockRow(ctx, "as:"+a.ID)
		s.record(ctx, func() { t[old.ID] = old })
	})
	if err == nil {
		a.Version++
	}
	return err
}

// DeleteExpiredAuthSessions deletes expired sessions.
func (s *Store) DeleteExpiredAuthSessions(_ context.Context, now time.Time, limit int) (int, error) {
	n := 0
	s.tx(func() {
		for id, a := range s.authSessionsT() {
			if n >= limit {
				return
			}
			if a.ExpiresAt.Before(now) {
				delete(s.authSessions, id)
				n++
			}
		}
	})
	return n, nil
}

// endAuthSessions ends the subject's open auth sessions (RevokeSubject).
// Callers hold s.mu.
func (s *Store) endAuthSessions(ctx context.Context, subject string) {
	t := s.authSessionsT()
	for id, a := range t {
		if a.Subject == subject && !a.Done {
			n := a
			n.Done, n.Version = true, a.Version+1
			t[id] = n
			s.record(ctx, func() { t[id] = a })
		}
	}
}
