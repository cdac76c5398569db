package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/authd/authd/storage"
)

func cloneSession(x storage.Session) *storage.Session {
	x.AMR = slices.Clone(x.AMR)
	if x.AMR == nil {
		x.AMR = []string{}
	}
	return &x
}

func sessionValid(x storage.Session, now time.Time) bool {
	return now.Before(x.IdleExpiresAt) && now.Before(x.ExpiresAt)
}

// CreateSession stores a copy of sess.
func (s *Store) CreateSession(ctx context.Context, sess *storage.Session) error {
	if sess.CreatedAt.IsZero() {
		sess.CreatedAt = s.now()
	}
	if sess.LastSeenAt.IsZero() {
		sess.LastSeenAt = sess.CreatedAt
	}
	cp := *cloneSession(*sess)
	for _, t := range []*time.Time{&cp.AuthTime, &cp.IdleExpiresAt, &cp.ExpiresAt, &cp.CreatedAt, &cp.LastSeenAt} {
		*t = storage.NormalizeTime(*t)
	}
	var err error
	s.tx(func() {
		if u, ok := s.users[cp.Subject]; !ok || u.Disabled {
			err = fmt.Errorf("memory: create session: user: %w", storage.ErrNotFound)
			return
		}
		if _, ok := s.sessions[cp.ID]; ok {
			err = fmt.Errorf("memory: create session: %w", storage.ErrAlreadyExists)
			return
		}
		s.sessions[cp.ID] = cp
		id := cp.ID
		s.record(ctx, func() { delete(s.sessions, id) })
	})
	return err
}

// GetSession returns a copy of a valid session, or storage.ErrNotFound.
func (s *Store) GetSession(_ context.Context, id string, now time.Time) (*storage.Session, error) {
	var out *storage.Session
	s.tx(func() {
		x, ok := s.sessions[id]
		u, userOK := s.users[x.Subject]
		if ok && userOK && !u.Disabled && sessionValid(x, now) {
			out = cloneSession(x)
		}
	})
	if out == nil {
		return nil, fmt.Errorf("memory: get session: %w", storage.ErrNotFound)
	}
	return out, nil
}

// GetSessionUser returns a valid session and its user, or
// storage.ErrNotFound.
func (s *Store) GetSessionUser(_ context.Context, id string, now time.Time) (*storage.Session, *storage.User, error) {
	var (
		out  *storage.Session
		user *storage.User
	)
	s.tx(func() {
		x, ok := s.sessions[id]
		u, userOK := s.users[x.Subject]
		if ok && userOK && !u.Disabled && sessionValid(x, now) {
			out, user = cloneSession(x), cloneUser(u)
		}
	})
	if out == nil {
		return nil, nil, fmt.Errorf("memory: get session: %w", storage.ErrNotFound)
	}
	return out, user, nil
}

// GetSessionUserConsent returns a valid session, its user, the user's
// consent for clientID (nil if none) and second factors, or
// storage.ErrNotFound.
func (s *Store) GetSessionUserConsent(ctx context.Context, id, clientID string, now time.Time) (*storage.Session, *storage.User, *storage.Consent, storage.UserFactors, error) {
	x, u, err := s.GetSessionUser(ctx, id, now)
	if err != nil {
		return nil, nil, nil, storage.UserFactors{}, err
	}
	f := s.userFactors(x.Subject)
	c, err := s.GetConsent(ctx, x.Subject, clientID)
	if errors.Is(err, storage.ErrNotFound) {
		return x, u, nil, f, nil
	}
	if err != nil {
		return nil, nil, nil, storage.UserFactors{}, err
	}
	return x, u, c, f, nil
}

// TouchSession extends and returns a valid session, noting client, or
// storage.ErrNotFound.
func (s *Store) TouchSession(ctx context.Context, id, client string, now time.Time, idle time.Duration) (*storage.Session, error) {
	var out *storage.Session
	s.tx(func() {
		s.waitRow(ctx, sessionRow(id))
		old, ok := s.sessions[id]
		if !ok || !sessionValid(old, now) || s.users[old.Subject].Disabled {
			return
		}
		_, userOK := s.users[old.Subject]
		if !userOK {
			return
		}
		x := old
		next := storage.NormalizeTime(now.Add(idle))
		if next.After(x.ExpiresAt) {
			next = x.ExpiresAt
		}
		if next.Before(x.IdleExpiresAt) || !next.Before(x.IdleExpiresAt.Add(storage.TouchGranularity(idle))) {
			x.IdleExpiresAt = next
		}
		x.LastSeenAt = storage.NormalizeTime(now)
		s.sessions[id] = x
		s.record(ctx, func() { s.sessions[id] = old })
		if client != "" {
			s.noteClient(ctx, id, client)
		}
		s.lockRow(ctx, sessionRow(id))
		out = cloneSession(x)
	})
	if out == nil {
		return nil, fmt.Errorf("memory: touch session: %w", storage.ErrNotFound)
	}
	return out, nil
}

// DeleteSession ends one session; a missing one is not an error.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	s.tx(func() {
		s.waitSessions(ctx, func(x storage.Session) bool { return x.ID == id })
		if old, ok := s.sessions[id]; ok {
			delete(s.sessions, id)
			s.record(ctx, func() { s.sessions[id] = old })
			s.queueLogouts(ctx, []storage.Session{old})
		}
	})
	return nil
}

// ListSessions returns the subject's valid sessions, newest first.
func (s *Store) ListSessions(_ context.Context, subject string, now time.Time) ([]*storage.Session, error) {
	var out []*storage.Session
	s.tx(func() {
		for _, x := range s.sessions {
			if x.Subject == subject && sessionValid(x, now) {
				out = append(out, cloneSession(x))
			}
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// EndSessions deletes every session of subject.
func (s *Store) EndSessions(ctx context.Context, subject string) (int, error) {
	var n int
	s.tx(func() { n = s.endSessions(ctx, subject) })
	return n, nil
}

// endSessions deletes the subject's sessions, queues their back-channel
// logouts and ends its auth sessions. Callers hold s.mu.
func (s *Store) endSessions(ctx context.Context, subject string) int {
	s.waitSessions(ctx, func(x storage.Session) bool { return x.Subject == subject })
	s.endAuthSessions(ctx, subject)
	var ended []storage.Session
	for id, x := range s.sessions {
		if x.Subject == subject {
			delete(s.sessions, id)
			s.record(ctx, func() { s.sessions[id] = x })
			ended = append(ended, x)
		}
	}
	s.queueLogouts(ctx, ended)
	return len(ended)
}

// TrimSessions ends the subject's sessions beyond its keep newest and
// queues their back-channel logouts.
func (s *Store) TrimSessions(ctx context.Context, subject string, keep int) (int, error) {
	var n int
	s.tx(func() {
		s.waitSessions(ctx, func(x storage.Session) bool { return x.Subject == subject })
		var mine []storage.Session
		for _, x := range s.sessions {
			if x.Subject == subject {
				mine = append(mine, x)
			}
		}
		if len(mine) <= keep {
			return
		}
		sort.Slice(mine, func(i, j int) bool {
			if !mine[i].CreatedAt.Equal(mine[j].CreatedAt) {
				return mine[i].CreatedAt.After(mine[j].CreatedAt)
			}
			return mine[i].ID < mine[j].ID
		})
		ended := mine[max(keep, 0):]
		for _, x := range ended {
			delete(s.sessions, x.ID)
			s.record(ctx, func() { s.sessions[x.ID] = x })
		}
		s.queueLogouts(ctx, ended)
		n = len(ended)
	})
	return n, nil
}

// DeleteExpiredSessions deletes up to limit sessions invalid at now.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time, limit int) (int, error) {
	n := 0
	s.tx(func() {
		for id, x := range s.sessions {
			if n >= limit {
				return
			}
			if !sessionValid(x, now) {
				delete(s.sessions, id)
				s.record(ctx, func() { s.sessions[id] = x })
				if cs, ok := s.rpClients[id]; ok {
					delete(s.rpClients, id)
					s.record(ctx, func() { s.rpClients[id] = cs })
				}
				n++
			}
		}
	})
	return n, nil
}

// sessionRow is a session's key in the emulated row locks.
func sessionRow(id string) string { return "s:" + id }

// waitSessions waits until no other open transaction holds a session match
// selects. TouchSession in a transaction holds the session until that
// transaction ends, as PostgreSQL's UPDATE holds the row: a session that
// ends after the touch ends after the commit, so the logouts it queues
// include every client the transaction noted. Callers hold s.mu (the wait
// releases it, so the scan starts again after each wait).
func (s *Store) waitSessions(ctx context.Context, match func(storage.Session) bool) {
	var mine *memTx
	if t := s.txFrom(ctx); t != nil {
		mine = t.root()
	}
	for {
		held := ""
		for id, x := range s.sessions {
			if h, ok := s.rowLocks[sessionRow(id)]; ok && h != mine && !h.done && match(x) {
				held = sessionRow(id)
				break
			}
		}
		if held == "" {
			return
		}
		s.waitRow(ctx, held)
	}
}
