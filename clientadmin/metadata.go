package clientadmin

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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
	// PostLogoutRedirectURIs are where RP-initiated logout may return the
	// browser (OpenID Connect RP-Initiated Logout 1.0 §3.1), matched
	// exactly; validated like redirect_uris.
	PostLogoutRedirectURIs []string `json:"post_logout_redirect_uris,omitempty"`
	// IDTokenSignedResponseAlg is the client's ID token alg (OpenID
	// Connect Dynamic Client Registration 1.0 §2): RS256 (the default)
	// or ES256.
	IDTokenSignedResponseAlg string `json:"id_token_signed_response_alg,omitempty"`
	// DPoPBoundAccessTokens (RFC 9449 §5.2): the client must present a
	// DPoP proof on every token request, and so gets only DPoP-bound
	// tokens.
	DPoPBoundAccessTokens bool `json:"dpop_bound_access_tokens,omitempty"`
	// RequirePushedAuthorizationRequests (RFC 9126 §6): the client's
	// authorization requests must come by PAR.
	RequirePushedAuthorizationRequests bool `json:"require_pushed_authorization_requests,omitempty"`
	// BackchannelLogoutURI is where authd POSTs logout tokens (OpenID
	// Connect Back-Channel Logout 1.0 §2.2); validated by
	// validateBackchannelLogoutURI.
	BackchannelLogoutURI string `json:"backchannel_logout_uri,omitempty"`
	// BackchannelLogoutSessionRequired (§2.2): the client wants a sid in
	// logout tokens; authd always sends one. Only with a
	// backchannel_logout_uri.
	BackchannelLogoutSessionRequired bool `json:"backchannel_logout_session_required,omitempty"`
	// RequireMFA (authd's own metadata, issue 27): the client's users must
	// prove a second factor, or set one up, before a code is issued.
	RequireMFA bool `json:"require_mfa,omitempty"`
	// FirstParty (authd's own metadata, issue 28): the client is the
	// operator's own app and may sign users in natively at the
	// Authorization Challenge Endpoint (draft-ietf-oauth-first-party-apps
	// §4); every other client is unauthorized_client there.
	FirstParty bool `json:"first_party,omitempty"`
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

// Hasher hashes client secrets (secrets.Hasher; fosite.Hasher has the
// same method).
type Hasher interface {
	Hash(ctx context.Context, data []byte) ([]byte, error)
}

// ClientCreator stores a new client (storage.ClientStore has it).
type ClientCreator interface {
	CreateClient(ctx context.Context, c *storage.Client) error
}

// randomString returns n random bytes, base64url-encoded.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24).
	return base64.RawURLEncoding.EncodeToString(b)
}

func invalidMetadata(format string, args ...any) error {
	return &Error{Code: "invalid_client_metadata", Description: fmt.Sprintf(format, args...)}
}

func invalidRedirect(format string, args ...any) error {
	return &Error{Code: "invalid_redirect_uri", Description: fmt.Sprintf(format, args...)}
}

// Limits on registered metadata (RFC 7591 §2 leaves them to the server).
const (
	maxRedirectURIs   = 32
	maxRedirectURILen = 2048
	maxClientNameLen  = 256
	maxContacts       = 16
	maxContactLen     = 256
	maxScopeLen       = 2048
	maxURILen         = 2048
)

// uriChars are the bytes RFC 3986 §2 allows in a URI: unreserved, reserved
// and "%" (for percent-encoding). Anything else (spaces, controls,
// backslash, quotes, raw non-ASCII) must be percent-encoded.
var uriChars = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%") {
		t[c] = true
	}
	return t
}()

// ValidateRedirectURI checks one redirect URI for registration. It accepts
// exactly three kinds (RFC 8252 §7, RFC 9700 §2.1 and §4.1):
//
//   - https URIs with a host (claimed https redirects, RFC 8252 §7.2);
//   - private-use schemes named after a reverse domain, with a single slash
//     after the scheme and no authority, e.g. com.example.app:/oauth2redirect
//     (RFC 8252 §7.1);
//   - http on the loopback IP literals 127.0.0.1 and [::1] (RFC 8252 §7.3),
//     with or without a port: at authorization time any port matches.
//     "localhost" is refused (RFC 8252 §8.3: it may resolve off the host).
//
// In every case the URI is absolute, carries no fragment (RFC 6749 §3.1.2),
// no user information, no dot-segments and no wildcard: redirect URIs are
// compared by exact string match (RFC 9700 §2.1), so nothing that would need
// normalization or pattern matching is registered. It returns a
// *Error with code invalid_redirect_uri (RFC 7591 §3.2.2).
func ValidateRedirectURI(raw string) error {
	if raw == "" {
		return invalidRedirect("redirect URI is empty")
	}
	if len(raw) > maxRedirectURILen {
		return invalidRedirect("redirect URI longer than %d bytes", maxRedirectURILen)
	}
	if strings.Contains(raw, "*") {
		// RFC 9700 §2.1: exact matching, so no patterns.
		return invalidRedirect("%q: wildcards are not allowed; redirect URIs are matched exactly (RFC 9700 §2.1)", raw)
	}
	for i := 0; i < len(raw); i++ {
		if !uriChars[raw[i]] {
			return invalidRedirect("%q: contains a character that is not allowed in a URI (RFC 3986 §2); percent-encode it", raw)
		}
	}
	if strings.Contains(raw, "#") {
		// RFC 6749 §3.1.2: the redirection endpoint URI must not include a
		// fragment component.
		return invalidRedirect("%q: must not contain a fragment (RFC 6749 §3.1.2)", raw)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		// RFC 6749 §3.1.2: the redirection endpoint URI must be absolute.
		return invalidRedirect("%q: not an absolute URI (RFC 6749 §3.1.2)", raw)
	}
	if u.User != nil {
		return invalidRedirect("%q: must not contain user information", raw)
	}
	if hasDotSegment(u.EscapedPath()) {
		// Dot-segments would be removed by normalization (RFC 3986 §6.2.2.3),
		// so the registered string and what a browser opens could differ.
		return invalidRedirect("%q: must not contain \".\" or \"..\" path segments", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return invalidRedirect("%q: invalid port", raw)
		}
	}
	switch scheme := u.Scheme; scheme {
	case "https":
		if u.Host == "" || u.Hostname() == "" {
			return invalidRedirect("%q: an https redirect URI needs a host", raw)
		}
	case "http":
		// RFC 8252 §7.3: loopback redirects use the IP literal; §8.3:
		// "localhost" is NOT RECOMMENDED, and authd refuses it, as it
		// refuses every other http host (RFC 9700 §4.1: no cleartext
		// redirects off the device).
		if host := u.Hostname(); host != "127.0.0.1" && host != "::1" {
			return invalidRedirect("%q: http is allowed only for the loopback IP literals 127.0.0.1 and [::1], not localhost or other hosts (RFC 8252 §7.3, §8.3)", raw)
		}
	case "javascript", "data", "file", "vbscript", "about", "blob", "ftp", "ws", "wss", "mailto", "tel":
		return invalidRedirect("%q: scheme %q is not allowed", raw, scheme)
	default:
		// RFC 8252 §7.1: a private-use scheme is a reverse domain name the
		// app controls, e.g. com.example.app.
		if !isReverseDomain(scheme) {
			return invalidRedirect("%q: private-use schemes must be a reverse domain name such as com.example.app (RFC 8252 §7.1)", raw)
		}
		// RFC 8252 §7.1: there is no naming authority for private-use
		// schemes, so only a single slash follows the scheme.
		if u.Opaque != "" || u.Host != "" || strings.HasPrefix(raw[len(scheme)+1:], "//") || !strings.HasPrefix(u.Path, "/") {
			return invalidRedirect("%q: a private-use scheme is followed by a single slash and a path, e.g. %s:/oauth2redirect (RFC 8252 §7.1)", raw, scheme)
		}
	}
	if !fosite.IsValidRedirectURI(u) {
		// Whatever is registered must also pass fosite at authorization time.
		return invalidRedirect("%q: not a valid redirect URI", raw)
	}
	return nil
}

// hasDotSegment reports whether path has a "." or ".." segment, written
// plainly or percent-encoded ("%2e%2e", "%2E."): a server or browser that
// decodes before resolving would see a dot-segment the exact comparison
// does not (RFC 3986 §2.3: %2E is ".", and normalizers decode it).
func hasDotSegment(path string) bool {
	for seg := range strings.SplitSeq(path, "/") {
		if dec, err := url.PathUnescape(seg); err == nil {
			seg = dec
		}
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// isReverseDomain reports whether scheme looks like a reverse domain name:
// at least two dot-separated labels, none empty (url.Parse has already
// checked that it starts with a letter and holds only letters, digits, "+",
// "-" and ".").
func isReverseDomain(scheme string) bool {
	labels := strings.Split(scheme, ".")
	return len(labels) >= 2 && !slices.Contains(labels, "")
}

// validateWebURI checks client_uri and logo_uri (RFC 7591 §2): absolute http
// or https URLs with a host and no user information.
func validateWebURI(field, raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || len(raw) > maxURILen || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return invalidMetadata("%s must be an absolute http or https URL of at most %d bytes (RFC 7591 §2)", field, maxURILen)
	}
	return nil
}

// isScopeToken reports whether tok is a scope-token (RFC 6749 §3.3:
// 1*( %x21 / %x23-5B / %x5D-7E )).
func isScopeToken(tok string) bool {
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return tok != ""
}

// hasControl reports whether s contains a control character or is not UTF-8.
func hasControl(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	return strings.ContainsFunc(s, unicode.IsControl)
}

// validateMetadata fills defaults (RFC 7591 §2) and checks the metadata. It
// returns a *Error (RFC 7591 §3.2.2).
func validateMetadata(m *ClientMetadata) error {
	if len(m.GrantTypes) == 0 {
		m.GrantTypes = []string{"authorization_code", "refresh_token"}
	}
	// A client_credentials-only service never redirects a browser.
	usesCode := slices.Contains(m.GrantTypes, "authorization_code")
	if len(m.RedirectURIs) == 0 && usesCode {
		return invalidRedirect("redirect_uris is required for the authorization code grant (RFC 7591 §2)")
	}
	if len(m.RedirectURIs) > maxRedirectURIs {
		return invalidRedirect("at most %d redirect_uris", maxRedirectURIs)
	}
	for _, u := range m.RedirectURIs {
		if err := ValidateRedirectURI(u); err != nil {
			return err
		}
	}
	if len(m.PostLogoutRedirectURIs) > maxRedirectURIs {
		return invalidMetadata("at most %d post_logout_redirect_uris", maxRedirectURIs)
	}
	for _, u := range m.PostLogoutRedirectURIs {
		if err := ValidateRedirectURI(u); err != nil {
			return invalidMetadata("post_logout_redirect_uris: %v", err)
		}
	}
	if m.BackchannelLogoutURI != "" {
		if err := validateBackchannelLogoutURI(m.BackchannelLogoutURI); err != nil {
			return err
		}
	} else if m.BackchannelLogoutSessionRequired {
		return invalidMetadata("backchannel_logout_session_required needs a backchannel_logout_uri")
	}
	switch m.IDTokenSignedResponseAlg {
	case "", "RS256", "ES256":
	default:
		// OIDC Core §15.1: RS256 is mandatory; "none" is never accepted.
		return invalidMetadata("id_token_signed_response_alg %q is not supported (RS256, ES256)", m.IDTokenSignedResponseAlg)
	}
	if len(m.ClientName) > maxClientNameLen || hasControl(m.ClientName) {
		return invalidMetadata("client_name must be at most %d bytes of text without control characters", maxClientNameLen)
	}
	if m.TokenEndpointAuthMethod == "" {
		m.TokenEndpointAuthMethod = "client_secret_basic" // RFC 7591 §2 default
	}
	switch m.TokenEndpointAuthMethod {
	case "none", "client_secret_basic", "client_secret_post":
	default:
		return invalidMetadata("token_endpoint_auth_method %q is not supported (none, client_secret_basic, client_secret_post)", m.TokenEndpointAuthMethod)
	}
	if len(m.ResponseTypes) == 0 && usesCode {
		m.ResponseTypes = []string{"code"}
	}
	for _, g := range m.GrantTypes {
		switch g {
		case "authorization_code", "refresh_token":
		case "urn:ietf:params:oauth:grant-type:token-exchange":
			// RFC 8693: the native sign-in with a provider's ID token
			// (issue 25), for public (native) clients too.
		case "client_credentials":
			// Public clients cannot authenticate, so they are code +
			// refresh only (RFC 8252 §8.5, RFC 9700 §2.5).
			if m.TokenEndpointAuthMethod == "none" {
				return invalidMetadata("public clients (token_endpoint_auth_method none) may use only authorization_code, refresh_token and token exchange")
			}
		default:
			return invalidMetadata("grant type %q is not supported", g)
		}
	}
	for _, rt := range m.ResponseTypes {
		if rt != "code" {
			// RFC 9700 §2.1.2: no implicit grant (response type token).
			return invalidMetadata("response type %q is not supported; only code (RFC 9700 §2.1.2)", rt)
		}
	}
	// RFC 7591 §2.1: grant_types and response_types must agree.
	if slices.Contains(m.GrantTypes, "authorization_code") != slices.Contains(m.ResponseTypes, "code") {
		return invalidMetadata("grant_types and response_types disagree: authorization_code requires response type code and vice versa (RFC 7591 §2.1)")
	}
	if slices.Contains(m.GrantTypes, "refresh_token") && !slices.Contains(m.GrantTypes, "authorization_code") &&
		!slices.Contains(m.GrantTypes, "urn:ietf:params:oauth:grant-type:token-exchange") {
		return invalidMetadata("grant type refresh_token needs a grant that issues refresh tokens: authorization_code (RFC 7591 §2.1)")
	}
	if m.Scope == "" {
		m.Scope = "openid offline_access"
	}
	if len(m.Scope) > maxScopeLen {
		return invalidMetadata("scope longer than %d bytes", maxScopeLen)
	}
	scopes := strings.Fields(m.Scope)
	for _, sc := range scopes {
		if !isScopeToken(sc) {
			return invalidMetadata("scope %q is not a valid scope-token (RFC 6749 §3.3)", sc)
		}
	}
	m.Scope = strings.Join(scopes, " ")
	if err := validateWebURI("client_uri", m.ClientURI); err != nil {
		return err
	}
	if err := validateWebURI("logo_uri", m.LogoURI); err != nil {
		return err
	}
	if len(m.Contacts) > maxContacts {
		return invalidMetadata("at most %d contacts", maxContacts)
	}
	for _, c := range m.Contacts {
		if c == "" || len(c) > maxContactLen || hasControl(c) {
			return invalidMetadata("contacts must be non-empty strings of at most %d bytes without control characters", maxContactLen)
		}
	}
	return nil
}

// NewClientID returns a random client_id (128 bits).
func NewClientID() string { return randomString(16) }

// NewClientSecret returns a random client_secret of 256 bits.
func NewClientSecret() string { return randomString(32) }

// clientFromMetadata builds the stored client with the given ID from
// validated metadata (see validateMetadata). It has no secret.
func clientFromMetadata(id string, meta ClientMetadata, createdAt, updatedAt time.Time) *storage.Client {
	return &storage.Client{
		ID:                                 id,
		Name:                               meta.ClientName,
		RedirectURIs:                       slices.Clone(meta.RedirectURIs),
		GrantTypes:                         slices.Clone(meta.GrantTypes),
		ResponseTypes:                      slices.Clone(meta.ResponseTypes),
		Scopes:                             strings.Fields(meta.Scope),
		TokenEndpointAuthMethod:            meta.TokenEndpointAuthMethod,
		ClientURI:                          meta.ClientURI,
		LogoURI:                            meta.LogoURI,
		Contacts:                           slices.Clone(meta.Contacts),
		SkipConsent:                        meta.SkipConsent,
		PostLogoutRedirectURIs:             slices.Clone(meta.PostLogoutRedirectURIs),
		IDTokenSignedResponseAlg:           meta.IDTokenSignedResponseAlg,
		DPoPBoundAccessTokens:              meta.DPoPBoundAccessTokens,
		RequirePushedAuthorizationRequests: meta.RequirePushedAuthorizationRequests,
		BackchannelLogoutURI:               meta.BackchannelLogoutURI,
		BackchannelLogoutSessionRequired:   meta.BackchannelLogoutSessionRequired,
		RequireMFA:                         meta.RequireMFA,
		FirstParty:                         meta.FirstParty,
		CreatedAt:                          storage.NormalizeTime(createdAt),
		UpdatedAt:                          storage.NormalizeTime(updatedAt),
	}
}

// clientInformation returns the RFC 7591 §3.2.1 client information of c,
// without a client_secret (authd cannot recover it): client_id,
// client_id_issued_at, client_secret_expires_at (0, "never", for
// confidential clients) and the registered metadata.
func clientInformation(c *storage.Client) *ClientInformation {
	info := &ClientInformation{
		ClientID:         c.ID,
		ClientIDIssuedAt: c.CreatedAt.Unix(),
		ClientMetadata: ClientMetadata{
			ClientName:                         c.Name,
			RedirectURIs:                       slices.Clone(c.RedirectURIs),
			GrantTypes:                         slices.Clone(c.GrantTypes),
			ResponseTypes:                      slices.Clone(c.ResponseTypes),
			TokenEndpointAuthMethod:            c.TokenEndpointAuthMethod,
			Scope:                              strings.Join(c.Scopes, " "),
			ClientURI:                          c.ClientURI,
			LogoURI:                            c.LogoURI,
			Contacts:                           slices.Clone(c.Contacts),
			SkipConsent:                        c.SkipConsent,
			PostLogoutRedirectURIs:             slices.Clone(c.PostLogoutRedirectURIs),
			IDTokenSignedResponseAlg:           c.IDTokenSignedResponseAlg,
			DPoPBoundAccessTokens:              c.DPoPBoundAccessTokens,
			RequirePushedAuthorizationRequests: c.RequirePushedAuthorizationRequests,
			BackchannelLogoutURI:               c.BackchannelLogoutURI,
			BackchannelLogoutSessionRequired:   c.BackchannelLogoutSessionRequired,
			RequireMFA:                         c.RequireMFA,
			FirstParty:                         c.FirstParty,
		},
	}
	if info.RedirectURIs == nil {
		info.RedirectURIs = []string{}
	}
	if !c.IsPublic() {
		zero := int64(0)
		info.ClientSecretExpiresAt = &zero
	}
	return info
}

// issueSecret generates a client_secret of 256 bits, stores its keyed hash
// in c and returns it. The secret itself is never stored.
func issueSecret(ctx context.Context, hasher Hasher, c *storage.Client) (string, error) {
	secret := NewClientSecret()
	hash, err := hasher.Hash(ctx, []byte(secret))
	if err != nil {
		return "", fmt.Errorf("clientadmin: hash client secret: %w", err)
	}
	c.SecretHash = hash
	return secret, nil
}

// RegisterClient validates meta (RFC 7591 §2), creates the client with a
// generated client_id and, for a confidential client, a generated secret
// stored only as its keyed hash. The returned information holds the secret;
// it cannot be recovered later. Errors: *Error for invalid metadata,
// storage errors otherwise. It is not idempotent: Service.Create adds
// Idempotency-Key handling on top of the same validation.
func RegisterClient(ctx context.Context, store ClientCreator, hasher Hasher, meta ClientMetadata, now time.Time) (*ClientInformation, error) {
	if err := validateMetadata(&meta); err != nil {
		return nil, err
	}
	return createClient(ctx, store, hasher, meta, now)
}

// createClient stores a client for already validated meta, with a new
// client_id and, for a confidential client, a new secret (returned once,
// stored as its keyed hash).
func createClient(ctx context.Context, store ClientCreator, hasher Hasher, meta ClientMetadata, now time.Time) (*ClientInformation, error) {
	c := clientFromMetadata(NewClientID(), meta, now, now)
	var secret string
	if !c.IsPublic() {
		var err error
		if secret, err = issueSecret(ctx, hasher, c); err != nil {
			return nil, err
		}
	}
	if err := store.CreateClient(ctx, c); err != nil {
		return nil, fmt.Errorf("clientadmin: register client: %w", err)
	}
	info := clientInformation(c)
	info.ClientSecret = secret
	return info, nil
}
