package oauth

import (
	"context"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/clientadmin"
	"github.com/authd/authd/storage"
)

// The client registration rules (RFC 7591 §2 metadata, redirect URIs) live
// in package clientadmin; these names keep the protocol package's API.

// ClientMetadata is RFC 7591 §2 client metadata, plus authd's skip_consent.
type ClientMetadata = clientadmin.ClientMetadata

// ClientInformation is the RFC 7591 §3.2.1 client information response.
type ClientInformation = clientadmin.ClientInformation

// RegistrationError is an RFC 7591 §3.2.2 error response.
type RegistrationError = clientadmin.Error

// ValidateRedirectURI checks one redirect URI for registration
// (clientadmin.ValidateRedirectURI). It returns a *RegistrationError with
// code invalid_redirect_uri.
func ValidateRedirectURI(raw string) error { return clientadmin.ValidateRedirectURI(raw) }

// NewClientID returns a random client_id (128 bits).
func NewClientID() string { return clientadmin.NewClientID() }

// NewClientSecret returns a random client_secret of 256 bits.
func NewClientSecret() string { return clientadmin.NewClientSecret() }

// RegisterClient validates meta (RFC 7591 §2) and creates the client, with a
// generated secret for a confidential client (clientadmin.RegisterClient).
// It is not idempotent.
func RegisterClient(ctx context.Context, store storage.ClientStore, hasher fosite.Hasher, meta ClientMetadata, now time.Time) (*ClientInformation, error) {
	return clientadmin.RegisterClient(ctx, store, hasher, meta, now)
}
