package storage

import (
	"context"
	"time"
)

// Provider is an upstream OpenID provider users may sign in through
// (issue 25): Apple, Google or any OpenID provider. authd is its relying
// party.
type Provider struct {
	// ID is chosen by the operator: the path segment of its routes and
	// the label of its metrics.
	ID string
	// Kind is "oidc", "apple" or "google".
	Kind string
	// Issuer is the provider's issuer identifier (OpenID Connect
	// Discovery 1.0 §3); its metadata and JWKS are read from it.
	Issuer   string
	ClientID string
	// TeamID and KeyID identify Apple's client-secret signing key.
	TeamID string
	KeyID  string
	// Sealed is the client secret, or Apple's PKCS #8 private key, sealed
	// under a key derived from the system secret; nil when there is none.
	Sealed []byte
	// Scopes are requested at the provider's authorization endpoint.
	Scopes      []string
	DisplayName string
	// NativeAudiences are the aud values of provider ID tokens that may be
	// exchanged natively (RFC 8693): iOS bundle IDs, OAuth client IDs.
	NativeAudiences []string
	// LinkByVerifiedEmail lets a first sign-in link to the existing user
	// with the same email when the provider says it is verified.
	LinkByVerifiedEmail bool
	// CreatedAt and UpdatedAt are UTC, microsecond precision.
	CreatedAt time.Time
	UpdatedAt time.Time
}

// FederatedIdentity links an identity at a provider, the pair (issuer,
// sub), to one authd user.
type FederatedIdentity struct {
	Issuer     string
	Sub        string
	ProviderID string
	Subject    string // the authd user
	Email      string
	CreatedAt  time.Time
}

// ErrLastWayIn refuses to remove a user's last way to sign in (a
// password, an enabled passkey, a linked provider identity): it is
// ErrLastMethod, the passkeys' refusal, under the name of this file.
var ErrLastWayIn = ErrLastMethod

// FederationLogin is a browser sign-in in flight at a provider.
type FederationLogin struct {
	Key        string // SHA-256 of the state
	Browser    string // SHA-256 of the binding cookie
	ProviderID string
	Sealed     []byte // nonce, code_verifier, return_to, sealed under the state
	ExpiresAt  time.Time
}

// ProviderToken is a provider's refresh token for an identity (Apple's),
// kept sealed to be revoked at the provider when the user is deleted.
type ProviderToken struct {
	Issuer, Sub, ProviderID, Subject string
	Sealed                           []byte
	Attempts                         int
}

// ProviderStore keeps upstream providers and the identities linked
// through them.
type ProviderStore interface {
	// CreateProvider inserts p; ErrAlreadyExists if p.ID is taken. It
	// sets CreatedAt/UpdatedAt.
	CreateProvider(ctx context.Context, p *Provider) error
	// GetProvider returns the provider id, or ErrNotFound.
	GetProvider(ctx context.Context, id string) (*Provider, error)
	// UpdateProvider replaces every field of the stored provider p.ID but
	// CreatedAt and sets UpdatedAt; ErrNotFound if there is none.
	UpdateProvider(ctx context.Context, p *Provider) error
	// DeleteProvider deletes it; ErrNotFound if there is none. The
	// identities linked through it stay (re-adding it finds them).
	DeleteProvider(ctx context.Context, id string) error
	// ListProviders returns up to limit providers with ID > after, by ID.
	ListProviders(ctx context.Context, after string, limit int) ([]*Provider, error)
	// ProvidersVersion returns a value that changes whenever a provider
	// is added, changed or deleted (replicas poll it).
	ProvidersVersion(ctx context.Context) (string, error)

	// GetFederatedIdentity returns the link of (issuer, sub), or
	// ErrNotFound.
	GetFederatedIdentity(ctx context.Context, issuer, sub string) (*FederatedIdentity, error)
	// LinkFederatedIdentity inserts the link unless (issuer, sub) is
	// linked already: it reports whether it inserted it. A concurrent
	// insert of the same pair waits for the first to end, then reports
	// false. ErrNotFound if the user does not exist.
	LinkFederatedIdentity(ctx context.Context, id *FederatedIdentity) (bool, error)
	// ListFederatedIdentities returns the links of subject, oldest first.
	ListFederatedIdentities(ctx context.Context, subject string) ([]*FederatedIdentity, error)
	// UnlinkFederatedIdentity deletes the link (issuer, sub) of subject
	// unless it is the user's last way in (no password, no other link):
	// ErrLastWayIn then. The check and the delete hold the user's row
	// lock, so two concurrent unlinks cannot both remove "the other one".
	// ErrNotFound if there is no such link.
	UnlinkFederatedIdentity(ctx context.Context, subject, issuer, sub string) error
	// GetUserByVerifiedEmail returns the one user whose email is email
	// (compared case-insensitively) and verified; ErrNotFound when none
	// is, or more than one.
	GetUserByVerifiedEmail(ctx context.Context, email string) (*User, error)

	// ConsumeSubjectToken records that the provider ID token with this
	// key was exchanged, in ctx's transaction: true the first time;
	// false when it was already (a concurrent consumption waits for the
	// first transaction to end, so a false here sees its commit). The row
	// may go after expiresAt.
	ConsumeSubjectToken(ctx context.Context, key string, expiresAt time.Time) (bool, error)
	// CreateFederationLogin stores a sign-in in flight; ErrAlreadyExists
	// if its key is taken.
	CreateFederationLogin(ctx context.Context, l *FederationLogin) error
	// TakeFederationLogin deletes and returns the unexpired sign-in with
	// this key started by this browser: of concurrent takes one gets it.
	// ErrNotFound otherwise (unknown, taken, expired or another browser's,
	// which stays for its own browser).
	TakeFederationLogin(ctx context.Context, key, browser string, now time.Time) (*FederationLogin, error)
	// SaveProviderToken stores (or replaces) the refresh token of an
	// identity. DeleteUser marks the tokens of the user's identities
	// pending revocation, in its transaction.
	SaveProviderToken(ctx context.Context, t *ProviderToken) error
	// ClaimProviderRevocations returns up to limit tokens pending
	// revocation whose next attempt is due, locked (in ctx's transaction)
	// and skipping those another transaction holds.
	ClaimProviderRevocations(ctx context.Context, now time.Time, limit int) ([]*ProviderToken, error)
	// FinishProviderRevocation deletes a revoked token, or, with retryAt
	// set, counts a failed attempt and schedules the next.
	FinishProviderRevocation(ctx context.Context, issuer, sub string, retryAt *time.Time) error
	// DeleteExpiredSubjectTokens deletes up to limit consumed-token rows
	// that expired before now and returns how many it deleted.
	DeleteExpiredSubjectTokens(ctx context.Context, now time.Time, limit int) (int, error)
}
