package memory

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/authd/authd/storage"
)

var _ storage.PasskeyStore = (*Store)(nil)

// passkeyTables are the passkey rows, keyed by string(bytes).
type passkeyTables struct {
	keys       map[string]storage.Passkey
	ceremonies map[string]storage.Ceremony
	links      map[string]passkeyLink
}

type passkeyLink struct {
	subject string
	expires time.Time
}

// pk returns the tables, creating them. Callers hold s.mu.
func (s *Store) pk() *passkeyTables {
	t := &s.passkeys
	if t.keys == nil {
		t.keys = map[string]storage.Passkey{}
		t.ceremonies = map[string]storage.Ceremony{}
		t.links = map[string]passkeyLink{}
	}
	return t
}

func clonePasskey(p storage.Passkey) *storage.Passkey {
	p.ID, p.PublicKey, p.AAGUID = slices.Clone(p.ID), slices.Clone(p.PublicKey), slices.Clone(p.AAGUID)
	p.Transports = slices.Clone(p.Transports)
	return &p
}

// setPasskey writes (or with del, deletes) a passkey with its undo. Callers
// hold s.mu.
func (s *Store) setPasskey(ctx context.Context, id string, p storage.Passkey, del bool) {
	t := s.pk()
	old, had := t.keys[id]
	if del {
		delete(t.keys, id)
	} else {
		t.keys[id] = p
	}
	s.record(ctx, func() {
		if had {
			t.keys[id] = old
		} else {
			delete(t.keys, id)
		}
	})
}

// deletePasskeys deletes the subject's passkeys and links (DeleteUser).
// Callers hold s.mu.
func (s *Store) deletePasskeys(ctx context.Context, subject string) {
	t := s.pk()
	for id, p := range t.keys {
		if p.Subject == subject {
			s.setPasskey(ctx, id, p, true)
		}
	}
	for h, l := range t.links {
		if l.subject == subject {
			delete(t.links, h)
			s.record(ctx, func() { t.links[h] = l })
		}
	}
}

// PutCeremony stores a ceremony's state.
func (s *Store) PutCeremony(ctx context.Context, c *storage.Ceremony) error {
	var err error
	s.tx(func() {
		t, k := s.pk(), string(c.Key)
		if _, dup := t.ceremonies[k]; dup {
			err = fmt.Errorf("memory: put ceremony: %w", storage.ErrAlreadyExists)
			return
		}
		cp := *c
		cp.Key, cp.Binding, cp.Data = slices.Clone(c.Key), slices.Clone(c.Binding), slices.Clone(c.Data)
		t.ceremonies[k] = cp
		s.record(ctx, func() { delete(t.ceremonies, k) })
	})
	return err
}

// TakeCeremony deletes and returns an unexpired ceremony.
func (s *Store) TakeCeremony(ctx context.Context, key []byte, now time.Time) (*storage.Ceremony, error) {
	var (
		c  storage.Ceremony
		ok bool
	)
	s.tx(func() {
		t, k := s.pk(), string(key)
		c, ok = t.ceremonies[k]
		if !ok {
			return
		}
		delete(t.ceremonies, k)
		s.record(ctx, func() { t.ceremonies[k] = c })
		ok = c.ExpiresAt.After(now)
	})
	if !ok {
		return nil, fmt.Errorf("memory: take ceremony: %w", storage.ErrNotFound)
	}
	return &c, nil
}

// TakeCeremonyPasskey is TakeCeremony, then GetPasskeyUser.
func (s *Store) TakeCeremonyPasskey(ctx context.Context, key []byte, now time.Time, id []byte) (*storage.Ceremony, *storage.Passkey, *storage.User, error) {
	c, err := s.TakeCeremony(ctx, key, now)
	if err != nil {
		return nil, nil, nil, err
	}
	p, u, err := s.GetPasskeyUser(ctx, id)
	if err != nil {
		return c, nil, nil, nil // storage.ErrNotFound: no such passkey
	}
	return c, p, u, nil
}

// DeleteExpiredCeremonies deletes up to limit expired ceremonies.
func (s *Store) DeleteExpiredCeremonies(ctx context.Context, now time.Time, limit int) (int, error) {
	n := 0
	s.tx(func() {
		t := s.pk()
		for k, c := range t.ceremonies {
			if n == limit {
				return
			}
			if !c.ExpiresAt.After(now) {
				delete(t.ceremonies, k)
				n++
			}
		}
	})
	return n, nil
}

// CreatePasskey inserts a copy of p.
func (s *Store) CreatePasskey(ctx context.Context, p *storage.Passkey) error {
	if p.CreatedAt.IsZero() {
		p.CreatedAt = s.now()
	}
	p.CreatedAt = storage.NormalizeTime(p.CreatedAt)
	var err error
	s.tx(func() {
		t, id := s.pk(), string(p.ID)
		if _, dup := t.keys[id]; dup {
			err = fmt.Errorf("memory: create passkey: %w", storage.ErrAlreadyExists)
			return
		}
		if _, ok := s.users[p.Subject]; !ok {
			err = fmt.Errorf("memory: create passkey: %w", storage.ErrNotFound)
			return
		}
		s.setPasskey(ctx, id, *clonePasskey(*p), false)
	})
	return err
}

// GetPasskeyUser returns copies of the passkey and its user.
func (s *Store) GetPasskeyUser(_ context.Context, id []byte) (*storage.Passkey, *storage.User, error) {
	var (
		p *storage.Passkey
		u *storage.User
	)
	s.tx(func() {
		if x, ok := s.pk().keys[string(id)]; ok {
			if y, ok := s.users[x.Subject]; ok {
				p, u = clonePasskey(x), cloneUser(y)
			}
		}
	})
	if p == nil {
		return nil, nil, fmt.Errorf("memory: get passkey: %w", storage.ErrNotFound)
	}
	return p, u, nil
}

// ListPasskeys returns copies of the subject's passkeys, oldest first.
func (s *Store) ListPasskeys(_ context.Context, subject string) ([]*storage.Passkey, error) {
	var out []*storage.Passkey
	s.tx(func() {
		for _, p := range s.pk().keys {
			if p.Subject == subject {
				out = append(out, clonePasskey(p))
			}
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return bytes.Compare(out[i].ID, out[j].ID) < 0
	})
	return out, nil
}

// RenamePasskey sets a passkey's name.
func (s *Store) RenamePasskey(ctx context.Context, subject string, id []byte, name string) error {
	var ok bool
	s.tx(func() {
		p, found := s.pk().keys[string(id)]
		if ok = found && p.Subject == subject; ok {
			p.Name = name
			s.setPasskey(ctx, string(id), p, false)
		}
	})
	if !ok {
		return fmt.Errorf("memory: rename passkey: %w", storage.ErrNotFound)
	}
	return nil
}

// UsePasskey records a use or disables the passkey, in one critical section.
func (s *Store) UsePasskey(ctx context.Context, id []byte, count uint32, backupState bool, now time.Time) (storage.PasskeyUse, error) {
	var (
		use   storage.PasskeyUse
		found bool
	)
	now = storage.NormalizeTime(now)
	s.tx(func() {
		p, ok := s.pk().keys[string(id)]
		if found = ok && p.DisabledAt.IsZero(); !found {
			return
		}
		if count > p.SignCount || (count == 0 && p.SignCount == 0) {
			p.SignCount, p.BackupState, p.LastUsedAt = count, backupState, now
			use = storage.PasskeyUsed
		} else {
			p.DisabledAt = now
			use = storage.PasskeyCloned
		}
		s.setPasskey(ctx, string(id), p, false)
	})
	if !found {
		return 0, fmt.Errorf("memory: use passkey: %w", storage.ErrNotFound)
	}
	return use, nil
}

// otherWayIn reports whether the subject keeps a password or an enabled
// passkey other than except. Callers hold s.mu.
func (s *Store) otherWayIn(subject, except string) bool {
	if u, ok := s.users[subject]; ok && len(u.PasswordHash) > 0 {
		return true
	}
	for id, p := range s.pk().keys {
		if p.Subject == subject && id != except && p.DisabledAt.IsZero() {
			return true
		}
	}
	return false
}

// DeletePasskey deletes a passkey unless it is the user's last way in.
func (s *Store) DeletePasskey(ctx context.Context, subject string, id []byte) error {
	var err error
	s.tx(func() {
		p, ok := s.pk().keys[string(id)]
		switch {
		case !ok || p.Subject != subject:
			err = fmt.Errorf("memory: delete passkey: %w", storage.ErrNotFound)
		case !s.otherWayIn(subject, string(id)):
			err = fmt.Errorf("memory: delete passkey: %w", storage.ErrLastMethod)
		default:
			s.setPasskey(ctx, string(id), p, true)
		}
	})
	return err
}

// RemoveUserPassword clears the password if an enabled passkey remains.
func (s *Store) RemoveUserPassword(ctx context.Context, subject string) error {
	var err error
	s.tx(func() {
		u, ok := s.users[subject]
		if !ok {
			err = fmt.Errorf("memory: remove password: %w", storage.ErrNotFound)
			return
		}
		saved := u.PasswordHash
		u.PasswordHash = nil
		s.users[subject] = u
		if !s.otherWayIn(subject, "") {
			u.PasswordHash = saved
			s.users[subject] = u
			err = fmt.Errorf("memory: remove password: %w", storage.ErrLastMethod)
			return
		}
		u.UpdatedAt = storage.NormalizeTime(s.now())
		s.users[subject] = u
		old := u
		old.PasswordHash = saved
		s.record(ctx, func() { s.users[subject] = old })
	})
	return err
}

// PutPasskeyLink stores an enrolment link's hash.
func (s *Store) PutPasskeyLink(ctx context.Context, tokenHash []byte, subject string, expires time.Time) error {
	var err error
	s.tx(func() {
		if _, ok := s.users[subject]; !ok {
			err = fmt.Errorf("memory: put passkey link: %w", storage.ErrNotFound)
			return
		}
		t, h := s.pk(), string(tokenHash)
		t.links[h] = passkeyLink{subject: subject, expires: expires}
		s.record(ctx, func() { delete(t.links, h) })
	})
	return err
}

// GetPasskeyLink returns an unexpired link's subject.
func (s *Store) GetPasskeyLink(_ context.Context, tokenHash []byte, now time.Time) (string, error) {
	var l passkeyLink
	s.tx(func() { l = s.pk().links[string(tokenHash)] })
	if l.subject == "" || !l.expires.After(now) {
		return "", fmt.Errorf("memory: get passkey link: %w", storage.ErrNotFound)
	}
	return l.subject, nil
}

// TakePasskeyLink deletes an unexpired link and returns its subject.
func (s *Store) TakePasskeyLink(ctx context.Context, tokenHash []byte, now time.Time) (string, error) {
	var l passkeyLink
	s.tx(func() {
		t, h := s.pk(), string(tokenHash)
		l = t.links[h]
		if l.subject == "" {
			return
		}
		delete(t.links, h)
		s.record(ctx, func() { t.links[h] = l })
	})
	if l.subject == "" || !l.expires.After(now) {
		return "", fmt.Errorf("memory: take passkey link: %w", storage.ErrNotFound)
	}
	return l.subject, nil
}

// deleteExpiredLinks deletes up to limit links expired at before.
func (s *Store) deleteExpiredLinks(ctx context.Context, before time.Time, limit int) (int, error) {
	n := 0
	s.tx(func() {
		t := s.pk()
		for h, l := range t.links {
			if n == limit {
				return
			}
			if l.expires.Before(before) {
				delete(t.links, h)
				s.record(ctx, func() { t.links[h] = l })
				n++
			}
		}
	})
	return n, nil
}
