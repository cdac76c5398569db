package clientadmin

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/authd/authd/secrets"
	"github.com/authd/authd/storage"
)

// Idempotency-Key handling (docs/architecture.md, "Admin writes";
// draft-ietf-httpapi-idempotency-key-header). What reaches the database:
//
//   - the key as HMAC-SHA-256 under a key derived from the system secret
//     (keyHash), never the raw key;
//   - the admin credential as a keyed fingerprint (credentialFingerprint);
//   - a keyed hash of the request's canonical JSON (requestHash);
//   - the response sealed with secrets.Seal under a key derived from the
//     system secret and the raw key: only a caller presenting the key can
//     have it opened, and a dump of the table holds no client_secret.

// writeTimeout bounds one write, which is not canceled when the caller
// goes away (see write).
const writeTimeout = 15 * time.Second

// maxIdempotencyKeyLen bounds an Idempotency-Key.
const maxIdempotencyKeyLen = 255

// The outcome codes stored with a key's record and bound into its seal.
// They were the HTTP statuses of the admin API when the table was
// designed; stored records depend on them, so they stay.
const (
	recordCreated = 201
	recordOK      = 200
)

// idempotencySealInfo names what a sealed response is, in its binding.
const idempotencySealInfo = "authd/v1/idempotency-response"

// errUnsealResponse reports a stored response that cannot be opened (another
// system secret, or tampering).
var errUnsealResponse = errors.New("clientadmin: cannot unseal stored idempotent response")

// writeOp is one write.
type writeOp struct {
	action    string // audit name, e.g. client.create
	endpoint  string // Idempotency-Key scope, e.g. "POST /admin/clients"
	record    int    // outcome code stored with the key
	clientID  string // the client concerned, when known beforehand
	idemKey   string // the raw Idempotency-Key; "" for none
	canonical []byte // the canonical JSON of the request
	// do performs the write with the transaction's context.
	do func(ctx context.Context) (*ClientInformation, error)
}

// write runs op through the engine (Write) and adds what is particular to
// clients: the client information decoded from a replayed answer, the
// client_id of the audit event, and the translation of storage errors.
func (s *Service) write(ctx context.Context, caller Caller, op writeOp) (*Result, error) {
	hasKey := op.idemKey != ""
	clientID := op.clientID
	var info *ClientInformation
	w, err := s.Write(ctx, Write{
		Caller:         caller,
		Endpoint:       op.endpoint,
		Status:         op.record,
		IdempotencyKey: op.idemKey,
		Request:        op.canonical,
		Do: func(ctx context.Context) ([]byte, error) {
			i, err := op.do(ctx)
			if err != nil {
				return nil, err
			}
			info, clientID = i, i.ClientID
			return encodeInfo(i)
		},
	})
	if err != nil {
		return nil, s.finish(ctx, caller, op.action, clientID, hasKey, false, err)
	}
	if w.Replayed {
		info = new(ClientInformation)
		if err := json.Unmarshal(w.Body, info); err != nil {
			return nil, s.finish(ctx, caller, op.action, clientID, hasKey, false, fmt.Errorf("clientadmin: stored response: %w", err))
		}
		if clientID == "" {
			clientID = info.ClientID
		}
	}
	return &Result{Client: info, JSON: w.Body, Replayed: w.Replayed}, s.finish(ctx, caller, op.action, clientID, hasKey, w.Replayed, nil)
}

// Write is one admin write for the Idempotency-Key engine (Service.Write).
// The client operations use it; so does the admin API for users, with an
// operation of package identity as Do.
type Write struct {
	// Caller scopes the key (Idempotency-Keys of two admin credentials
	// never collide).
	Caller Caller
	// Endpoint scopes the key too: the method and the path of the
	// resource, e.g. "POST /admin/users" or "PUT /admin/users/*".
	Endpoint string
	// Resource, when set, completes the scope with the resource the path
	// names where that must not be stored in the clear (a username): it is
	// added to the stored endpoint as a keyed hash.
	Resource string
	// Status is the outcome code stored with the key and bound into its
	// seal (the HTTP status of the answer, 200, 201 or 204); not 0.
	Status int
	// IdempotencyKey is the raw Idempotency-Key; "" runs the write in its
	// transaction without one.
	IdempotencyKey string
	// Request is the canonical form of the request (Canonical): a retry
	// with the same key must present the same one.
	Request []byte
	// Confidential marks a request that carries a secret (a password). Its
	// stored fingerprint is then keyed with the raw Idempotency-Key too, so
	// a dump of the table and the system secret together still allow no
	// guessing of the secret: the raw key is never stored.
	Confidential bool
	// Do performs the write with the context of the transaction and
	// returns the body of the answer (nil for none). Its error is returned
	// as it is, after the transaction is rolled back.
	Do func(ctx context.Context) ([]byte, error)
}

// Written is the answer of a Write.
type Written struct {
	// Status is the Write's Status, or on a replay the stored one.
	Status int
	// Body is what Do returned, or on a replay the stored body, byte for
	// byte.
	Body []byte
	// Replayed reports an answer replayed from an Idempotency-Key record.
	Replayed bool
}

// Write runs w in one transaction. With an Idempotency-Key (docs/architecture.md,
// "Admin writes"), in that same transaction: claim the key (scoped to the
// caller and the endpoint, with the keyed hash of the canonical request),
// do the work, store the sealed answer, commit. Then:
//
//   - a retry with the same key and request gets the stored answer, byte
//     for byte, with Replayed set;
//   - the same key with another request is ErrKeyReused;
//   - the same key while the first request is in flight is ErrKeyInFlight;
//   - a request that fails (validation, not found, any error of Do) rolls
//     back and leaves no key: it can be retried with the same key.
//
// An invalid key is ErrInvalidRequest. Other errors (Do's, storage's) are
// returned untranslated. Write writes no audit event: its caller does.
//
// The write is not canceled when the caller goes away (it is bounded by
// writeTimeout instead): a client that timed out and retries then finds
// the stored answer rather than a half-done request.
func (s *Service) Write(ctx context.Context, w Write) (*Written, error) {
	hasKey := w.IdempotencyKey != ""
	var rawKey string
	if hasKey {
		k, err := ParseIdempotencyKey(w.IdempotencyKey)
		if err != nil {
			return nil, err
		}
		rawKey = k
	}
	if w.Status == 0 {
		return nil, errors.New("clientadmin: write: status 0")
	}

	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	tx, err := s.store.BeginTX(wctx)
	if err != nil {
		return nil, err
	}
	// After Commit this is a no-op; on every other path it discards the
	// claim and the work.
	defer func() { _ = s.store.Rollback(tx) }()

	var key storage.IdempotencyKey
	if hasKey {
		now := s.now()
		endpoint := w.Endpoint
		if w.Resource != "" {
			endpoint += " " + hex.EncodeToString(s.keys.resourceHash(w.Resource))
		}
		key = storage.IdempotencyKey{
			Credential: w.Caller.fingerprint,
			Endpoint:   endpoint,
			KeyHash:    s.keys.keyHash(rawKey),
		}
		reqHash := s.keys.requestHash(w.Request)
		if w.Confidential {
			reqHash = s.keys.boundRequestHash(rawKey, w.Request)
		}
		stored, claimed, err := s.store.ClaimIdempotencyKey(tx, storage.IdempotencyClaim{
			IdempotencyKey: key,
			RequestHash:    reqHash,
			CreatedAt:      now,
			ExpiresAt:      now.Add(s.ttl),
		})
		switch {
		case errors.Is(err, storage.ErrIdempotencyInFlight):
			return nil, newError(ErrKeyInFlight, "A request with this Idempotency-Key is still being processed; retry later.")
		case errors.Is(err, storage.ErrIdempotencyKeyReused):
			return nil, newError(ErrKeyReused, "This Idempotency-Key was already used for a different request.")
		case err != nil:
			return nil, err
		case !claimed:
			body, err := s.keys.openResponse(rawKey, stored)
			if err != nil {
				return nil, err
			}
			return &Written{Status: stored.Status, Body: body, Replayed: true}, nil
		}
	}

	body, err := w.Do(tx)
	if err != nil {
		return nil, err
	}
	if hasKey {
		sealed, err := s.keys.sealResponse(rawKey, key, w.Status, body)
		if err == nil {
			err = s.store.CompleteIdempotencyKey(tx, key, w.Status, sealed)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := s.store.Commit(tx); err != nil {
		return nil, err
	}
	return &Written{Status: w.Status, Body: body}, nil
}

// ParseIdempotencyKey returns the key of an Idempotency-Key value: either a
// Structured Fields string (RFC 8941 §3.3.3, as the draft specifies: "…"
// with no escapes) or, as most clients send it, the bare token. The key is
// 1–255 visible ASCII characters; anything else is ErrInvalidRequest.
func ParseIdempotencyKey(v string) (string, error) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	if v == "" || len(v) > maxIdempotencyKeyLen {
		return "", newError(ErrInvalidRequest, fmt.Sprintf("The Idempotency-Key must be 1 to %d characters.", maxIdempotencyKeyLen))
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e || v[i] == '"' || v[i] == '\\' {
			return "", newError(ErrInvalidRequest, "The Idempotency-Key must be visible ASCII characters without quotes or backslashes.")
		}
	}
	return v, nil
}

// idempotencyKeys holds the keys derived from the system secret.
type idempotencyKeys struct {
	sealKey    []byte // input keying material for sealing responses
	keyHashKey []byte
	requestKey []byte
	credential []byte
}

func newIdempotencyKeys(secret []byte) idempotencyKeys {
	return idempotencyKeys{
		sealKey:    secrets.Derive(secret, "idempotency-response"),
		keyHashKey: secrets.Derive(secret, "idempotency-key-hash"),
		requestKey: secrets.Derive(secret, "idempotency-request-hash"),
		credential: secrets.Derive(secret, "admin-credential"),
	}
}

// keyHash is the stored form of a raw Idempotency-Key.
func (k idempotencyKeys) keyHash(raw string) []byte {
	return secrets.MAC(k.keyHashKey, []byte(raw))
}

// resourceHash is the stored form of a Write's Resource (two parts, so it
// never equals a keyHash).
func (k idempotencyKeys) resourceHash(resource string) []byte {
	return secrets.MAC(k.keyHashKey, []byte("resource"), []byte(resource))
}

// requestHash fingerprints a request by its canonical JSON.
func (k idempotencyKeys) requestHash(canonical []byte) []byte {
	return secrets.MAC(k.requestKey, canonical)
}

// boundRequestHash fingerprints a confidential request by its canonical
// JSON and the raw Idempotency-Key, which is never stored (Write.Confidential).
func (k idempotencyKeys) boundRequestHash(raw string, canonical []byte) []byte {
	return secrets.MAC(k.requestKey, []byte("confidential"), []byte(raw), canonical)
}

// credentialFingerprint is the keyed fingerprint of an admin credential:
// kind ("token" for a bearer token, "local" for the CLI) and value. It scopes
// Idempotency-Keys and names the caller in the audit log.
func (k idempotencyKeys) credentialFingerprint(kind, value string) []byte {
	return secrets.MAC(k.credential, []byte(kind), []byte(value))
}

// sealAAD binds a sealed response to its row and outcome code.
func sealAAD(key storage.IdempotencyKey, record int) string {
	return string(secrets.LengthPrefixed([]byte(idempotencySealInfo),
		key.Credential, []byte(key.Endpoint), key.KeyHash, binary.BigEndian.AppendUint64(nil, uint64(record))))
}

// sealResponse encrypts body for the row key under the raw Idempotency-Key
// (secrets.Seal: the secret derived for idempotency responses, the raw key
// as the value only the caller presents, the row bound as additional data).
func (k idempotencyKeys) sealResponse(raw string, key storage.IdempotencyKey, record int, body []byte) ([]byte, error) {
	sealed, err := secrets.Seal(k.sealKey, raw, sealAAD(key, record), body)
	if err != nil {
		return nil, fmt.Errorf("clientadmin: seal idempotent response: %w", err)
	}
	return sealed, nil
}

// openResponse decrypts a response sealed by sealResponse, or returns
// errUnsealResponse.
func (k idempotencyKeys) openResponse(raw string, rec *storage.IdempotencyRecord) ([]byte, error) {
	body, err := secrets.Open(k.sealKey, raw, sealAAD(rec.IdempotencyKey, rec.Status), rec.Response)
	if err != nil {
		return nil, errUnsealResponse
	}
	return body, nil
}

// canonicalOf is the canonical JSON of a decoded request: the request hash
// is over what was decoded, not the raw members (encoding/json matches
// member names case-insensitively, the last wins, so two bodies that
// differ only there would otherwise hash alike while meaning different
// things, or differ while meaning the same); canonicalJSON then fixes the
// member order.
func canonicalOf(v any) ([]byte, error) {
	decoded, err := json.Marshal(v)
	if err != nil {
		return nil, newError(ErrInvalidMetadata, "The request body is not valid client metadata.")
	}
	canonical, err := canonicalJSON(decoded)
	if err != nil {
		return nil, newError(ErrInvalidMetadata, "The request body is not valid JSON.")
	}
	return canonical, nil
}

// Canonical returns the canonical form of a decoded request, for
// Write.Request: its JSON encoding with object members sorted by name, so
// that two requests meaning the same have the same fingerprint whatever
// their member order or spacing (see canonicalOf). A value that does not
// encode is ErrInvalidRequest.
func Canonical(v any) ([]byte, error) {
	decoded, err := json.Marshal(v)
	if err == nil {
		decoded, err = canonicalJSON(decoded)
	}
	if err != nil {
		return nil, newError(ErrInvalidRequest, "The request body cannot be encoded.")
	}
	return decoded, nil
}

// canonicalJSON returns the canonical form of a JSON document: parsed and
// re-encoded compactly with object members sorted by name (encoding/json
// sorts map keys), so that two bodies differing only in whitespace or member
// order have the same request hash. An empty body is canonically "{}".
func canonicalJSON(body []byte) ([]byte, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return []byte("{}"), nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// DecodeMetadata decodes the JSON of a create request: one object of RFC
// 7591 §2 metadata (plus skip_consent) with no unknown member. Anything
// else is ErrInvalidMetadata with a description.
func DecodeMetadata(body []byte) (ClientMetadata, error) {
	var m ClientMetadata
	return m, decodeJSON(body, &m)
}

// DecodeUpdate decodes the JSON of an update request: as DecodeMetadata,
// and the body may repeat the client_id.
func DecodeUpdate(body []byte) (UpdateRequest, error) {
	var r UpdateRequest
	return r, decodeJSON(body, &r)
}

// DecodeEmpty checks the optional JSON of a request without parameters
// (secret rotation): nothing, or an empty object.
func DecodeEmpty(body []byte) error {
	if body == nil {
		return nil
	}
	var none struct{}
	return decodeJSON(body, &none)
}

// decodeJSON decodes body, which must be one JSON object with only known
// members, into v.
func decodeJSON(body []byte, v any) error {
	if problem := DecodeObject(body, v, "client metadata"); problem != "" {
		return newError(ErrInvalidMetadata, strings.TrimSuffix(problem, ".")+" (RFC 7591 §2).")
	}
	return nil
}

// DecodeObject decodes body, which must be exactly one JSON object with
// only members v knows, into v, and returns "" or a description of what is
// wrong with it (for an error_description; what names the object, e.g.
// "client metadata"). The admin API's adapters share it.
func DecodeObject(body []byte, v any, what string) string {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return "The request body must be a JSON object of " + what + "."
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var (
			syn *json.SyntaxError
			typ *json.UnmarshalTypeError
		)
		switch {
		case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF):
			return "The request body is not valid JSON."
		case errors.As(err, &typ):
			return fmt.Sprintf("The member %q has the wrong type.", typ.Field)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			// encoding/json has no typed error for unknown fields.
			return fmt.Sprintf("Unknown %s member %s.", what, strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return "The request body is not valid " + what + "."
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "The request body must hold exactly one JSON object."
	}
	return ""
}
