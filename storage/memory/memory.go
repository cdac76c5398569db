// Package memory is an in-process storage.Store for `authd dev` and tests.
//
// All state sits behind one mutex; every method runs its body inside
// s.tx(func()) like dex's memory storage. Requests are stored as encoded
// storage.Record values and clients and users as copies, so no caller object is
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
// winner's replay record (docs/architecture.md, "The exchange"). The same
// lock holds a session touched inside a transaction (TouchSession), so a
// session ends only after the transactions that touched it: a client noted
// by one that commits gets its back-channel logout. Other rows (an
// auth_session, a linked account, a token exchange) use it too.
package memory

import (
	"context"
	"errors"
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

	// rpClients and logouts: the clients noted per session and the
	// back-channel logout outbox (logout.go).
	rpClients map[string][]string
	logouts   []*storage.LogoutDelivery

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

	// authSessions are the challenge endpoint's sessions (authsessions.go).
	authSessions map[string]storage.AuthSession

	// replays holds the durable replay records (replay.go).
	replays map[string]storage.ReplayRecord
	// signingKeys, oldest generation first (signingkeys.go).
	signingKeys []storage.SigningKey
	// passkeys, their ceremonies and enrolment links (passkeys.go),
	// created on first use.
	passkeys passkeyTables
	// factorT holds second factors (factors.go).
	factorT factorTables
	// rowLocks maps a locked row (a redeemed code or rotated refresh token,
	// "c:" or "r:" + signature; a touched session, "s:" + ID; …) to the
	// root transaction that holds it; unlock wakes the waiters through cond.
	rowLocks map[string]*memTx
	cond     *sync.Cond
	// outbox holds the mail outbox, its job queue and the pending
	// self-service flows (outbox.go); created on first use.
	outbox *outboxState

	// fed holds upstream providers and their links (providers.go).
	fed *fedTables

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

		rpClients: map[string][]string{},

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
