// Package memory is an in-process storage.Store for `authd dev` and tests.
//
// All state sits behind one mutex; every method runs its body inside
// s.tx(func()) like dex's memory storage. Requests are stored as encoded
// storage.Records and clients and users as copies, so no caller object is
// ever aliased.
//
// Transactions (BeginTX/Commit/Rollback) keep an undo log: writes apply
// immediately and Rollback undoes them in reverse order. Isolation is
// therefore "read uncommitted": other callers see a transaction's writes
// before it commits, and a rollback restores the values the transaction
// overwrote even if another caller changed them meanwhile. Single-use
// operations are still atomic (each is one critical section), which is what
// the conformance suite checks. Nested BeginTX calls act like savepoints.
//
// One row lock is emulated, as PostgreSQL's row lock behaves for the
// conditional writes that decide a race: a code redeemed (or a refresh token
// rotated) inside a transaction stays locked until that transaction ends, and
// a concurrent redemption of it from another transaction waits for the end
// before it answers. The loser of a redemption race therefore sees the
// winner's replay record (docs/architecture.md, "The exchange").
package memory

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"
	"github.com/ory/fosite/handler/pkce"
	fositestorage "github.com/ory/fosite/storage"

	"github.com/authd/authd/storage"
)

var (
	_ storage.Store                 = (*Store)(nil)
	_ fosite.Storage                = (*Store)(nil)
	_ fosite.ClientManager          = (*Store)(nil)
	_ oauth2.CoreStorage            = (*Store)(nil)
	_ oauth2.TokenRevocationStorage = (*Store)(nil)
	_ pkce.PKCERequestStorage       = (*Store)(nil)
	_ fositestorage.Transactional   = (*Store)(nil)
)

// entry is a stored code, token or PKCE session.
type entry struct {
	rec             storage.Record
	expiresAt       time.Time
	active          bool
	accessSignature string // refresh tokens only
}

// table is one kind of request-bearing row, keyed by signature.
type table map[string]entry

// Store is an in-memory storage.Store. The zero value is not usable; call New.
type Store struct {
	mu      sync.Mutex
	clients map[string]storage.Client
	users   map[string]storage.User // by subject (users.go)
	// sessions by ID and consents by subject and client (sessions.go,
	// consents.go).
	sessions map[string]storage.Session
	consents map[consentKey]storage.Consent
	jtis     map[string]time.Time

	codes   table
	access  table
	refresh table
	pkce    table
	par     table // pushed authorization requests (RFC 9126)

	// revokedGrants are request IDs whose refresh token was revoked
	// (RFC 7009 §2.1); tokens minted for them later are born inactive.
	revokedGrants map[string]bool

	// idempotency holds Idempotency-Key records (idempotency.go); it is
	// created on first claim.
	idempotency idempotencyTable

	// replays holds the durable replay records (replay.go).
	replays map[string]storage.ReplayRecord
	// signingKeys, oldest generation first (signingkeys.go).
	signingKeys []storage.SigningKey
	// rowLocks maps a redeemed code or rotated refresh token ("c:" or "r:"
	// + signature) to the root transaction that holds it; unlock wakes
	// the waiters through cond.
	rowLocks map[string]*memTx
	cond     *sync.Cond

	now func() time.Time
}

// New returns an empty Store.
func New() *Store {
	s := &Store{
		clients: map[string]storage.Client{},
		users:   map[string]storage.User{},

		sessions: map[string]storage.Session{},
		consents: map[consentKey]storage.Consent{},
		jtis:     map[string]time.Time{},
		codes:    table{},
		access:   table{},
		refresh:  table{},
		pkce:     table{},
		par:      table{},
		now:      time.Now,

		revokedGrants: map[string]bool{},
		replays:       map[string]storage.ReplayRecord{},
		rowLocks:      map[string]*memTx{},
	}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// tx runs f with the store locked.
func (s *Store) tx(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// ---- transactions ----

type txKey struct{}

// memTx is an open transaction: an undo log, possibly nested in a parent.
type memTx struct {
	store  *Store
	parent *memTx
	undo   []func() // guarded by store.mu
	done   bool     // guarded by store.mu
}

// txFrom returns the open transaction of this store carried by ctx, or nil.
func (s *Store) txFrom(ctx context.Context) *memTx {
	t, _ := ctx.Value(txKey{}).(*memTx)
	if t == nil || t.store != s {
		return nil
	}
	return t
}

// record registers an undo step with the transaction in ctx, if any.
// Callers hold s.mu.
func (s *Store) record(ctx context.Context, undo func()) {
	if t := s.txFrom(ctx); t != nil && !t.done {
		t.undo = append(t.undo, undo)
	}
}

// setEntry writes e into t[sig], recording how to undo it. Callers hold s.mu.
func (s *Store) setEntry(ctx context.Context, t table, sig string, e entry) {
	old, had := t[sig]
	t[sig] = e
	s.record(ctx, func() {
		if had {
			t[sig] = old
		} else {
			delete(t, sig)
		}
	})
}

// deleteEntry removes t[sig], recording how to undo it. Callers hold s.mu.
func (s *Store) deleteEntry(ctx context.Context, t table, sig string) bool {
	old, had := t[sig]
	if !had {
		return false
	}
	delete(t, sig)
	s.record(ctx, func() { t[sig] = old })
	return true
}

// BeginTX starts a transaction and returns a context carrying it. Calling
// BeginTX with a context that already carries a transaction of this store
// starts a nested one (a savepoint). It never fails.
func (s *Store) BeginTX(ctx context.Context) (context.Context, error) {
	return context.WithValue(ctx, txKey{}, &memTx{store: s, parent: s.txFrom(ctx)}), nil
}

// Commit makes the writes of the transaction in ctx permanent (for a nested
// transaction: hands them to its parent). It returns an error if ctx carries
// no open transaction of this store.
func (s *Store) Commit(ctx context.Context) error {
	t := s.txFrom(ctx)
	if t == nil {
		return errors.New("memory: commit: no transaction in context")
	}
	var err error
	s.tx(func() {
		if t.done {
			err = errors.New("memory: commit: transaction already finished")
			return
		}
		t.done = true
		if t.parent != nil && !t.parent.done {
			t.parent.undo = append(t.parent.undo, t.undo...)
		}
		t.undo = nil
		s.unlockRows(t)
	})
	return err
}

// Rollback undoes the writes of the transaction in ctx. Rolling back a
// finished transaction is a no-op. It returns an error if ctx carries no
// transaction of this store.
func (s *Store) Rollback(ctx context.Context) error {
	t := s.txFrom(ctx)
	if t == nil {
		return errors.New("memory: rollback: no transaction in context")
	}
	var err error
	s.tx(func() {
		if t.done {
			return // like pgx: rolling back a finished transaction is a no-op
		}
		t.done = true
		for i := len(t.undo) - 1; i >= 0; i-- {
			t.undo[i]()
		}
		t.undo = nil
		s.unlockRows(t)
	})
	return err
}

// Ping always succeeds.
func (s *Store) Ping(context.Context) error { return nil }

// ---- clients ----

// cloneClient is a deep copy of c with its times normalized as PostgreSQL
// stores them.
func cloneClient(c *storage.Client) storage.Client {
	cp := *c.Clone()
	cp.CreatedAt = storage.NormalizeTime(c.CreatedAt)
	cp.UpdatedAt = storage.NormalizeTime(c.UpdatedAt)
	return cp
}

// GetClient returns a copy of the client as a *storage.Client, or an error
// matching storage.ErrNotFound.
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

// GetClient returns the client with the given id.
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

// ---- requests (codes, tokens, PKCE) ----

// create encodes r and stores it in t under sig. It returns
// storage.ErrNotFound if r's client does not exist and
// storage.ErrAlreadyExists if sig is taken.
func (s *Store) create(ctx context.Context, kind string, t table, sig string, r fosite.Requester, exp fosite.TokenType, accessSig string) error {
	rec, err := storage.EncodeRequest(r)
	if err != nil {
		return fmt.Errorf("memory: create %s: %w", kind, err)
	}
	e := entry{rec: rec, expiresAt: storage.ExpiresAt(r, exp), active: true, accessSignature: accessSig}
	s.tx(func() {
		if (exp == fosite.AccessToken || exp == fosite.RefreshToken) && s.revokedGrants[rec.RequestID] {
			e.active = false // minted for a grant revoked meanwhile
		}
		if _, ok := s.clients[rec.ClientID]; !ok {
			err = fmt.Errorf("memory: create %s: client %q: %w", kind, rec.ClientID, storage.ErrNotFound)
			return
		}
		if _, ok := t[sig]; ok {
			err = fmt.Errorf("memory: create %s: %w", kind, storage.ErrAlreadyExists)
			return
		}
		s.setEntry(ctx, t, sig, e)
	})
	return err
}

// get returns the decoded request stored under sig in t, with its client
// rehydrated, and whether it is active. It returns storage.ErrNotFound if
// the row or its client is missing.
func (s *Store) get(kind string, t table, sig string, session fosite.Session) (*fosite.Request, bool, error) {
	sr, err := s.stored(kind, t, sig)
	if err != nil {
		return nil, false, err
	}
	req, err := sr.Record.Decode(sr.Client, session)
	if err != nil {
		return nil, false, fmt.Errorf("memory: get %s: %w", kind, err)
	}
	return req, sr.Active, nil
}

// stored returns the row of t under sig, undecoded, with its client; a
// missing row or client is storage.ErrNotFound.
func (s *Store) stored(kind string, t table, sig string) (*storage.StoredRequest, error) {
	var (
		e      entry
		client storage.Client
		ok     bool
	)
	s.tx(func() {
		if e, ok = t[sig]; !ok {
			return
		}
		e.rec = e.rec.Clone()
		var c storage.Client
		if c, ok = s.clients[e.rec.ClientID]; ok {
			client = cloneClient(&c)
		}
	})
	if !ok {
		return nil, fmt.Errorf("memory: get %s: %w", kind, storage.ErrNotFound)
	}
	return &storage.StoredRequest{Record: e.rec, Client: &client, Active: e.active}, nil
}

// deactivateByRequest marks every row of t with request ID id inactive.
// Callers hold s.mu.
func (s *Store) deactivateByRequest(ctx context.Context, t table, id string) {
	for sig, e := range t {
		if e.rec.RequestID == id && e.active {
			e.active = false
			s.setEntry(ctx, t, sig, e)
		}
	}
}

// CreatePARRequest implements storage.PARStore.
func (s *Store) CreatePARRequest(ctx context.Context, sig string, r fosite.Requester) error {
	return s.create(ctx, "pushed authorization request", s.par, sig, r, fosite.PushedAuthorizeRequestContext, "")
}

// GetPARRequest implements storage.PARStore.
func (s *Store) GetPARRequest(_ context.Context, sig string, session fosite.Session) (fosite.Requester, bool, error) {
	return s.get("pushed authorization request", s.par, sig, session)
}

// UsePARRequest implements storage.PARStore: exactly one caller marks an
// unused request used.
func (s *Store) UsePARRequest(ctx context.Context, sig string) error {
	var err error
	s.tx(func() {
		e, ok := s.par[sig]
		switch {
		case !ok:
			err = fmt.Errorf("memory: use pushed authorization request: %w", storage.ErrNotFound)
		case !e.active:
			err = storage.ErrInactiveToken
		default:
			e.active = false
			s.setEntry(ctx, s.par, sig, e)
		}
	})
	return err
}

// CreateAuthorizeCodeSession stores req under the code signature sig.
// It returns storage.ErrAlreadyExists if sig is taken and
// storage.ErrNotFound if the request's client does not exist.
func (s *Store) CreateAuthorizeCodeSession(ctx context.Context, sig string, req fosite.Requester) error {
	return s.create(ctx, "authorize code", s.codes, sig, req, fosite.AuthorizeCode, "")
}

// GetAuthorizeCodeSession returns the request stored under sig, decoding its
// session into session. For a redeemed code it returns the request AND
// storage.ErrInvalidatedAuthorizeCode; for a missing one storage.ErrNotFound.
func (s *Store) GetAuthorizeCodeSession(_ context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	req, active, err := s.get("authorize code", s.codes, sig, session)
	if err != nil {
		return nil, err
	}
	if !active {
		return req, storage.ErrInvalidatedAuthorizeCode
	}
	return req, nil
}

// InvalidateAuthorizeCodeSession marks the code inactive if it is active.
// It returns storage.ErrInvalidatedAuthorizeCode if the code was already
// inactive and storage.ErrNotFound if it does not exist.
func (s *Store) InvalidateAuthorizeCodeSession(ctx context.Context, sig string) error {
	var err error
	s.tx(func() {
		s.waitRow(ctx, "c:"+sig)
		e, ok := s.codes[sig]
		switch {
		case !ok:
			err = fmt.Errorf("memory: invalidate authorize code: %w", storage.ErrNotFound)
		case !e.active:
			err = storage.ErrInvalidatedAuthorizeCode
		default:
			e.active = false
			s.setEntry(ctx, s.codes, sig, e)
			s.lockRow(ctx, "c:"+sig)
		}
	})
	return err
}

// CreateAccessTokenSession stores req under the access token signature sig.
// It returns storage.ErrAlreadyExists if sig is taken and
// storage.ErrNotFound if the request's client does not exist.
func (s *Store) CreateAccessTokenSession(ctx context.Context, sig string, req fosite.Requester) error {
	return s.create(ctx, "access token", s.access, sig, req, fosite.AccessToken, "")
}

// GetAccessTokenSession returns the request stored under sig. For a revoked
// token it returns the request AND storage.ErrInactiveToken; for a missing
// one storage.ErrNotFound.
func (s *Store) GetAccessTokenSession(_ context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	req, active, err := s.get("access token", s.access, sig, session)
	if err != nil {
		return nil, err
	}
	if !active {
		return req, storage.ErrInactiveToken
	}
	return req, nil
}

// DeleteAccessTokenSession deletes the access token. Deleting a missing
// token is not an error (fosite's reuse handling may race with itself).
func (s *Store) DeleteAccessTokenSession(ctx context.Context, sig string) error {
	s.tx(func() { s.deleteEntry(ctx, s.access, sig) })
	return nil
}

// CreateRefreshTokenSession stores req under the refresh token signature
// sig, remembering the signature of the access token issued with it. It
// returns storage.ErrAlreadyExists if sig is taken and storage.ErrNotFound
// if the request's client does not exist.
func (s *Store) CreateRefreshTokenSession(ctx context.Context, sig, accessSig string, req fosite.Requester) error {
	return s.create(ctx, "refresh token", s.refresh, sig, req, fosite.RefreshToken, accessSig)
}

// GetRefreshTokenSession returns the request stored under sig. For a
// rotated or revoked token it returns the request AND
// storage.ErrInactiveToken; for a missing one storage.ErrNotFound.
func (s *Store) GetRefreshTokenSession(_ context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	req, active, err := s.get("refresh token", s.refresh, sig, session)
	if err != nil {
		return nil, err
	}
	if !active {
		return req, storage.ErrInactiveToken
	}
	return req, nil
}

// DeleteRefreshTokenSession deletes the refresh token. Deleting a missing
// token is not an error.
func (s *Store) DeleteRefreshTokenSession(ctx context.Context, sig string) error {
	s.tx(func() { s.deleteEntry(ctx, s.refresh, sig) })
	return nil
}

// RotateRefreshToken marks the refresh token sig inactive, if it is active,
// and every access token of requestID inactive. It returns
// storage.ErrInactiveToken if the refresh token was already inactive (a lost
// rotation race) and storage.ErrNotFound if it does not exist; in both cases
// nothing is changed.
func (s *Store) RotateRefreshToken(ctx context.Context, requestID, sig string) error {
	var err error
	s.tx(func() {
		s.waitRow(ctx, "r:"+sig)
		e, ok := s.refresh[sig]
		switch {
		case !ok:
			err = fmt.Errorf("memory: rotate refresh token: %w", storage.ErrNotFound)
		case !e.active:
			err = storage.ErrInactiveToken
		default:
			e.active = false
			s.setEntry(ctx, s.refresh, sig, e)
			s.deactivateByRequest(ctx, s.access, requestID)
			s.lockRow(ctx, "r:"+sig)
		}
	})
	return err
}

// RevokeRefreshToken marks every refresh token of requestID inactive
// (RFC 7009 §2.1). It succeeds when there is none.
func (s *Store) RevokeRefreshToken(ctx context.Context, requestID string) error {
	s.tx(func() {
		s.deactivateByRequest(ctx, s.refresh, requestID)
		s.revokeReplays(ctx, requestID)
		// Revoking a refresh token revokes the grant (RFC 7009 §2.1): a
		// rotation already under way must not leave its new pair active.
		s.revokedGrants[requestID] = true
	})
	return nil
}

// RevokeAccessToken marks every access token of requestID inactive
// (RFC 7009 §2.1). It succeeds when there is none.
func (s *Store) RevokeAccessToken(ctx context.Context, requestID string) error {
	s.tx(func() {
		s.deactivateByRequest(ctx, s.access, requestID)
		s.revokeReplays(ctx, requestID)
	})
	return nil
}

// CreatePKCERequestSession stores req under the code signature sig. It
// returns storage.ErrAlreadyExists if sig is taken and storage.ErrNotFound
// if the request's client does not exist.
func (s *Store) CreatePKCERequestSession(ctx context.Context, sig string, req fosite.Requester) error {
	return s.create(ctx, "pkce session", s.pkce, sig, req, fosite.AuthorizeCode, "")
}

// GetPKCERequestSession returns the request stored under sig, or
// storage.ErrNotFound.
func (s *Store) GetPKCERequestSession(_ context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	req, _, err := s.get("pkce session", s.pkce, sig, session)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// DeletePKCERequestSession deletes the PKCE session. It returns
// storage.ErrNotFound if there was nothing to delete, so of concurrent
// callers exactly one succeeds.
func (s *Store) DeletePKCERequestSession(ctx context.Context, sig string) error {
	var ok bool
	s.tx(func() { ok = s.deleteEntry(ctx, s.pkce, sig) })
	if !ok {
		return fmt.Errorf("memory: delete pkce session: %w", storage.ErrNotFound)
	}
	return nil
}
