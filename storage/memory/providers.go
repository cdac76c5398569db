package memory

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/authd/authd/storage"
)

var _ storage.ProviderStore = (*Store)(nil)

// fedTables holds the providers, the identities linked through them and
// the consumed subject tokens; created on first use.
type fedTables struct {
	providers map[string]storage.Provider
	links     map[[2]string]storage.FederatedIdentity
	consumed  map[string]time.Time
	logins    map[string]storage.FederationLogin
	tokens    map[[2]string]*memProviderToken
	version   int64
}

// fedT returns the tables. Callers hold s.mu.
func (s *Store) fedT() *fedTables {
	if s.fed == nil {
		s.fed = &fedTables{providers: map[string]storage.Provider{},
			links: map[[2]string]storage.FederatedIdentity{}, consumed: map[string]time.Time{},
			logins: map[string]storage.FederationLogin{}, tokens: map[[2]string]*memProviderToken{}}
	}
	return s.fed
}

func cloneProvider(p storage.Provider) *storage.Provider {
	p.Sealed = slices.Clone(p.Sealed)
	p.Scopes = slices.Clone(p.Scopes)
	p.NativeAudiences = slices.Clone(p.NativeAudiences)
	return &p
}

// CreateProvider inserts p.
func (s *Store) CreateProvider(ctx context.Context, p *storage.Provider) error {
	var err error
	s.tx(func() {
		t := s.fedT()
		if _, ok := t.providers[p.ID]; ok {
			err = fmt.Errorf("memory: create provider: %w", storage.ErrAlreadyExists)
			return
		}
		now := storage.NormalizeTime(s.now())
		p.CreatedAt, p.UpdatedAt = now, now
		t.providers[p.ID] = *cloneProvider(*p)
		t.version++
		s.record(ctx, func() { delete(t.providers, p.ID); t.version++ })
	})
	return err
}

// GetProvider returns the provider id.
func (s *Store) GetProvider(_ context.Context, id string) (*storage.Provider, error) {
	var out *storage.Provider
	s.tx(func() {
		if p, ok := s.fedT().providers[id]; ok {
			out = cloneProvider(p)
		}
	})
	if out == nil {
		return nil, fmt.Errorf("memory: get provider: %w", storage.ErrNotFound)
	}
	return out, nil
}

// UpdateProvider replaces the provider p.ID.
func (s *Store) UpdateProvider(ctx context.Context, p *storage.Provider) error {
	var err error
	s.tx(func() {
		t := s.fedT()
		old, ok := t.providers[p.ID]
		if !ok {
			err = fmt.Errorf("memory: update provider: %w", storage.ErrNotFound)
			return
		}
		p.CreatedAt, p.UpdatedAt = old.CreatedAt, storage.NormalizeTime(s.now())
		t.providers[p.ID] = *cloneProvider(*p)
		t.version++
		s.record(ctx, func() { t.providers[p.ID] = old; t.version++ })
	})
	return err
}

// DeleteProvider deletes the provider id.
func (s *Store) DeleteProvider(ctx context.Context, id string) error {
	var err error
	s.tx(func() {
		t := s.fedT()
		old, ok := t.providers[id]
		if !ok {
			err = fmt.Errorf("memory: delete provider: %w", storage.ErrNotFound)
			return
		}
		delete(t.providers, id)
		t.version++
		s.record(ctx, func() { t.providers[id] = old; t.version++ })
	})
	return err
}

// ListProviders returns up to limit providers after after (limit <= 0: all).
func (s *Store) ListProviders(_ context.Context, after string, limit int) ([]*storage.Provider, error) {
	out := []*storage.Provider{}
	s.tx(func() {
		for id, p := range s.fedT().providers {
			if id > after {
				out = append(out, cloneProvider(p))
			}
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ProvidersVersion counts the changes.
func (s *Store) ProvidersVersion(context.Context) (string, error) {
	var v int64
	s.tx(func() { v = s.fedT().version })
	return fmt.Sprint(v), nil
}

// GetFederatedIdentity returns the link of (issuer, sub).
func (s *Store) GetFederatedIdentity(_ context.Context, issuer, sub string) (*storage.FederatedIdentity, error) {
	var out *storage.FederatedIdentity
	s.tx(func() {
		if f, ok := s.fedT().links[[2]string{issuer, sub}]; ok {
			out = &f
		}
	})
	if out == nil {
		return nil, fmt.Errorf("memory: get federated identity: %w", storage.ErrNotFound)
	}
	return out, nil
}

// LinkFederatedIdentity inserts the link unless the pair is linked. The
// pair's emulated row lock makes a concurrent insert wait for the first
// transaction's end, as PostgreSQL's unique index does.
func (s *Store) LinkFederatedIdentity(ctx context.Context, f *storage.FederatedIdentity) (bool, error) {
	var (
		ok  bool
		err error
	)
	k := [2]string{f.Issuer, f.Sub}
	s.tx(func() {
		s.waitRow(ctx, "f:"+f.Issuer+"\x00"+f.Sub)
		t := s.fedT()
		if _, taken := t.links[k]; taken {
			return
		}
		if _, exists := s.users[f.Subject]; !exists {
			err = fmt.Errorf("memory: link federated identity: %w", storage.ErrNotFound)
			return
		}
		if f.CreatedAt.IsZero() {
			f.CreatedAt = storage.NormalizeTime(s.now())
		}
		t.links[k] = *f
		s.lockRow(ctx, "f:"+f.Issuer+"\x00"+f.Sub)
		s.record(ctx, func() { delete(t.links, k) })
		ok = true
	})
	return ok, err
}

// ListFederatedIdentities returns the links of subject.
func (s *Store) ListFederatedIdentities(_ context.Context, subject string) ([]*storage.FederatedIdentity, error) {
	var out []*storage.FederatedIdentity
	s.tx(func() {
		for _, f := range s.fedT().links {
			if f.Subject == subject {
				out = append(out, &f)
			}
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].Issuer+"\x00"+out[i].Sub < out[j].Issuer+"\x00"+out[j].Sub
	})
	return out, nil
}

// UnlinkFederatedIdentity deletes one link of subject.
func (s *Store) UnlinkFederatedIdentity(ctx context.Context, subject, issuer, sub string) error {
	var err error
	k := [2]string{issuer, sub}
	s.tx(func() {
		t := s.fedT()
		old, ok := t.links[k]
		if !ok || old.Subject != subject {
			err = fmt.Errorf("memory: unlink federated identity: %w", storage.ErrNotFound)
			return
		}
		delete(t.links, k)
		left := s.otherWayIn(subject, "") // a password, an enabled passkey, another link
		t.links[k] = old
		if !left {
			err = fmt.Errorf("memory: unlink federated identity: %w", storage.ErrLastWayIn)
			return
		}
		delete(t.links, k)
		s.record(ctx, func() { t.links[k] = old })
	})
	return err
}

// deleteLinks deletes the links of subject (the user is deleted). Callers
// hold s.mu.
func (s *Store) deleteLinks(ctx context.Context, subject string) {
	t := s.fedT()
	for k, f := range t.links {
		if f.Subject == subject {
			delete(t.links, k)
			s.record(ctx, func() { t.links[k] = f })
		}
	}
}

// GetUserByVerifiedEmail returns the one user with this verified email.
func (s *Store) GetUserByVerifiedEmail(_ context.Context, email string) (*storage.User, error) {
	var found []*storage.User
	s.tx(func() {
		for _, u := range s.users {
			if u.EmailVerified && u.Email != "" && strings.EqualFold(u.Email, email) {
				found = append(found, cloneUser(u))
			}
		}
	})
	if len(found) != 1 {
		return nil, fmt.Errorf("memory: get user by verified email: %w", storage.ErrNotFound)
	}
	return found[0], nil
}

// ConsumeSubjectToken records the key; a concurrent consumption waits for
// the first transaction's end (the emulated row lock).
func (s *Store) ConsumeSubjectToken(ctx context.Context, key string, expiresAt time.Time) (bool, error) {
	ok := false
	s.tx(func() {
		s.waitRow(ctx, "x:"+key)
		t := s.fedT()
		if _, taken := t.consumed[key]; taken {
			return
		}
		t.consumed[key] = expiresAt
		s.lockRow(ctx, "x:"+key)
		s.record(ctx, func() { delete(t.consumed, key) })
		ok = true
	})
	return ok, nil
}

// DeleteExpiredSubjectTokens deletes expired consumed-token rows.
func (s *Store) DeleteExpiredSubjectTokens(_ context.Context, now time.Time, limit int) (int, error) {
	n := 0
	s.tx(func() {
		for k, exp := range s.fedT().consumed {
			if n >= limit {
				return
			}
			if exp.Before(now) {
				delete(s.fed.consumed, k)
				n++
			}
		}
	})
	return n, nil
}

// CreateFederationLogin stores a sign-in in flight.
func (s *Store) CreateFederationLogin(ctx context.Context, l *storage.FederationLogin) error {
	var err error
	s.tx(func() {
		t := s.fedT()
		if _, ok := t.logins[l.Key]; ok {
			err = fmt.Errorf("memory: create federation login: %w", storage.ErrAlreadyExists)
			return
		}
		c := *l
		c.Sealed = slices.Clone(l.Sealed)
		t.logins[l.Key] = c
		s.record(ctx, func() { delete(t.logins, l.Key) })
	})
	return err
}

// TakeFederationLogin deletes and returns the sign-in.
func (s *Store) TakeFederationLogin(ctx context.Context, key, browser string, now time.Time) (*storage.FederationLogin, error) {
	var out *storage.FederationLogin
	s.tx(func() {
		t := s.fedT()
		l, ok := t.logins[key]
		if !ok || l.Browser != browser || !l.ExpiresAt.After(now) {
			return
		}
		delete(t.logins, key)
		s.record(ctx, func() { t.logins[key] = l })
		out = &l
	})
	if out == nil {
		return nil, fmt.Errorf("memory: take federation login: %w", storage.ErrNotFound)
	}
	return out, nil
}

// deleteExpiredLogins deletes sign-ins that expired before before.
func (s *Store) deleteExpiredLogins(before time.Time, limit int) int {
	n := 0
	s.tx(func() {
		for k, l := range s.fedT().logins {
			if n >= limit {
				return
			}
			if l.ExpiresAt.Before(before) {
				delete(s.fed.logins, k)
				n++
			}
		}
	})
	return n
}

type memProviderToken struct {
	t       storage.ProviderToken
	pending bool
	next    time.Time
}

// SaveProviderToken upserts the token of (issuer, sub).
func (s *Store) SaveProviderToken(_ context.Context, t *storage.ProviderToken) error {
	s.tx(func() {
		k := [2]string{t.Issuer, t.Sub}
		if old, ok := s.fedT().tokens[k]; ok && old.pending {
			return
		}
		c := *t
		c.Sealed = slices.Clone(t.Sealed)
		s.fedT().tokens[k] = &memProviderToken{t: c}
	})
	return nil
}

// markTokensPending queues the revocation of subject's tokens. Callers
// hold s.mu.
func (s *Store) markTokensPending(subject string) {
	for _, t := range s.fedT().tokens {
		if t.t.Subject == subject && !t.pending {
			t.pending, t.next = true, s.now()
		}
	}
}

// ClaimProviderRevocations returns the due pending tokens.
func (s *Store) ClaimProviderRevocations(_ context.Context, now time.Time, limit int) ([]*storage.ProviderToken, error) {
	var out []*storage.ProviderToken
	s.tx(func() {
		for _, t := range s.fedT().tokens {
			if len(out) < limit && t.pending && !t.next.After(now) {
				c := t.t
				out = append(out, &c)
			}
		}
	})
	return out, nil
}

// FinishProviderRevocation deletes the token or schedules its retry.
func (s *Store) FinishProviderRevocation(_ context.Context, issuer, sub string, retryAt *time.Time) error {
	s.tx(func() {
		k := [2]string{issuer, sub}
		if retryAt == nil {
			delete(s.fedT().tokens, k)
		} else if t, ok := s.fedT().tokens[k]; ok {
			t.t.Attempts++
			t.next = *retryAt
		}
	})
	return nil
}
