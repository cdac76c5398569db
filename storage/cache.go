package storage

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ory/fosite"
)

// CachingStore is a Store that caches clients, and nothing else: it saves
// the client read of every token request without changing who decides
// anything (docs/architecture.md, "Invariants"), and no protocol rule
// depends on whether it is on.
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
	d.PostLogoutRedirectURIs = slices.Clone(c.PostLogoutRedirectURIs)
	return &d
}
