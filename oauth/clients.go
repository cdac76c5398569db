package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

// ClientMetadata is RFC 7591 §2 client metadata, plus authd's skip_consent.
type ClientMetadata struct {
	ClientName              string   `json:"client_name,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	// Scope is a space-separated list of scopes the client may request.
	Scope     string   `json:"scope,omitempty"`
	ClientURI string   `json:"client_uri,omitempty"`
	LogoURI   string   `json:"logo_uri,omitempty"`
	Contacts  []string `json:"contacts,omitempty"`
	// SkipConsent marks a first-party app whose users see no consent page.
	SkipConsent bool `json:"skip_consent,omitempty"`
}

// ClientInformation is the RFC 7591 §3.2.1 client information response.
type ClientInformation struct {
	ClientID string `json:"client_id"`
	// ClientSecret is present once, at registration or rotation, for
	// confidential clients. authd stores only its keyed hash.
	ClientSecret string `json:"client_secret,omitempty"`
	// ClientIDIssuedAt is in seconds since the Unix epoch.
	ClientIDIssuedAt int64 `json:"client_id_issued_at"`
	// ClientSecretExpiresAt is 0: secrets do not expire (RFC 7591 §3.2.1).
	ClientSecretExpiresAt *int64 `json:"client_secret_expires_at,omitempty"`
	ClientMetadata
}

// RegistrationError is an RFC 7591 §3.2.2 error: Code is
// "invalid_redirect_uri" or "invalid_client_metadata".
type RegistrationError struct {
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

func (e *RegistrationError) Error() string { return e.Code + ": " + e.Description }

func invalidMetadata(format string, args ...any) error {
	return &RegistrationError{Code: "invalid_client_metadata", Description: fmt.Sprintf(format, args...)}
}

func invalidRedirect(format string, args ...any) error {
	return &RegistrationError{Code: "invalid_redirect_uri", Description: fmt.Sprintf(format, args...)}
}

// ValidateRedirectURI checks one redirect URI for registration, per
// RFC 6749 §3.1.2 (absolute, no fragment), RFC 8252 §7 (native apps:
// private-use reverse-domain schemes, loopback IP literals over http) and
// RFC 9700 §2.1 (exact matching, so no wildcards). It returns a
// *RegistrationError with code invalid_redirect_uri.
func ValidateRedirectURI(raw string) error {
	if raw == "" {
		return invalidRedirect("redirect URI is empty")
	}
	if strings.ContainsAny(raw, "*") {
		return invalidRedirect("%q: wildcards are not allowed; URIs are matched exactly (RFC 9700 §2.1)", raw)
	}
	if strings.ContainsAny(raw, " \t\r\n\\") {
		return invalidRedirect("%q: contains whitespace or a backslash", raw)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return invalidRedirect("%q: not an absolute URI (RFC 6749 §3.1.2)", raw)
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return invalidRedirect("%q: must not contain a fragment (RFC 6749 §3.1.2)", raw)
	}
	if u.User != nil {
		return invalidRedirect("%q: must not contain user information", raw)
	}
	switch scheme := strings.ToLower(u.Scheme); scheme {
	case "https":
		if u.Host == "" {
			return invalidRedirect("%q: https URI without a host", raw)
		}
	case "http":
		// RFC 8252 §7.3 / §8.3: only loopback IP literals; "localhost" is
		// refused because it can resolve off the machine.
		host := u.Hostname()
		if host != "127.0.0.1" && host != "::1" {
			return invalidRedirect("%q: http is allowed only for the loopback IP literals 127.0.0.1 and [::1] (RFC 8252 §7.3, §8.3)", raw)
		}
	case "javascript", "data", "file", "vbscript", "about", "blob", "ftp", "ws", "wss":
		return invalidRedirect("%q: scheme %q is not allowed", raw, scheme)
	default:
		// RFC 8252 §7.1: private-use URI schemes must be reverse domain
		// names (e.g. com.example.app:/callback).
		if !strings.Contains(scheme, ".") {
			return invalidRedirect("%q: private-use schemes must be a reverse domain name such as com.example.app (RFC 8252 §7.1)", raw)
		}
		if u.Host != "" && u.Opaque == "" && strings.HasPrefix(raw[len(u.Scheme):], "://") {
			// com.example.app://host is accepted by RFC 8252 but discouraged; allow it.
		}
	}
	return nil
}

// validateMetadata fills defaults (RFC 7591 §2) and checks the metadata.
func validateMetadata(m *ClientMetadata) error {
	if len(m.RedirectURIs) == 0 {
		return invalidRedirect("redirect_uris is required for the authorization code grant")
	}
	for _, u := range m.RedirectURIs {
		if err := ValidateRedirectURI(u); err != nil {
			return err
		}
	}
	if m.TokenEndpointAuthMethod == "" {
		m.TokenEndpointAuthMethod = "client_secret_basic" // RFC 7591 §2 default
	}
	switch m.TokenEndpointAuthMethod {
	case "none", "client_secret_basic", "client_secret_post":
	default:
		return invalidMetadata("token_endpoint_auth_method %q is not supported (none, client_secret_basic, client_secret_post)", m.TokenEndpointAuthMethod)
	}
	if len(m.GrantTypes) == 0 {
		m.GrantTypes = []string{"authorization_code", "refresh_token"}
	}
	if len(m.ResponseTypes) == 0 {
		m.ResponseTypes = []string{"code"}
	}
	for _, g := range m.GrantTypes {
		switch g {
		case "authorization_code", "refresh_token":
		case "client_credentials":
			if m.TokenEndpointAuthMethod == "none" {
				return invalidMetadata("public clients (token_endpoint_auth_method none) may use only authorization_code and refresh_token")
			}
		default:
			return invalidMetadata("grant type %q is not supported", g)
		}
	}
	for _, rt := range m.ResponseTypes {
		if rt != "code" {
			return invalidMetadata("response type %q is not supported; only code", rt)
		}
	}
	// RFC 7591 §2.1: grant_types and response_types must agree.
	if slices.Contains(m.GrantTypes, "authorization_code") != slices.Contains(m.ResponseTypes, "code") {
		return invalidMetadata("grant_types and response_types disagree: authorization_code requires response type code and vice versa (RFC 7591 §2.1)")
	}
	if m.Scope == "" {
		m.Scope = "openid offline_access"
	}
	return nil
}

// NewClientID returns a random client_id (128 bits).
func NewClientID() string { return randomString(16) }

// NewClientSecret returns a random client_secret of 256 bits.
func NewClientSecret() string { return randomString(32) }

// RegisterClient validates meta (RFC 7591 §2), creates the client with a
// generated client_id and, for a confidential client, a generated secret
// stored only as its keyed hash. The returned information holds the secret;
// it cannot be recovered later. Errors: *RegistrationError for invalid
// metadata, storage errors otherwise.
func RegisterClient(ctx context.Context, store storage.ClientStore, hasher fosite.Hasher, meta ClientMetadata, now time.Time) (*ClientInformation, error) {
	if err := validateMetadata(&meta); err != nil {
		return nil, err
	}
	c := &storage.Client{
		ID:                      NewClientID(),
		Name:                    meta.ClientName,
		RedirectURIs:            meta.RedirectURIs,
		GrantTypes:              meta.GrantTypes,
		ResponseTypes:           meta.ResponseTypes,
		Scopes:                  strings.Fields(meta.Scope),
		TokenEndpointAuthMethod: meta.TokenEndpointAuthMethod,
		ClientURI:               meta.ClientURI,
		LogoURI:                 meta.LogoURI,
		Contacts:                meta.Contacts,
		SkipConsent:             meta.SkipConsent,
		CreatedAt:               now.UTC().Truncate(time.Microsecond),
		UpdatedAt:               now.UTC().Truncate(time.Microsecond),
	}
	info := &ClientInformation{ClientID: c.ID, ClientIDIssuedAt: now.Unix(), ClientMetadata: meta}
	if !c.IsPublic() {
		secret := NewClientSecret()
		hash, err := hasher.Hash(ctx, []byte(secret))
		if err != nil {
			return nil, err
		}
		c.SecretHash = hash
		info.ClientSecret = secret
		zero := int64(0)
		info.ClientSecretExpiresAt = &zero
	}
	if err := store.CreateClient(ctx, c); err != nil {
		if errors.Is(err, storage.ErrAlreadyExists) {
			return nil, fmt.Errorf("oauth: register client: %w", err)
		}
		return nil, fmt.Errorf("oauth: register client: %w", err)
	}
	return info, nil
}
