package memory

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/authd/authd/storage"
)

// cloneUser copies u so that no caller aliases the stored value.
func cloneUser(u storage.User) *storage.User {
	u.PasswordHash = slices.Clone(u.PasswordHash)
	return &u
}

// userByName returns the subject of the user named username. Callers hold
// s.mu.
func (s *Store) userByName(username string) (string, bool) {
	for sub, u := range s.users {
		if u.Username == username {
			return sub, true
		}
	}
	return "", false
}

// CreateUser stores a copy of u, setting its Subject (when empty) and
// times (when zero). It returns storage.ErrAlreadyExists if the username
// or subject is taken.
func (s *Store) CreateUser(ctx context.Context, u *storage.User) error {
	if u.Subject == "" {
		u.Subject = storage.NewSubject()
	}
	if u.CreatedAt.IsZero() {
		u.CreatedAt = s.now()
	}
	if u.UpdatedAt.IsZero() {
		u.UpdatedAt = u.CreatedAt
	}
	u.CreatedAt, u.UpdatedAt = storage.NormalizeTime(u.CreatedAt), storage.NormalizeTime(u.UpdatedAt)
	var err error
	s.tx(func() {
		_, taken := s.userByName(u.Username)
		if _, dup := s.users[u.Subject]; taken || dup {
			err = fmt.Errorf("memory: user %q: %w", u.Username, storage.ErrAlreadyExists)
			return
		}
		s.users[u.Subject] = *cloneUser(*u)
		sub := u.Subject
		s.record(ctx, func() { delete(s.users, sub) })
	})
	return err
}

// GetUser returns a copy of the user with this username, or
// storage.ErrNotFound.
func (s *Store) GetUser(_ context.Context, username string) (*storage.User, error) {
	var u *storage.User
	s.tx(func() {
		if sub, ok := s.userByName(username); ok {
			u = cloneUser(s.users[sub])
		}
	})
	if u == nil {
		return nil, fmt.Errorf("memory: user %q: %w", username, storage.ErrNotFound)
	}
	return u, nil
}

// GetUserBySubject returns a copy of the user, or storage.ErrNotFound.
func (s *Store) GetUserBySubject(_ context.Context, subject string) (*storage.User, error) {
	var u *storage.User
	s.tx(func() {
		if x, ok := s.users[subject]; ok {
			u = cloneUser(x)
		}
	})
	if u == nil {
		return nil, fmt.Errorf("memory: user by subject: %w", storage.ErrNotFound)
	}
	return u, nil
}

// ListUsers returns up to limit users with username > after, by username.
func (s *Store) ListUsers(_ context.Context, after string, limit int) ([]*storage.User, error) {
	var out []*storage.User
	s.tx(func() {
		for _, u := range s.users {
			if u.Username > after {
				out = append(out, cloneUser(u))
			}
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Username < out[j].Username })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// updateUser applies f to the user with subject, recording the undo step.
// f returns an error to refuse the change.
func (s *Store) updateUser(ctx context.Context, op, subject string, f func(u *storage.User) error) error {
	var err error
	s.tx(func() {
		old, ok := s.users[subject]
		if !ok {
			err = fmt.Errorf("memory: %s: %w", op, storage.ErrNotFound)
			return
		}
		u := *cloneUser(old)
		if err = f(&u); err != nil {
			return
		}
		u.UpdatedAt = storage.NormalizeTime(s.now())
		s.users[subject] = u
		s.record(ctx, func() { s.users[subject] = old })
	})
	return err
}

// UpdateUserProfile replaces the profile fields, or returns
// storage.ErrNotFound.
func (s *Store) UpdateUserProfile(ctx context.Context, p *storage.User) error {
	return s.updateUser(ctx, "update user profile", p.Subject, func(u *storage.User) error {
		u.Email, u.EmailVerified, u.Name = p.Email, p.EmailVerified, p.Name
		return nil
	})
}

// RenameUser changes the username; storage.ErrAlreadyExists if taken.
// Callers of updateUser's f hold s.mu, so the uniqueness check is atomic.
func (s *Store) RenameUser(ctx context.Context, subject, username string) error {
	return s.updateUser(ctx, "rename user", subject, func(u *storage.User) error {
		if other, ok := s.userByName(username); ok && other != subject {
			return fmt.Errorf("memory: rename user to %q: %w", username, storage.ErrAlreadyExists)
		}
		u.Username = username
		return nil
	})
}

// SetUserPassword replaces the password hash, or returns
// storage.ErrNotFound.
func (s *Store) SetUserPassword(ctx context.Context, subject string, hash []byte) error {
	return s.updateUser(ctx, "set user password", subject, func(u *storage.User) error {
		u.PasswordHash = slices.Clone(hash)
		return nil
	})
}

// UpgradePasswordHash replaces the hash if it is still oldHash, in one
// critical section; UpdatedAt stays.
func (s *Store) UpgradePasswordHash(ctx context.Context, subject string, oldHash, newHash []byte) (bool, error) {
	var ok bool
	s.tx(func() {
		old, found := s.users[subject]
		if !found || !bytes.Equal(old.PasswordHash, oldHash) {
			return
		}
		u := *cloneUser(old)
		u.PasswordHash = slices.Clone(newHash)
		s.users[subject] = u
		s.record(ctx, func() { s.users[subject] = old })
		ok = true
	})
	return ok, nil
}

// SetUserDisabled sets or clears Disabled, or returns storage.ErrNotFound.
func (s *Store) SetUserDisabled(ctx context.Context, subject string, disabled bool) error {
	return s.updateUser(ctx, "set user disabled", subject, func(u *storage.User) error {
		u.Disabled = disabled
		return nil
	})
}

// DeleteUser deletes the user with its sessions and consents, or returns
// storage.ErrNotFound.
func (s *Store) DeleteUser(ctx context.Context, subject string) error {
	var err error
	s.tx(func() {
		old, ok := s.users[subject]
		if !ok {
			err = fmt.Errorf("memory: delete user: %w", storage.ErrNotFound)
			return
		}
		delete(s.users, subject)
		s.record(ctx, func() { s.users[subject] = old })
		s.endSessions(ctx, subject)
		s.deleteConsents(ctx, func(k consentKey) bool { return k.subject == subject })
		s.deleteLinks(ctx, subject)
		s.markTokensPending(subject)
		s.deletePasskeys(ctx, subject)
		s.deleteFactors(ctx, subject)
	})
	return err
}

// RevokeSubject ends the subject's sessions and auth sessions and
// deactivates its codes and tokens in one critical section.
func (s *Store) RevokeSubject(ctx context.Context, subject string) error {
	s.tx(func() {
		s.endSessions(ctx, subject)
		s.revokeIssued(ctx, func(rec storage.Record) bool { return rec.Subject == subject })
	})
	return nil
}

// revokeIssued deactivates every active code and token whose record
// matches, and marks their grants revoked so that a rotation under way
// mints an inactive pair (as RevokeRefreshToken does). Callers hold s.mu.
func (s *Store) revokeIssued(ctx context.Context, match func(storage.Record) bool) {
	for _, t := range []table{s.codes, s.refresh, s.access} {
		for sig, e := range t {
			if e.active && match(e.rec) {
				e.active = false
				s.setEntry(ctx, t, sig, e)
				if id := e.rec.RequestID; !s.revokedGrants[id] {
					s.revokedGrants[id] = true
					s.record(ctx, func() { delete(s.revokedGrants, id) })
				}
			}
		}
	}
	for key, r := range s.replays {
		if !r.Revoked && match(storage.Record{RequestID: r.RequestID, ClientID: r.ClientID, Subject: r.Subject}) {
			s.setReplay(ctx, key, func(r *storage.ReplayRecord) { r.Revoked = true })
		}
	}
}
