package memory

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/authd/authd/storage"
)

type consentKey struct{ subject, client string }

func cloneConsent(c storage.Consent) *storage.Consent {
	c.Scopes = slices.Clone(c.Scopes)
	if c.Scopes == nil {
		c.Scopes = []string{}
	}
	return &c
}

// GetConsent returns a copy of the consent, or storage.ErrNotFound.
func (s *Store) GetConsent(_ context.Context, subject, clientID string) (*storage.Consent, error) {
	var out *storage.Consent
	s.tx(func() {
		if c, ok := s.consents[consentKey{subject, clientID}]; ok {
			out = cloneConsent(c)
		}
	})
	if out == nil {
		return nil, fmt.Errorf("memory: get consent: %w", storage.ErrNotFound)
	}
	return out, nil
}

// GrantConsent adds scopes to the consent, creating it if needed.
func (s *Store) GrantConsent(ctx context.Context, subject, clientID string, scopes []string) error {
	var err error
	s.tx(func() {
		if _, ok := s.users[subject]; !ok {
			err = fmt.Errorf("memory: grant consent: user: %w", storage.ErrNotFound)
			return
		}
		if _, ok := s.clients[clientID]; !ok {
			err = fmt.Errorf("memory: grant consent: client: %w", storage.ErrNotFound)
			return
		}
		k := consentKey{subject, clientID}
		old, had := s.consents[k]
		now := storage.NormalizeTime(s.now())
		c := storage.Consent{Subject: subject, ClientID: clientID, GrantedAt: now}
		if had {
			c = *cloneConsent(old)
		}
		c.UpdatedAt = now
		c.Scopes = append(c.Scopes, scopes...)
		slices.Sort(c.Scopes)
		c.Scopes = slices.Compact(c.Scopes)
		if c.Scopes == nil {
			c.Scopes = []string{}
		}
		s.consents[k] = c
		s.record(ctx, func() {
			if had {
				s.consents[k] = old
			} else {
				delete(s.consents, k)
			}
		})
	})
	return err
}

// ListConsents returns the subject's consents by client ID.
func (s *Store) ListConsents(_ context.Context, subject string) ([]*storage.Consent, error) {
	var out []*storage.Consent
	s.tx(func() {
		for k, c := range s.consents {
			if k.subject == subject {
				out = append(out, cloneConsent(c))
			}
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ClientID < out[j].ClientID })
	return out, nil
}

// RevokeConsent deletes the consent and deactivates the subject's codes and
// tokens for the client, in one critical section.
func (s *Store) RevokeConsent(ctx context.Context, subject, clientID string) error {
	found := false
	s.tx(func() {
		s.signOutClient(ctx, subject, clientID)
		found = s.deleteConsents(ctx, func(k consentKey) bool { return k == consentKey{subject, clientID} }) > 0
		s.revokeIssued(ctx, func(rec storage.Record) bool { return rec.Subject == subject && rec.ClientID == clientID })
	})
	if !found {
		return fmt.Errorf("memory: revoke consent: %w", storage.ErrNotFound)
	}
	return nil
}

// deleteConsents deletes the consents whose key matches. Callers hold s.mu.
func (s *Store) deleteConsents(ctx context.Context, match func(consentKey) bool) int {
	n := 0
	for k, c := range s.consents {
		if match(k) {
			delete(s.consents, k)
			s.record(ctx, func() { s.consents[k] = c })
			n++
		}
	}
	return n
}
