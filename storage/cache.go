package storage

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/ory/fosite"
)

// CachingStore is a Store that saves database round trips on the hot paths
// without changing who decides anything (design.md, principle 1):
//
//   - GetClient answers from a short-lived in-process cache of clients.
//     Writes made through this store (CreateClient, UpdateClient,
//     DeleteClient) drop the entry at once and keep the client out of the
//     cache for one TTL, so a write still inside an uncommitted transaction
//     cannot be hidden by an entry re-cached meanwhile. Inside a transaction
//     begun through this store, GetClient always reads the backend. Another
//     authd process sees a change after at most one TTL: a rotated secret
//     or a removed redirect URI keeps working there that long. Tokens are
//     never issued to a deleted client: their rows reference the client and
//     the insert fails. Absent clients are never cached.
//   - Within one token request (a context from WithRequestMemo), the second
//     GetAuthorizeCodeSession of the same code is answered from the first:
//     fosite reads the code in HandleTokenEndpointRequest and again in
//     PopulateTokenEndpointResponse. The code is still redeemed by the
//     conditional UPDATE in InvalidateAuthorizeCodeSession, which alone
//     decides a race, so nothing is read that decides anything. The PKCE
//     session is deleted in the redeeming transaction (one write
//     transaction per exchange).
//
// Every other method goes straight to the wrapped Store.
type CachingStore struct {
	Store
	ttl time.Duration
	now func() time.Time

	mu      sync.RWMutex
	entries map[string]clientEntry
}

// maxCachedClients bounds the cache; past it, the cache starts over.
const maxCachedClients = 10000

type clientEntry struct {
	client  *Client   // nil: not cached
	expires time.Time // client is fresh until then
	// bypassUntil: after a write through this store, read the backend
	// until then.
	bypassUntil time.Time
}

// NewCachingStore wraps s; clients are cached for ttl (a few seconds).
func NewCachingStore(s Store, ttl time.Duration) *CachingStore {
	return &CachingStore{Store: s, ttl: ttl, now: time.Now, entries: map[string]clientEntry{}}
}

type cachingTxKey struct{}

// BeginTX starts a transaction on the wrapped store and marks the context,
// so GetClient inside it reads the backend.
func (c *CachingStore) BeginTX(ctx context.Context) (context.Context, error) {
	tctx, err := c.Store.BeginTX(ctx)
	if err != nil {
		return tctx, err
	}
	return context.WithValue(tctx, cachingTxKey{}, true), nil
}

// GetClient returns the client, from the cache when fresh. The caller gets
// its own copy.
func (c *CachingStore) GetClient(ctx context.Context, id string) (fosite.Client, error) {
	if ctx.Value(cachingTxKey{}) != nil {
		return c.Store.GetClient(ctx, id)
	}
	now := c.now()
	c.mu.RLock()
	e, ok := c.entries[id]
	c.mu.RUnlock()
	if ok && e.client != nil && now.Before(e.expires) {
		return e.client.Clone(), nil
	}
	if ok && now.Before(e.bypassUntil) {
		return c.Store.GetClient(ctx, id)
	}
	fc, err := c.Store.GetClient(ctx, id)
	if err != nil {
		return nil, err
	}
	cl, ok := fc.(*Client)
	if !ok {
		return fc, nil
	}
	c.mu.Lock()
	if cur := c.entries[id]; !now.Before(cur.bypassUntil) {
		if len(c.entries) >= maxCachedClients {
			c.entries = map[string]clientEntry{}
		}
		c.entries[id] = clientEntry{client: cl.Clone(), expires: now.Add(c.ttl)}
	}
	c.mu.Unlock()
	return cl, nil
}

// forget drops id and keeps it out of the cache for one TTL.
func (c *CachingStore) forget(id string) {
	c.mu.Lock()
	c.entries[id] = clientEntry{bypassUntil: c.now().Add(c.ttl)}
	c.mu.Unlock()
}

// CreateClient creates the client on the wrapped store.
func (c *CachingStore) CreateClient(ctx context.Context, cl *Client) error {
	c.forget(cl.ID)
	return c.Store.CreateClient(ctx, cl)
}

// UpdateClient updates the client on the wrapped store and drops it from
// the cache.
func (c *CachingStore) UpdateClient(ctx context.Context, cl *Client) error {
	c.forget(cl.ID)
	err := c.Store.UpdateClient(ctx, cl)
	c.forget(cl.ID)
	return err
}

// DeleteClient deletes the client on the wrapped store and drops it from
// the cache.
func (c *CachingStore) DeleteClient(ctx context.Context, id string) error {
	c.forget(id)
	err := c.Store.DeleteClient(ctx, id)
	c.forget(id)
	return err
}

// Clone returns a deep copy of c: no slice is shared with c.
func (c *Client) Clone() *Client {
	d := *c
	d.SecretHash = slices.Clone(c.SecretHash)
	d.RedirectURIs = slices.Clone(c.RedirectURIs)
	d.GrantTypes = slices.Clone(c.GrantTypes)
	d.ResponseTypes = slices.Clone(c.ResponseTypes)
	d.Scopes = slices.Clone(c.Scopes)
	d.Contacts = slices.Clone(c.Contacts)
	return &d
}

// ---- request memo ----

type memoKey struct{}

// requestMemo holds the codes read during one token request, and the PKCE
// sessions already deleted in its transaction.
type requestMemo struct {
	mu          sync.Mutex
	codes       map[string]memoCode
	pkceDeleted map[string]bool
}

type memoCode struct {
	rec    Record
	client fosite.Client
}

// WithRequestMemo returns a context for one token request: a CachingStore
// answers a repeated GetAuthorizeCodeSession of an active code made with it
// (or a context derived from it) from the first answer.
func WithRequestMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, memoKey{}, &requestMemo{codes: map[string]memoCode{}, pkceDeleted: map[string]bool{}})
}

// GetAuthorizeCodeSession reads the code, or within a request memo repeats
// the first successful read of it: a fresh request, with the stored
// session decoded again into session, as the backend does.
func (c *CachingStore) GetAuthorizeCodeSession(ctx context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	m, _ := ctx.Value(memoKey{}).(*requestMemo)
	if m != nil {
		m.mu.Lock()
		mc, ok := m.codes[sig]
		m.mu.Unlock()
		if ok {
			return mc.rec.Decode(mc.client, session)
		}
	}
	req, err := c.Store.GetAuthorizeCodeSession(ctx, sig, session)
	if err != nil || m == nil {
		return req, err
	}
	// Snapshot now, before fosite changes the request or its session.
	if rec, eerr := EncodeRequest(req); eerr == nil {
		m.mu.Lock()
		m.codes[sig] = memoCode{rec: rec.Clone(), client: req.GetClient()}
		m.mu.Unlock()
	}
	return req, nil
}

// InvalidateAuthorizeCodeSession redeems the code on the wrapped store (the
// conditional write that decides) and forgets it from the request memo.
//
// Within a request memo and a transaction (fosite's redemption), a code
// that was redeemed has its PKCE session deleted in the same transaction,
// so an exchange is exactly one write transaction: before, the PKCE
// handler deleted it after the commit, in a transaction (and a WAL flush)
// of its own. The PKCE check has passed by then (fosite runs every
// handler's check before any handler issues tokens), so a wrong verifier
// still never consumes a code; if the transaction rolls back, the session
// comes back with the code. The PKCE handler's later delete is then
// answered without a round trip.
func (c *CachingStore) InvalidateAuthorizeCodeSession(ctx context.Context, sig string) error {
	m, _ := ctx.Value(memoKey{}).(*requestMemo)
	if m != nil {
		m.mu.Lock()
		delete(m.codes, sig)
		m.mu.Unlock()
	}
	if err := c.Store.InvalidateAuthorizeCodeSession(ctx, sig); err != nil {
		return err
	}
	if m == nil || ctx.Value(cachingTxKey{}) == nil {
		return nil
	}
	err := c.Store.DeletePKCERequestSession(ctx, sig)
	switch {
	case err == nil:
		m.mu.Lock()
		m.pkceDeleted[sig] = true
		m.mu.Unlock()
	case errors.Is(err, ErrNotFound):
		// Nothing to delete (a code issued without PKCE is refused before
		// this point; the janitor may have removed an expired session).
	default:
		return err
	}
	return nil
}

// DeletePKCERequestSession deletes the PKCE session, unless this request's
// transaction already did (see InvalidateAuthorizeCodeSession).
func (c *CachingStore) DeletePKCERequestSession(ctx context.Context, sig string) error {
	if m, _ := ctx.Value(memoKey{}).(*requestMemo); m != nil {
		m.mu.Lock()
		done := m.pkceDeleted[sig]
		delete(m.pkceDeleted, sig)
		m.mu.Unlock()
		if done {
			return nil
		}
	}
	return c.Store.DeletePKCERequestSession(ctx, sig)
}
