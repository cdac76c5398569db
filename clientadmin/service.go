package clientadmin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/idempotency"
	"github.com/authd/authd/pagecursor"
	"github.com/authd/authd/secrets"
	"github.com/authd/authd/storage"
)

// Store is what the service needs of storage.Store: clients, transactions
// and Idempotency-Key records.
type Store interface {
	GetClient(ctx context.Context, id string) (fosite.Client, error)
	CreateClient(ctx context.Context, c *storage.Client) error
	UpdateClient(ctx context.Context, c *storage.Client) error
	DeleteClient(ctx context.Context, id string) error
	ListClients(ctx context.Context, after string, limit int) ([]*storage.Client, error)
	LockClient(ctx context.Context, id string) error
	BeginTX(ctx context.Context) (context.Context, error)
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
	ClaimIdempotencyKey(ctx context.Context, c storage.IdempotencyClaim) (*storage.IdempotencyRecord, bool, error)
	CompleteIdempotencyKey(ctx context.Context, k storage.IdempotencyKey, status int, response []byte) error
}

// Config configures a Service. Secret and Store are required.
type Config struct {
	// Secret is the system secret (at least secrets.MinLen bytes): client
	// secrets are hashed, and Idempotency-Keys hashed and responses sealed,
	// with keys derived from it.
	Secret []byte
	// AdminTokens are the bearer tokens AuthenticateToken accepts.
	AdminTokens []string
	// IdempotencyKeyTTL is how long a key and its response are kept
	// (default 24h). Ignored when Idempotency is set.
	IdempotencyKeyTTL time.Duration
	// Idempotency is the Idempotency-Key engine, shared with the other
	// operations of the admin API; nil builds one from Secret,
	// IdempotencyKeyTTL, Store and Now.
	Idempotency *idempotency.Engine
	// Store persists clients and Idempotency-Key records.
	Store Store
	// Audit receives one event per operation. Nil logs it to Logger as
	// "admin audit".
	Audit func(context.Context, AuditEvent)
	// Logger is the default audit log; nil is slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// AuditEvent describes one operation: who (the caller's credential
// fingerprint), what, which client, whether an Idempotency-Key was given
// and the response replayed, and the error, if any. It never carries a
// secret, a token or an Idempotency-Key.
type AuditEvent struct {
	Who            string
	What           string // client.create, client.update, client.rotate_secret, client.get, client.list, client.delete
	ClientID       string
	IdempotencyKey bool
	Replayed       bool
	Err            error
}

// The operations' audit names.
const (
	ActionCreate       = "client.create"
	ActionUpdate       = "client.update"
	ActionRotateSecret = "client.rotate_secret"
	ActionGet          = "client.get"
	ActionList         = "client.list"
	ActionDelete       = "client.delete"
)

// Caller identifies who makes a request by a keyed fingerprint of its
// credential, never the credential itself (idempotency.Caller). It scopes
// Idempotency-Keys and names the caller ("who") in the audit log. Obtain
// one from Service.AuthenticateToken or Service.LocalCaller.
type Caller = idempotency.Caller

// Unauthenticated is the caller of a request without a valid credential,
// for audit events only.
var Unauthenticated = idempotency.Unauthenticated

// Service manages OAuth clients. It is the one code path behind the admin
// API and the "authd clients" commands, and safe for concurrent use.
type Service struct {
	store  Store
	hasher Hasher
	idem   *idempotency.Engine
	tokens []Caller // the callers of the configured admin tokens
	now    func() time.Time
	audit  func(context.Context, AuditEvent)
}

// ErrConfig is returned (wrapped) by New for an invalid Config.
var ErrConfig = errors.New("clientadmin: invalid configuration")

// New returns the client administration service.
func New(cfg Config) (*Service, error) {
	if len(cfg.Secret) < secrets.MinLen {
		return nil, fmt.Errorf("%w: secret: must be at least %d bytes, got %d", ErrConfig, secrets.MinLen, len(cfg.Secret))
	}
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: Store is required", ErrConfig)
	}
	s := &Service{
		store:  cfg.Store,
		hasher: secrets.NewHasher(cfg.Secret),
		idem:   cfg.Idempotency,
		now:    cfg.Now,
		audit:  cfg.Audit,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.idem == nil {
		idem, err := idempotency.New(idempotency.Config{Secret: cfg.Secret, TTL: cfg.IdempotencyKeyTTL, Store: cfg.Store, Now: s.now})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		s.idem = idem
	}
	if s.audit == nil {
		log := cfg.Logger
		if log == nil {
			log = slog.Default()
		}
		s.audit = func(ctx context.Context, e AuditEvent) { LogAudit(ctx, log, e) }
	}
	for _, t := range cfg.AdminTokens {
		if t != "" {
			s.tokens = append(s.tokens, s.idem.TokenCaller(t))
		}
	}
	return s, nil
}

// LogAudit writes e to log as an "admin audit" event.
func LogAudit(ctx context.Context, log *slog.Logger, e AuditEvent) {
	attrs := []slog.Attr{
		slog.String("who", e.Who),
		slog.String("what", e.What),
		slog.String("client_id", e.ClientID),
		slog.Bool("idempotency_key", e.IdempotencyKey),
		slog.Bool("replayed", e.Replayed),
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", ErrorCode(e.Err)))
	}
	log.LogAttrs(ctx, slog.LevelInfo, "admin audit", attrs...)
}

// ErrorCode is the RFC 7591 §3.2.2 style code of err: its *Error's code,
// or "server_error" for any other error.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return "server_error"
}

// Audit records an event for a request refused before an operation ran
// (unauthenticated, or a body the adapter could not read).
func (s *Service) Audit(ctx context.Context, e AuditEvent) { s.audit(ctx, e) }

// AuthenticateToken returns the caller presenting an admin bearer token and
// whether the token is one of the configured admin tokens. Fingerprints of
// equal length are compared, each in constant time, so neither the
// configured tokens nor their lengths leak through timing.
func (s *Service) AuthenticateToken(token string) (Caller, bool) {
	c := s.idem.TokenCaller(token)
	ok := false
	for _, t := range s.tokens {
		ok = t.Equal(c) || ok // every comparison runs
	}
	return c, ok && token != ""
}

// LocalCaller returns the caller for a local operator with direct access to
// the database and the system secret, such as the "authd clients" commands.
func (s *Service) LocalCaller(name string) Caller { return s.idem.LocalCaller(name) }

// Result is the answer of a write: the client information and its JSON
// encoding, which is what an Idempotency-Key stores and a retry gets back
// byte for byte.
type Result struct {
	// Client is the RFC 7591 §3.2.1 client information; ClientSecret is
	// set when the write issued one (shown once; replayed to a retry with
	// the same key).
	Client *ClientInformation
	// JSON is Client encoded, with a final newline.
	JSON []byte
	// Replayed reports an answer replayed from an Idempotency-Key record.
	Replayed bool
}

// ClientList is one page of clients ordered by client_id, and the opaque
// cursor of the next page (absent on the last).
type ClientList struct {
	Clients    []*ClientInformation `json:"clients"`
	NextCursor string               `json:"next_cursor,omitempty"`
}

// List bounds.
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

// UpdateRequest is the body of an update: the new metadata, and optionally
// the client_id, which must then match (RFC 7592 §2.2).
type UpdateRequest struct {
	ClientID string `json:"client_id,omitempty"`
	ClientMetadata
}

// Create registers a client from RFC 7591 §2 metadata (plus skip_consent)
// with a generated client_id and, for a confidential client, a generated
// client_secret of 256 bits stored only as its keyed hash: the result is
// the only time it is shown. Errors: ErrInvalidRedirectURI or
// ErrInvalidMetadata (*Error), the Idempotency-Key errors of write, storage
// errors.
//
// idempotencyKey, if not empty, makes the request safe to retry: see write.
func (s *Service) Create(ctx context.Context, caller Caller, idempotencyKey string, meta ClientMetadata) (*Result, error) {
	canonical, err := canonicalOf(meta)
	if err == nil {
		err = validateMetadata(&meta)
	}
	if err != nil {
		return nil, s.finish(ctx, caller, ActionCreate, "", idempotencyKey != "", false, err)
	}
	return s.write(ctx, caller, writeOp{
		action:    ActionCreate,
		endpoint:  "POST /admin/clients",
		outcome:   idempotency.OutcomeCreated,
		idemKey:   idempotencyKey,
		canonical: canonical,
		do: func(ctx context.Context) (*ClientInformation, error) {
			return createClient(ctx, s.store, s.hasher, meta, s.now())
		},
	})
}

// Update replaces every metadata field of client id (RFC 7592 §2.2:
// omitted fields take their defaults). The secret is kept; a client that
// becomes public loses it, and a public client that becomes confidential
// gets a new one, in this result only. Errors: ErrNotFound, the metadata
// errors of Create, ErrInvalidMetadata for a client_id that does not match.
//
// idempotencyKey, if not empty, makes the request safe to retry: see write.
func (s *Service) Update(ctx context.Context, caller Caller, id, idempotencyKey string, req UpdateRequest) (*Result, error) {
	canonical, err := canonicalOf(req)
	if err == nil && req.ClientID != "" && req.ClientID != id {
		err = newError(ErrInvalidMetadata, "The client_id in the body does not match the client being updated (RFC 7592 §2.2).")
	}
	meta := req.ClientMetadata
	if err == nil {
		err = validateMetadata(&meta)
	}
	if err != nil {
		return nil, s.finish(ctx, caller, ActionUpdate, id, idempotencyKey != "", false, err)
	}
	return s.write(ctx, caller, writeOp{
		action:    ActionUpdate,
		endpoint:  "PUT /admin/clients/" + id,
		outcome:   idempotency.OutcomeOK,
		clientID:  id,
		idemKey:   idempotencyKey,
		canonical: canonical,
		do: func(ctx context.Context) (*ClientInformation, error) {
			old, err := s.lockClient(ctx, id)
			if err != nil {
				return nil, err
			}
			c := clientFromMetadata(id, meta, old.CreatedAt, s.now())
			var secret string
			switch {
			case c.IsPublic():
				// A public client has no secret (RFC 6749 §2.1).
			case len(old.SecretHash) > 0:
				c.SecretHash = old.SecretHash
			default:
				if secret, err = issueSecret(ctx, s.hasher, c); err != nil {
					return nil, err
				}
			}
			if err := s.store.UpdateClient(ctx, c); err != nil {
				return nil, err
			}
			info := clientInformation(c)
			info.ClientSecret = secret
			return info, nil
		},
	})
}

// RotateSecret replaces the client_secret of confidential client id with a
// new one of 256 bits; the old secret stops working at once. The result
// holds the new secret, the only time it is shown. Errors: ErrNotFound,
// ErrInvalidRequest for a public client.
//
// idempotencyKey, if not empty, makes the request safe to retry: see write.
func (s *Service) RotateSecret(ctx context.Context, caller Caller, id, idempotencyKey string) (*Result, error) {
	return s.write(ctx, caller, writeOp{
		action:    ActionRotateSecret,
		endpoint:  "POST /admin/clients/" + id + "/secret",
		outcome:   idempotency.OutcomeOK,
		clientID:  id,
		idemKey:   idempotencyKey,
		canonical: []byte("{}"),
		do: func(ctx context.Context) (*ClientInformation, error) {
			c, err := s.lockClient(ctx, id)
			if err != nil {
				return nil, err
			}
			if c.IsPublic() {
				return nil, newError(ErrInvalidRequest, "The client is public (token_endpoint_auth_method none) and has no secret to rotate.")
			}
			secret, err := issueSecret(ctx, s.hasher, c)
			if err != nil {
				return nil, err
			}
			c.UpdatedAt = s.now()
			if err := s.store.UpdateClient(ctx, c); err != nil {
				return nil, err
			}
			info := clientInformation(c)
			info.ClientSecret = secret
			return info, nil
		},
	})
}

// Get returns the client information of client id, without secret, or
// ErrNotFound.
func (s *Service) Get(ctx context.Context, caller Caller, id string) (*ClientInformation, error) {
	c, err := s.getClient(ctx, id)
	if err != nil {
		return nil, s.finish(ctx, caller, ActionGet, id, false, false, err)
	}
	return clientInformation(c), s.finish(ctx, caller, ActionGet, id, false, false, nil)
}

// List returns up to limit clients (0 means DefaultListLimit; at most
// MaxListLimit) after cursor ("" for the first page), ordered by client_id.
// The order is stable, so paging visits every client that exists
// throughout exactly once. A bad limit or cursor is ErrInvalidRequest.
func (s *Service) List(ctx context.Context, caller Caller, limit int, cursor string) (*ClientList, error) {
	fail := func(err error) (*ClientList, error) {
		return nil, s.finish(ctx, caller, ActionList, "", false, false, err)
	}
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 1 || limit > MaxListLimit {
		return fail(newError(ErrInvalidRequest, fmt.Sprintf("limit must be between 1 and %d.", MaxListLimit)))
	}
	after, ok := pagecursor.Decode("clients", cursor)
	if !ok {
		return fail(newError(ErrInvalidRequest, "The cursor is not valid; use next_cursor from the previous page."))
	}
	clients, err := s.store.ListClients(ctx, after, limit+1)
	if err != nil {
		return fail(err)
	}
	list := &ClientList{Clients: make([]*ClientInformation, 0, len(clients))}
	if len(clients) > limit {
		clients = clients[:limit]
		list.NextCursor = pagecursor.Encode("clients", clients[limit-1].ID)
	}
	for _, c := range clients {
		list.Clients = append(list.Clients, clientInformation(c))
	}
	return list, s.finish(ctx, caller, ActionList, "", false, false, nil)
}

// Delete deletes client id together with every authorization code, access
// and refresh token and PKCE session issued to it, in one transaction: its
// tokens are inactive from then on (RFC 7662 §2.2). Errors: ErrNotFound.
func (s *Service) Delete(ctx context.Context, caller Caller, id string) error {
	return s.finish(ctx, caller, ActionDelete, id, false, false, s.store.DeleteClient(ctx, id))
}

// lockClient locks client id for the rest of the write's transaction, then
// reads it, so concurrent read-modify-writes (an update and a rotation)
// apply one after the other and none is lost.
func (s *Service) lockClient(ctx context.Context, id string) (*storage.Client, error) {
	if err := s.store.LockClient(ctx, id); err != nil {
		return nil, translate(err)
	}
	return s.getClient(ctx, id)
}

// getClient returns the stored client or ErrNotFound.
func (s *Service) getClient(ctx context.Context, id string) (*storage.Client, error) {
	fc, err := s.store.GetClient(ctx, id)
	if err != nil {
		return nil, translate(err)
	}
	c, ok := fc.(*storage.Client)
	if !ok {
		return nil, fmt.Errorf("clientadmin: store returned a %T for client %q", fc, id)
	}
	return c, nil
}

// translate maps storage and engine errors to the service's: a missing
// client is ErrNotFound, a serialization failure ErrConflict, a refusal of
// the Idempotency-Key engine ErrInvalidRequest, ErrKeyInFlight or
// ErrKeyReused with the engine's description; others are returned as they
// are.
func translate(err error) error {
	var refused *idempotency.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refused):
		kind := ErrInvalidRequest
		switch {
		case errors.Is(refused, idempotency.ErrInFlight):
			kind = ErrKeyInFlight
		case errors.Is(refused, idempotency.ErrKeyReused):
			kind = ErrKeyReused
		}
		return newError(kind, refused.Description)
	case errors.Is(err, storage.ErrNotFound):
		return newError(ErrNotFound, "No client with this client_id.")
	case errors.Is(err, storage.ErrSerializationFailure):
		return newError(ErrConflict, "The request conflicted with a concurrent one; retry it.")
	}
	return err
}

// finish translates err, writes the audit event of an operation and
// returns err.
func (s *Service) finish(ctx context.Context, caller Caller, action, clientID string, idempotencyKey, replayed bool, err error) error {
	err = translate(err)
	s.audit(ctx, AuditEvent{Who: caller.String(), What: action, ClientID: clientID, IdempotencyKey: idempotencyKey, Replayed: replayed, Err: err})
	return err
}

// encodeInfo is the JSON of a result, with a final newline.
func encodeInfo(info *ClientInformation) ([]byte, error) {
	b, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("clientadmin: encode client information: %w", err)
	}
	return append(b, '\n'), nil
}
