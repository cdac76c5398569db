package federation

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/authd/authd/clientadmin"
	"github.com/authd/authd/idempotency"
	"github.com/authd/authd/pagecursor"
	"github.com/authd/authd/secrets"
	"github.com/authd/authd/storage"
)

// AdminStore is what Admin needs of storage.
type AdminStore interface {
	idempotency.Store
	CreateProvider(ctx context.Context, p *storage.Provider) error
	GetProvider(ctx context.Context, id string) (*storage.Provider, error)
	UpdateProvider(ctx context.Context, p *storage.Provider) error
	DeleteProvider(ctx context.Context, id string) error
	ListProviders(ctx context.Context, after string, limit int) ([]*storage.Provider, error)
}

// The audit names of the operations.
const (
	ActionCreate = "provider.create"
	ActionUpdate = "provider.update"
	ActionGet    = "provider.get"
	ActionList   = "provider.list"
	ActionDelete = "provider.delete"
)

// MaxListLimit is the largest page of a list.
const MaxListLimit = 200

// Admin is the operator's provider operations, behind `authd providers`
// and /admin/providers… alike. Writes run through the Idempotency-Key
// engine; secrets are sealed before they are stored and never shown.
type Admin struct {
	store  AdminStore
	idem   *idempotency.Engine
	seal   cipher.AEAD
	issuer string
	log    *slog.Logger
}

// NewAdmin returns the operations. issuer is authd's (redirect_uri).
func NewAdmin(secret []byte, issuer string, store AdminStore, idem *idempotency.Engine, log *slog.Logger) *Admin {
	if log == nil {
		log = slog.Default()
	}
	return &Admin{store: store, idem: idem, seal: secrets.NewAEAD(secret, sealPurpose), issuer: issuer, log: log}
}

// sealPurpose derives the key provider secrets are sealed under.
const sealPurpose = "authd provider secrets v1"

// sealSecret seals a secret with the provider id as additional data, so a
// sealed value copied to another row does not open.
func sealSecret(aead cipher.AEAD, id, secret string) []byte {
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, []byte(secret), []byte("provider:"+id))
}

// openSecret opens a sealed secret of provider id.
func openSecret(aead cipher.AEAD, id string, sealed []byte) (string, error) {
	if len(sealed) < aead.NonceSize() {
		return "", errors.New("federation: sealed secret too short")
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte("provider:"+id))
	if err != nil {
		return "", fmt.Errorf("federation: sealed secret of %s does not open (another AUTHD_SECRET?)", id)
	}
	return string(plain), nil
}

// Result is a write's answer: the provider and its JSON, what an
// Idempotency-Key stores and a retry gets back byte for byte.
type Result struct {
	Provider *Info
	JSON     []byte
	Replayed bool
}

// Create registers a provider.
func (a *Admin) Create(ctx context.Context, caller idempotency.Caller, key string, in *Input) (*Result, error) {
	if err := in.normalize(nil); err != nil {
		return nil, a.finish(ctx, caller, ActionCreate, in.ID, key, false, err)
	}
	return a.write(ctx, caller, ActionCreate, "POST /admin/providers", idempotency.OutcomeCreated, key, in, func(ctx context.Context) (*storage.Provider, error) {
		p := a.record(in, nil)
		if err := a.store.CreateProvider(ctx, p); err != nil {
			if errors.Is(err, storage.ErrAlreadyExists) {
				return nil, invalid("A provider with this id exists already.")
			}
			return nil, err
		}
		return p, nil
	})
}

// Update replaces provider id; omitted secrets are kept.
func (a *Admin) Update(ctx context.Context, caller idempotency.Caller, id, key string, in *Input) (*Result, error) {
	if in.ID == "" {
		in.ID = id
	}
	if in.ID != id {
		return nil, a.finish(ctx, caller, ActionUpdate, id, key, false, invalid("The id in the body differs from the provider's."))
	}
	return a.write(ctx, caller, ActionUpdate, "PUT /admin/providers/"+id, idempotency.OutcomeOK, key, in, func(ctx context.Context) (*storage.Provider, error) {
		old, err := a.store.GetProvider(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := in.normalize(old); err != nil {
			return nil, err
		}
		p := a.record(in, old)
		if err := a.store.UpdateProvider(ctx, p); err != nil {
			return nil, err
		}
		return p, nil
	})
}

// record builds the stored provider of in, sealing its secret (or keeping
// old's when in has none and the kind is the same).
func (a *Admin) record(in *Input, old *storage.Provider) *storage.Provider {
	p := &storage.Provider{
		ID: in.ID, Kind: in.Kind, Issuer: in.Issuer, ClientID: in.ClientID, TeamID: in.TeamID, KeyID: in.KeyID,
		Scopes: in.Scopes, DisplayName: in.DisplayName, NativeAudiences: in.NativeAudiences,
		LinkByVerifiedEmail: in.LinkByVerifiedEmail,
	}
	switch secret := in.ClientSecret + in.PrivateKey; {
	case secret != "":
		p.Sealed = sealSecret(a.seal, in.ID, secret)
	case old != nil && (old.Kind == KindApple) == (in.Kind == KindApple):
		p.Sealed = old.Sealed
	}
	return p
}

// write runs one write through the engine.
func (a *Admin) write(ctx context.Context, caller idempotency.Caller, action, endpoint string, outcome int, key string, in *Input,
	do func(ctx context.Context) (*storage.Provider, error)) (*Result, error) {
	canonical, err := json.Marshal(in)
	if err == nil {
		canonical, err = idempotency.CanonicalJSON(canonical)
	}
	if err != nil {
		return nil, a.finish(ctx, caller, action, in.ID, key, false, invalid("The body is not valid JSON."))
	}
	var info *Info
	w, err := a.idem.Run(ctx, idempotency.Write{
		Caller: caller, Endpoint: endpoint, Outcome: outcome, Key: key, Request: canonical,
		// The body may carry a client secret or a private key.
		Confidential: in.ClientSecret != "" || in.PrivateKey != "",
		Do: func(ctx context.Context) ([]byte, error) {
			p, err := do(ctx)
			if err != nil {
				return nil, err
			}
			info = a.info(p)
			return encode(info)
		},
	})
	if err != nil {
		return nil, a.finish(ctx, caller, action, in.ID, key, false, err)
	}
	if w.Replayed {
		info = new(Info)
		if err := json.Unmarshal(w.Answer, info); err != nil {
			return nil, a.finish(ctx, caller, action, in.ID, key, false, fmt.Errorf("federation: stored answer: %w", err))
		}
	}
	return &Result{Provider: info, JSON: w.Answer, Replayed: w.Replayed}, a.finish(ctx, caller, action, in.ID, key, w.Replayed, nil)
}

func encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Get returns provider id.
func (a *Admin) Get(ctx context.Context, caller idempotency.Caller, id string) (*Info, error) {
	p, err := a.store.GetProvider(ctx, id)
	if err != nil {
		return nil, a.finish(ctx, caller, ActionGet, id, "", false, err)
	}
	return a.info(p), a.finish(ctx, caller, ActionGet, id, "", false, nil)
}

// List is a page of providers.
type List struct {
	Providers  []*Info `json:"providers"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

const listName = "providers"

// List returns a page of providers by id.
func (a *Admin) List(ctx context.Context, caller idempotency.Caller, limit int, cursor string) (*List, error) {
	if limit <= 0 || limit > MaxListLimit {
		limit = MaxListLimit
	}
	after := ""
	if cursor != "" {
		k, ok := pagecursor.Decode(listName, cursor)
		if !ok {
			return nil, a.finish(ctx, caller, ActionList, "", "", false, invalid("The cursor is not valid."))
		}
		after = k
	}
	ps, err := a.store.ListProviders(ctx, after, limit+1)
	if err != nil {
		return nil, a.finish(ctx, caller, ActionList, "", "", false, err)
	}
	out := &List{Providers: []*Info{}}
	for i, p := range ps {
		if i == limit {
			out.NextCursor = pagecursor.Encode(listName, ps[i-1].ID)
			break
		}
		out.Providers = append(out.Providers, a.info(p))
	}
	return out, a.finish(ctx, caller, ActionList, "", "", false, nil)
}

// Delete removes provider id. The identities linked through it stay.
func (a *Admin) Delete(ctx context.Context, caller idempotency.Caller, id string) error {
	return a.finish(ctx, caller, ActionDelete, id, "", false, a.store.DeleteProvider(ctx, id))
}

// finish translates err and writes the operation's audit event.
func (a *Admin) finish(ctx context.Context, caller idempotency.Caller, action, id, key string, replayed bool, err error) error {
	err = translate(err)
	clientadmin.LogAudit(ctx, a.log, clientadmin.AuditEvent{Who: caller.String(), What: action, ClientID: id,
		IdempotencyKey: key != "", Replayed: replayed, Err: err})
	return err
}

func translate(err error) error {
	var refused *idempotency.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refused):
		kind := clientadmin.ErrInvalidRequest
		switch {
		case errors.Is(refused, idempotency.ErrInFlight):
			kind = clientadmin.ErrKeyInFlight
		case errors.Is(refused, idempotency.ErrKeyReused):
			kind = clientadmin.ErrKeyReused
		}
		return &clientadmin.Error{Code: kind.Code, Description: refused.Description}
	case errors.Is(err, storage.ErrNotFound):
		return &clientadmin.Error{Code: clientadmin.ErrNotFound.Code, Description: "No provider with this id."}
	case errors.Is(err, storage.ErrSerializationFailure):
		return &clientadmin.Error{Code: clientadmin.ErrConflict.Code, Description: "The request conflicted with a concurrent one; retry it."}
	}
	return err
}
