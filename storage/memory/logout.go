package memory

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"time"

	"github.com/authd/authd/storage"
)

var _ storage.LogoutStore = (*Store)(nil)

// newUUID returns a random (version 4) UUID, as PostgreSQL's
// gen_random_uuid.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24).
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// NoteSessionClient records clientID for the session; a no-op when it is
// there or the session is unknown. authd notes a client with TouchSession;
// this is the tests' way (storagetest.BackendMethods).
func (s *Store) NoteSessionClient(ctx context.Context, sessionID, clientID string) error {
	s.tx(func() {
		if _, ok := s.sessions[sessionID]; ok {
			s.noteClient(ctx, sessionID, clientID)
		}
	})
	return nil
}

// noteClient adds clientID to the session's clients, once; under s.tx.
func (s *Store) noteClient(ctx context.Context, sessionID, clientID string) {
	old := s.rpClients[sessionID]
	if slices.Contains(old, clientID) {
		return
	}
	s.rpClients[sessionID] = append(slices.Clone(old), clientID)
	s.record(ctx, func() { s.rpClients[sessionID] = old })
}

// queueLogouts writes one delivery per (ended session, noted client with a
// backchannel_logout_uri), all with one new event ID, and forgets the
// sessions' clients. Callers hold s.mu and have deleted the sessions.
func (s *Store) queueLogouts(ctx context.Context, ended []storage.Session) {
	if len(ended) == 0 {
		return
	}
	event := newUUID()
	now := storage.NormalizeTime(s.now())
	n := len(s.logouts)
	for _, x := range ended {
		clients := s.rpClients[x.ID]
		delete(s.rpClients, x.ID)
		s.record(ctx, func() { s.rpClients[x.ID] = clients })
		for _, id := range clients {
			c, ok := s.clients[id]
			if !ok || c.BackchannelLogoutURI == "" {
				continue
			}
			s.logouts = append(s.logouts, &storage.LogoutDelivery{ID: int64(len(s.logouts) + 1), EventID: event,
				ClientID: id, Subject: x.Subject, SID: x.ID, JTI: newUUID(), Status: storage.LogoutPending,
				RunAt: now, CreatedAt: now})
		}
	}
	s.record(ctx, func() { s.logouts = s.logouts[:n] })
}

// signOutClient queues a back-channel logout of clientID for every session
// of subject it was noted in, and forgets it there (RevokeConsent). Callers
// hold s.mu.
func (s *Store) signOutClient(ctx context.Context, subject, clientID string) {
	c, ok := s.clients[clientID]
	event := newUUID()
	now := storage.NormalizeTime(s.now())
	n := len(s.logouts)
	for id, x := range s.sessions {
		old := s.rpClients[id]
		if x.Subject != subject || !slices.Contains(old, clientID) {
			continue
		}
		s.rpClients[id] = slices.DeleteFunc(slices.Clone(old), func(c string) bool { return c == clientID })
		s.record(ctx, func() { s.rpClients[id] = old })
		if ok && c.BackchannelLogoutURI != "" {
			s.logouts = append(s.logouts, &storage.LogoutDelivery{ID: int64(len(s.logouts) + 1), EventID: event,
				ClientID: clientID, Subject: subject, SID: id, JTI: newUUID(), Status: storage.LogoutPending,
				RunAt: now, CreatedAt: now})
		}
	}
	s.record(ctx, func() { s.logouts = s.logouts[:n] })
}

// withClient returns a copy of d with its client's URI and alg.
func (s *Store) withClient(d *storage.LogoutDelivery) *storage.LogoutDelivery {
	cp := *d
	c := s.clients[d.ClientID]
	cp.URI, cp.Alg = c.BackchannelLogoutURI, c.IDTokenSignedResponseAlg
	return &cp
}

// ClaimLogoutDeliveries claims due pending deliveries (storage.LogoutStore).
func (s *Store) ClaimLogoutDeliveries(_ context.Context, worker string, limit int, d time.Duration, skip []string) ([]*storage.LogoutDelivery, error) {
	out := []*storage.LogoutDelivery{}
	s.tx(func() {
		now := s.now()
		due := []*storage.LogoutDelivery{}
		for _, x := range s.logouts {
			if x.Status == storage.LogoutPending && !x.RunAt.After(now) && !x.LeaseUntil.After(now) &&
				!slices.Contains(skip, x.ClientID) {
				if _, ok := s.clients[x.ClientID]; ok {
					due = append(due, x)
				}
			}
		}
		slices.SortStableFunc(due, func(a, b *storage.LogoutDelivery) int { return a.RunAt.Compare(b.RunAt) })
		for _, x := range due[:min(limit, len(due))] {
			if !x.LeaseUntil.IsZero() {
				x.LastError = fmt.Sprintf("attempt %d: lease of %s expired", x.Attempts, x.LockedBy)
			}
			x.LockedBy, x.Attempts, x.LeaseUntil = worker, x.Attempts+1, storage.NormalizeTime(now.Add(d))
			out = append(out, s.withClient(x))
		}
	})
	return out, nil
}

// held returns the delivery of l if l is valid. Callers hold s.mu.
func (s *Store) held(l storage.LogoutLease) *storage.LogoutDelivery {
	if l.ID < 1 || int(l.ID) > len(s.logouts) {
		return nil
	}
	x := s.logouts[l.ID-1]
	if x.LockedBy != l.Worker || x.Attempts != l.Attempt || x.Status != storage.LogoutPending || !x.LeaseUntil.After(s.now()) {
		return nil
	}
	return x
}

// ExtendLogoutLeases renews the valid leases of ls.
func (s *Store) ExtendLogoutLeases(_ context.Context, ls []storage.LogoutLease, d time.Duration) ([]int64, error) {
	var lost []int64
	s.tx(func() {
		for _, l := range ls {
			if x := s.held(l); x != nil {
				x.LeaseUntil = storage.NormalizeTime(s.now().Add(d))
			} else {
				lost = append(lost, l.ID)
			}
		}
	})
	return lost, nil
}

// FinishLogoutDelivery records an attempt's outcome if l is valid.
func (s *Store) FinishLogoutDelivery(_ context.Context, l storage.LogoutLease, status storage.LogoutStatus, errMsg string, retryIn time.Duration) error {
	var err error
	s.tx(func() {
		x := s.held(l)
		if x == nil {
			err = fmt.Errorf("memory: finish logout delivery %d: %w", l.ID, storage.ErrLeaseLost)
			return
		}
		now := storage.NormalizeTime(s.now())
		x.Status, x.LeaseUntil = status, time.Time{}
		if errMsg != "" {
			x.LastError = errMsg
		}
		if status == storage.LogoutPending {
			x.RunAt = storage.NormalizeTime(now.Add(retryIn))
		} else {
			x.FinishedAt = now
		}
	})
	return err
}

// ListLogoutDeliveries returns the deliveries matching f, newest first.
func (s *Store) ListLogoutDeliveries(_ context.Context, f storage.LogoutFilter) ([]*storage.LogoutDelivery, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	out := []*storage.LogoutDelivery{}
	s.tx(func() {
		for i := len(s.logouts) - 1; i >= 0 && len(out) < limit; i-- {
			x := s.logouts[i]
			if _, ok := s.clients[x.ClientID]; ok && (f.Status == "" || x.Status == f.Status) {
				out = append(out, s.withClient(x))
			}
		}
	})
	return out, nil
}

// CountPendingLogoutDeliveries counts pending deliveries.
func (s *Store) CountPendingLogoutDeliveries(context.Context) (int, error) {
	n := 0
	s.tx(func() {
		for _, x := range s.logouts {
			if _, ok := s.clients[x.ClientID]; ok && x.Status == storage.LogoutPending {
				n++
			}
		}
	})
	return n, nil
}

// deleteFinishedLogouts forgets up to limit deliveries finished before
// before. IDs index s.logouts, so a forgotten row keeps its slot, emptied.
func (s *Store) deleteFinishedLogouts(_ context.Context, before time.Time, limit int) int {
	n := 0
	s.tx(func() {
		for _, x := range s.logouts {
			if n == limit {
				return
			}
			if x.Status != storage.LogoutPending && x.ClientID != "" && x.FinishedAt.Before(before) {
				*x = storage.LogoutDelivery{ID: x.ID, Status: x.Status, FinishedAt: x.FinishedAt}
				n++
			}
		}
	})
	return n
}
