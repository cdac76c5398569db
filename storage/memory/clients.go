package memory

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

// cloneClient is a deep copy of c with its times normalized as PostgreSQL
// stores them.
func cloneClient(c *storage.Client) storage.Client {
	cp := *c.Clone()
	cp.CreatedAt = storage.NormalizeTime(c.CreatedAt)
	cp.UpdatedAt = storage.NormalizeTime(c.UpdatedAt)
	return cp
}

// LockClient reports whether the client exists. The memory store applies
// each write under one mutex and has no row locks, so concurrent
// read-modify-writes of one client can still interleave here (dev only).
func (s *Store) LockClient(_ context.Context, id string) error {
	var ok bool
	s.tx(func() { _, ok = s.clients[id] })
	if !ok {
		return fmt.Errorf("memory: client %q: %w", id, storage.ErrNotFound)
	}
	return nil
}

// GetClient returns a copy of the client with the given id (a
// *storage.Client), or an error matching storage.ErrNotFound.
func (s *Store) GetClient(_ context.Context, id string) (fosite.Client, error) {
	var (
		c  storage.Client
		ok bool
	)
	s.tx(func() {
		var stored storage.Client
		if stored, ok = s.clients[id]; ok {
			c = cloneClient(&stored)
		}
	})
	if !ok {
		return nil, fmt.Errorf("memory: client %q: %w", id, storage.ErrNotFound)
	}
	return &c, nil
}

// CreateClient stores a copy of c, setting c.CreatedAt and c.UpdatedAt to
// now when zero. It returns storage.ErrAlreadyExists if c.ID is taken.
func (s *Store) CreateClient(ctx context.Context, c *storage.Client) error {
	now := storage.NormalizeTime(s.now())
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = now
	}
	c.CreatedAt, c.UpdatedAt = storage.NormalizeTime(c.CreatedAt), storage.NormalizeTime(c.UpdatedAt)
	var err error
	s.tx(func() {
		if _, ok := s.clients[c.ID]; ok {
			err = fmt.Errorf("memory: client %q: %w", c.ID, storage.ErrAlreadyExists)
			return
		}
		s.clients[c.ID] = cloneClient(c)
		id := c.ID
		s.record(ctx, func() { delete(s.clients, id) })
	})
	return err
}

// UpdateClient replaces the stored client with a copy of c, keeping the
// stored CreatedAt and setting UpdatedAt to now when c.UpdatedAt is zero;
// both are written back into c. It returns storage.ErrNotFound if no client
// has c.ID.
func (s *Store) UpdateClient(ctx context.Context, c *storage.Client) error {
	now := storage.NormalizeTime(s.now())
	var err error
	s.tx(func() {
		old, ok := s.clients[c.ID]
		if !ok {
			err = fmt.Errorf("memory: client %q: %w", c.ID, storage.ErrNotFound)
			return
		}
		c.CreatedAt = old.CreatedAt
		if c.UpdatedAt.IsZero() {
			c.UpdatedAt = now
		}
		c.UpdatedAt = storage.NormalizeTime(c.UpdatedAt)
		s.clients[c.ID] = cloneClient(c)
		id := c.ID
		s.record(ctx, func() { s.clients[id] = old })
	})
	return err
}

// DeleteClient deletes the client together with every code, token and PKCE
// session issued to it (the PostgreSQL backend's ON DELETE CASCADE), in one
// critical section. It returns storage.ErrNotFound if no such client exists.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	var err error
	s.tx(func() {
		old, ok := s.clients[id]
		if !ok {
			err = fmt.Errorf("memory: client %q: %w", id, storage.ErrNotFound)
			return
		}
		delete(s.clients, id)
		s.record(ctx, func() { s.clients[id] = old })
		for _, t := range []table{s.codes, s.access, s.refresh, s.pkce, s.par} {
			for sig, e := range t {
				if e.rec.ClientID == id {
					s.deleteEntry(ctx, t, sig)
				}
			}
		}
		for key, r := range s.replays {
			if r.ClientID == id {
				delete(s.replays, key)
				s.record(ctx, func() { s.replays[key] = r })
			}
		}
		s.deleteConsents(ctx, func(k consentKey) bool { return k.client == id })
	})
	return err
}

// ListClients returns copies of up to limit clients with ID > after, ordered
// by ID. A limit <= 0 means no limit.
func (s *Store) ListClients(_ context.Context, after string, limit int) ([]*storage.Client, error) {
	var out []*storage.Client
	s.tx(func() {
		ids := make([]string, 0, len(s.clients))
		for id := range s.clients {
			if id > after {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		if limit > 0 && len(ids) > limit {
			ids = ids[:limit]
		}
		out = make([]*storage.Client, 0, len(ids))
		for _, id := range ids {
			c := s.clients[id]
			cp := cloneClient(&c)
			out = append(out, &cp)
		}
	})
	return out, nil
}

// ClientAssertionJWTValid returns fosite.ErrJTIKnown if jti was marked used
// and has not expired yet, else nil.
func (s *Store) ClientAssertionJWTValid(_ context.Context, jti string) error {
	var err error
	s.tx(func() {
		if exp, ok := s.jtis[jti]; ok && exp.After(s.now()) {
			err = fosite.ErrJTIKnown
		}
	})
	return err
}

// SetClientAssertionJWT marks jti as used until exp, after forgetting expired
// JTIs. It returns fosite.ErrJTIKnown if jti is already marked and unexpired.
func (s *Store) SetClientAssertionJWT(ctx context.Context, jti string, exp time.Time) error {
	var err error
	s.tx(func() {
		now := s.now()
		for j, e := range s.jtis {
			if !e.After(now) {
				delete(s.jtis, j)
			}
		}
		if _, ok := s.jtis[jti]; ok {
			err = fosite.ErrJTIKnown
			return
		}
		s.jtis[jti] = exp
		s.record(ctx, func() { delete(s.jtis, jti) })
	})
	return err
}
