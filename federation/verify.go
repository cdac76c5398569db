package federation

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// Skew is the clock difference tolerated on exp and iat.
const Skew = 30 * time.Second

// Identity is what a verified provider ID token says.
type Identity struct {
	ProviderID    string
	Issuer        string
	Sub           string
	Email         string
	EmailVerified bool
	Name          string
	Audience      string
	Expiry        time.Time
}

// Refusal is a provider ID token refused, with a short reason for metrics
// ("signature", "issuer", "audience", "expired", "nonce", "kid",
// "malformed") and a description fit for an error_description.
type Refusal struct {
	Reason      string
	Description string
}

func (e *Refusal) Error() string { return "federation: " + e.Reason + ": " + e.Description }

func refuse(reason, desc string) *Refusal { return &Refusal{Reason: reason, Description: desc} }

// ErrProviderUnavailable: the provider's discovery document or keys could
// not be read; nothing was decided about the token.
var ErrProviderUnavailable = errors.New("federation: provider metadata or keys unavailable")

// Check is what a token must satisfy beyond signature, issuer and expiry.
type Check struct {
	// Audiences: one of them must be in aud.
	Audiences []string
	// Nonce, when set, must equal the token's nonce claim (the browser
	// path: the nonce authd sent).
	Nonce string
	// RawNonce is the native path's nonce parameter: for Apple it is
	// required and the token's nonce is its lowercase hex SHA-256; for
	// others, when sent, the token's nonce is it or its hash.
	RawNonce string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// UnverifiedIssuer returns the iss claim of a JWT without verifying it
// (to pick the provider whose keys verify it), or "".
func UnverifiedIssuer(raw string) string {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Iss string `json:"iss"`
	}
	if json.Unmarshal(payload, &c) != nil {
		return ""
	}
	return c.Iss
}

// claims are the ID token claims read beyond go-oidc's.
type claims struct {
	Email         string          `json:"email"`
	EmailVerified json.RawMessage `json:"email_verified"`
	Name          string          `json:"name"`
	Nonce         string          `json:"nonce"`
	IssuedAt      *float64        `json:"iat"`
}

// emailVerified reads email_verified: a boolean, or Apple's strings
// "true" and "false".
func emailVerified(raw json.RawMessage) bool {
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return b
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == "true"
}

// VerifyIDToken verifies raw as an ID token of p (signature against p's
// JWKS, iss, exp and iat within Skew, aud, nonce) with go-oidc.
func (p *Provider) VerifyIDToken(ctx context.Context, raw string, c Check) (*Identity, error) {
	now := c.Now
	if now == nil {
		now = time.Now
	}
	ks, err := p.keySet(ctx)
	if err != nil {
		return nil, errors.Join(ErrProviderUnavailable, err)
	}
	v := oidc.NewVerifier(p.Issuer, ks, &oidc.Config{
		SkipClientIDCheck:    true, // one of several audiences: checked below
		SupportedSigningAlgs: []string{"RS256", "RS384", "RS512", "ES256", "ES384", "PS256"},
		Now:                  func() time.Time { return now().Add(-Skew) },
	})
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		var expired *oidc.TokenExpiredError
		switch {
		case errors.As(err, &expired):
			return nil, refuse("expired", "The subject token has expired.")
		case errors.Is(err, errUnknownKID) || strings.Contains(err.Error(), errUnknownKID.Error()): // go-oidc formats it with %v
			return nil, refuse("kid", "The subject token is signed with a key the provider does not publish.")
		case strings.Contains(err.Error(), "id token issued by a different provider"):
			return nil, refuse("issuer", "The subject token was issued by another issuer.")
		case strings.Contains(err.Error(), "fetch jwks"):
			return nil, errors.Join(ErrProviderUnavailable, err)
		case strings.Contains(err.Error(), "malformed"):
			return nil, refuse("malformed", "The subject token is not a JWT.")
		}
		return nil, refuse("signature", "The subject token's signature does not verify.")
	}
	var cl claims
	if err := tok.Claims(&cl); err != nil {
		return nil, refuse("malformed", "The subject token's claims cannot be read.")
	}
	if cl.IssuedAt == nil || time.Unix(int64(*cl.IssuedAt), 0).After(now().Add(Skew)) {
		return nil, refuse("expired", "The subject token's iat is missing or in the future.")
	}
	aud := ""
	for _, a := range tok.Audience {
		if slices.Contains(c.Audiences, a) {
			aud = a
			break
		}
	}
	if aud == "" {
		return nil, refuse("audience", "The subject token's audience is not one this provider accepts.")
	}
	if err := checkNonce(p.Kind, cl.Nonce, c); err != nil {
		return nil, err
	}
	return &Identity{ProviderID: p.ID, Issuer: tok.Issuer, Sub: tok.Subject, Email: cl.Email,
		EmailVerified: cl.Email != "" && emailVerified(cl.EmailVerified), Name: cl.Name, Audience: aud, Expiry: tok.Expiry}, nil
}

// checkNonce: the browser's nonce exactly; natively, Apple's nonce is the
// lowercase hex SHA-256 of the raw nonce the app sends (Apple's samples).
func checkNonce(kind, got string, c Check) error {
	eq := func(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
	switch {
	case c.Nonce != "":
		if !eq(got, c.Nonce) {
			return refuse("nonce", "The ID token's nonce is not the one sent.")
		}
	case kind == KindApple:
		if c.RawNonce == "" {
			return refuse("nonce", "The nonce parameter is required for this provider (the raw nonce whose SHA-256 the app sent).")
		}
		if !eq(got, HashNonce(c.RawNonce)) {
			return refuse("nonce", "The subject token's nonce is not the SHA-256 of the nonce parameter.")
		}
	case c.RawNonce != "":
		if !eq(got, c.RawNonce) && !eq(got, HashNonce(c.RawNonce)) {
			return refuse("nonce", "The subject token's nonce does not match the nonce parameter.")
		}
	}
	return nil
}

// HashNonce is the lowercase hex SHA-256 of a raw nonce.
func HashNonce(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:])
}
