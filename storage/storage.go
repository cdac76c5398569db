package storage

import (
	"context"
	"errors"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"
	"github.com/ory/fosite/handler/pkce"
	fositestorage "github.com/ory/fosite/storage"
)

// Sentinel errors. Where fosite interprets an error, the sentinel IS fosite's
// value, so errors.Is works across the seam without translation.
var (
	// ErrNotFound reports that no row matches. It is fosite.ErrNotFound.
	ErrNotFound = fosite.ErrNotFound
	// ErrInvalidatedAuthorizeCode is returned, together with the stored
	// requester, by GetAuthorizeCodeSession for a code that was already
	// redeemed, and by InvalidateAuthorizeCodeSession when the conditional
	// write found the code already inactive (a lost redemption race).
	ErrInvalidatedAuthorizeCode = fosite.ErrInvalidatedAuthorizeCode
	// ErrInactiveToken is returned, together with the stored requester, by
	// GetRefreshTokenSession and GetAccessTokenSession for a revoked or
	// rotated token, and by RotateRefreshToken when the refresh token was
	// already rotated (a lost rotation race).
	ErrInactiveToken = fosite.ErrInactiveToken
	// ErrSerializationFailure reports a conflict between concurrent
	// transactions (SQLSTATE 40001/40P01); the caller may retry.
	ErrSerializationFailure = fosite.ErrSerializationFailure
	// ErrAlreadyExists reports a unique-key conflict on create
	// (SQLSTATE 23505), e.g. a client_id or username already taken.
	ErrAlreadyExists = errors.New("storage: already exists")
	// ErrUnavailable reports that the backend could not be reached or the
	// connection broke before it answered (refused, reset, closed, timed
	// out, or the server shutting down or starting up). Whether a write
	// sent before the break took effect is unknown; a transaction either
	// committed whole or not at all. The caller answers "retry later"
	// (503) rather than a server error.
	ErrUnavailable = errors.New("storage: backend unavailable")
)

// Client is a registered OAuth 2.0 client (RFC 6749 §2, RFC 7591 §2 metadata).
// It implements fosite.Client.
type Client struct {
	// ID is the client_id (RFC 6749 §2.2).
	ID string
	// SecretHash is the keyed hash of the client_secret (see oauth's secret
	// hasher); empty for public clients. The raw secret is never stored.
	SecretHash []byte
	// Name is client_name, shown on the consent page.
	Name string
	// RedirectURIs are matched exactly, except the port of loopback
	// http URIs (RFC 8252 §7.3).
	RedirectURIs []string
	// GrantTypes, e.g. "authorization_code", "refresh_token".
	GrantTypes []string
	// ResponseTypes, e.g. "code".
	ResponseTypes []string
	// Scopes are the scopes the client may request.
	Scopes []string
	// TokenEndpointAuthMethod is "none" (public client),
	// "client_secret_basic" or "client_secret_post" (RFC 7591 §2).
	TokenEndpointAuthMethod string
	// ClientURI, LogoURI and Contacts are RFC 7591 §2 display metadata.
	ClientURI string
	LogoURI   string
	Contacts  []string
	// PostLogoutRedirectURIs are where RP-initiated logout may send the
	// browser afterwards (OpenID Connect RP-Initiated Logout 1.0 §3.1),
	// matched exactly.
	PostLogoutRedirectURIs []string
	// IDTokenSignedResponseAlg is the JWS alg of the client's ID tokens
	// (OpenID Connect Dynamic Client Registration §2): "RS256" (the
	// default, when empty) or "ES256".
	IDTokenSignedResponseAlg string
	// DPoPBoundAccessTokens (RFC 9449 §5.2): every token request of the
	// client must carry a DPoP proof.
	DPoPBoundAccessTokens bool
	// BackchannelLogoutURI is where logout tokens are POSTed (OpenID
	// Connect Back-Channel Logout 1.0 §2.2); empty for none.
	BackchannelLogoutURI string
	// BackchannelLogoutSessionRequired: the client wants a sid in every
	// logout token (§2.2). authd always sends one.
	BackchannelLogoutSessionRequired bool
	// RequirePushedAuthorizationRequests (RFC 9126 §6): the client's
	// authorization requests must come by PAR.
	RequirePushedAuthorizationRequests bool
	// RequireMFA (authd's require_mfa metadata): the client's users must
	// prove a second factor (or set one up) before a code is issued.
	RequireMFA bool
	// SkipConsent marks a first-party client whose users are not asked
	// for consent.
	SkipConsent bool
	// FirstParty (authd's first_party metadata): the client may use the
	// Authorization Challenge Endpoint (draft-ietf-oauth-first-party-apps).
	FirstParty bool
	// CreatedAt and UpdatedAt are UTC, microsecond precision.
	CreatedAt time.Time
	UpdatedAt time.Time
}

var _ fosite.Client = (*Client)(nil)

// RequiresDPoP reports DPoPBoundAccessTokens (RFC 9449 §5.2).
func (c *Client) RequiresDPoP() bool { return c.DPoPBoundAccessTokens }

// GetID returns the client_id.
func (c *Client) GetID() string { return c.ID }

// GetHashedSecret returns the keyed hash of the client secret.
func (c *Client) GetHashedSecret() []byte { return c.SecretHash }

// GetRedirectURIs returns the registered redirect URIs.
func (c *Client) GetRedirectURIs() []string { return c.RedirectURIs }

// GetGrantTypes returns the allowed grant types.
func (c *Client) GetGrantTypes() fosite.Arguments { return c.GrantTypes }

// GetResponseTypes returns the allowed response types.
func (c *Client) GetResponseTypes() fosite.Arguments { return c.ResponseTypes }

// GetScopes returns the scopes the client may request.
func (c *Client) GetScopes() fosite.Arguments { return c.Scopes }

// IsPublic reports whether the client has no secret
// (token_endpoint_auth_method "none", RFC 6749 §2.1).
func (c *Client) IsPublic() bool { return c.TokenEndpointAuthMethod == "none" }

// GetResponseModes returns the response modes the client may request:
// the default and query, the only ones authd implements (RFC 6749 §4.1.2,
// OAuth 2.0 Multiple Response Type Encoding Practices §2.1). fosite
// refuses any other with unsupported_response_mode.
func (c *Client) GetResponseModes() []fosite.ResponseModeType {
	return []fosite.ResponseModeType{fosite.ResponseModeDefault, fosite.ResponseModeQuery}
}

var _ fosite.ResponseModeClient = (*Client)(nil)

// GetAudience returns no audience: authd does not restrict audiences.
func (c *Client) GetAudience() fosite.Arguments { return nil }

// ClientStore manages registered clients. GetClient (from
// fosite.ClientManager) returns a *Client or ErrNotFound.
type ClientStore interface {
	fosite.ClientManager
	// CreateClient inserts c. It returns ErrAlreadyExists if c.ID is taken.
	// CreatedAt/UpdatedAt are set by the store when zero.
	CreateClient(ctx context.Context, c *Client) error
	// UpdateClient replaces every field of the stored client with c.ID.
	// It returns ErrNotFound if no such client exists.
	UpdateClient(ctx context.Context, c *Client) error
	// DeleteClient deletes the client and revokes (deactivates) every code,
	// access and refresh token issued to it, in one transaction.
	// It returns ErrNotFound if no such client exists.
	DeleteClient(ctx context.Context, id string) error
	// ListClients returns up to limit clients with ID > after, ordered by ID.
	ListClients(ctx context.Context, after string, limit int) ([]*Client, error)
	// LockClient, inside a transaction (BeginTX), locks client id until the
	// transaction ends, so a read-modify-write of the client (an admin
	// update, a secret rotation) cannot lose a concurrent one. It returns
	// ErrNotFound if no such client exists. Outside a transaction it only
	// checks existence.
	LockClient(ctx context.Context, id string) error
}

// GrantChecker tells a refresh token that was rotated from one that was
// revoked, so that an error can say which (RFC 6749 §5.2 error_description).
type GrantChecker interface {
	// GrantActive reports whether any refresh token of the grant
	// requestID is still active (its family was neither revoked nor ended
	// by reuse detection). A grant without tokens is (false, nil).
	GrantActive(ctx context.Context, requestID string) (bool, error)
}

// Batcher begins transactions whose blind writes travel together.
type Batcher interface {
	// BeginDeferredTX is BeginTX for a token exchange or a code's issue:
	// in the returned transaction, InvalidateAuthorizeCodeSession (of a
	// code this transaction read with GetAuthorizeCodeRecord, which then
	// locks it), CreateAuthorizeCodeSession, CreatePKCERequestSession,
	// CreateAccessTokenSession, CreateRefreshTokenSession,
	// DeletePKCERequestSession and TouchSession (which then returns a nil
	// session, and fails the commit with ErrNotFound for a session that is
	// no longer valid) may be queued instead of sent, and go to the
	// server together with Commit or CommitWithReplayRecord, which then
	// report their errors (a failed queued write fails the transaction). BEGIN itself may travel with the
	// first statement. Reads in the transaction need not see queued
	// writes, and a queued DeletePKCERequestSession reports nothing. A
	// backend without round trips may return a plain transaction.
	BeginDeferredTX(ctx context.Context) (context.Context, error)
	// CommitWithReplayRecord inserts rec in ctx's transaction (the
	// redeeming one), marks every other record of rec.RequestID Revoked
	// (superseded) and commits, in one round trip where the backend
	// batches: the queued writes, the record and COMMIT travel together.
	// It returns the keys it marked, so the caller can drop their cache
	// entries. A taken rec.Key is ErrAlreadyExists, a missing client
	// ErrNotFound; on any error the transaction is rolled back.
	CommitWithReplayRecord(ctx context.Context, rec *ReplayRecord) (superseded []string, err error)
	// GetAuthorizeCodeRecord reads a code as stored, undecoded: for a
	// caller that decodes it more than once (oauth's code memo, which also
	// answers the code's PKCE session from it). In a deferred transaction
	// the code's row is locked (FOR UPDATE where the backend has rows): a
	// concurrent exchange of the same code waits until this transaction
	// ends, then reads it redeemed, and this transaction's redemption is
	// queued. A missing code or client is ErrNotFound; a redeemed code is
	// returned with Active false and no error. The caller owns the result.
	GetAuthorizeCodeRecord(ctx context.Context, sig string) (*StoredRequest, error)
}

// StoredRequest is a stored request as read: its record, its client
// (rehydrated) and whether it is still active.
type StoredRequest struct {
	Record Record
	Client fosite.Client
	Active bool
}

// Pinger reports whether the backend is reachable (for /readyz).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Store is everything authd persists. It embeds fosite's storage interfaces
// (so compose.Compose's runtime type assertions can never fail) plus authd's
// own small interfaces.
//
// fosite contract, honoured exactly by every backend:
//   - Get* for a missing signature returns an error matching ErrNotFound.
//   - After InvalidateAuthorizeCodeSession, GetAuthorizeCodeSession returns
//     the requester AND ErrInvalidatedAuthorizeCode.
//   - InvalidateAuthorizeCodeSession is a conditional write: of N concurrent
//     calls for one code, exactly one returns nil; the others return
//     ErrInvalidatedAuthorizeCode.
//   - RotateRefreshToken is a conditional write: it deactivates the refresh
//     token with the given signature and the access tokens of requestID;
//     if the refresh token was already inactive it returns ErrInactiveToken.
//   - After rotation or revocation, GetRefreshTokenSession returns the
//     requester AND ErrInactiveToken; GetAccessTokenSession likewise.
//   - RevokeAccessToken/RevokeRefreshToken act on every token of a request ID.
//   - DeletePKCERequestSession is a conditional delete: ErrNotFound when
//     nothing was deleted.
//   - With BeginTX, every call made with the returned context runs in that
//     transaction until Commit or Rollback.
type Store interface {
	ClientStore
	UserStore
	SessionStore
	ConsentStore
	oauth2.CoreStorage
	oauth2.TokenRevocationStorage
	pkce.PKCERequestStorage
	fositestorage.Transactional
	Pinger
	IdempotencyStore
	ReplayStore
	GrantChecker
	Batcher
	SigningKeyStore
	PARStore
	ProviderStore
	LogoutStore
	FactorStore
	AuthSessionStore
}

// CodeRead returns a code read from a backend as fosite's contract wants
// it (Store): a redeemed code is the requester AND
// ErrInvalidatedAuthorizeCode. A backend's GetAuthorizeCodeSession is
// CodeRead of its read: the request, whether it is active, and an error.
func CodeRead(req fosite.Requester, active bool, err error) (fosite.Requester, error) {
	return fositeRead(req, active, err, ErrInvalidatedAuthorizeCode)
}

// TokenRead is CodeRead for an access or refresh token: a rotated or
// revoked one is the requester AND ErrInactiveToken.
func TokenRead(req fosite.Requester, active bool, err error) (fosite.Requester, error) {
	return fositeRead(req, active, err, ErrInactiveToken)
}

// fositeRead is fosite's rule for a stored request that is no longer
// active (fosite handler/oauth2/storage.go): it comes back together with
// the sentinel, so fosite can tell reuse from an unknown code or token.
func fositeRead(req fosite.Requester, active bool, err, inactive error) (fosite.Requester, error) {
	if err != nil {
		return nil, err
	}
	if !active {
		return req, inactive
	}
	return req, nil
}

// PARStore holds pushed authorization requests (RFC 9126) under the
// signature of their request_uri, as codes are held.
type PARStore interface {
	// CreatePARRequest stores r under sig; ErrAlreadyExists if sig is
	// taken, ErrNotFound if r's client does not exist.
	CreatePARRequest(ctx context.Context, sig string, r fosite.Requester) error
	// GetPARRequest returns the request under sig and whether it is still
	// unused; ErrNotFound if there is none.
	GetPARRequest(ctx context.Context, sig string, session fosite.Session) (fosite.Requester, bool, error)
	// UsePARRequest marks the request used with a conditional write, so
	// exactly one of concurrent callers succeeds; the others get
	// ErrInactiveToken. ErrNotFound if there is none.
	UsePARRequest(ctx context.Context, sig string) error
}
