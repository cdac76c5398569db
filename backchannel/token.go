package backchannel

import (
	"context"
	"encoding/json"
	"time"

	"github.com/authd/authd/storage"
)

// EventType is the member of a logout token's events claim (§2.4).
const EventType = "http://schemas.openid.net/event/backchannel-logout"

// TokenType is the JWS typ of a logout token (§2.4: explicit typing, so it
// is never accepted as an ID token).
const TokenType = "logout+jwt"

// TokenLifetime is the exp of a logout token after its iat: two minutes,
// as the issue asks; each attempt signs anew.
const TokenLifetime = 2 * time.Minute

// Signer signs with the ID token keys (signing.Manager).
type Signer interface {
	// Prepare loads the keys, so that SignType does no I/O.
	Prepare(ctx context.Context) error
	// SignType signs payload as a compact JWS with the current key for
	// alg and header typ.
	SignType(ctx context.Context, alg, typ string, payload []byte) (string, error)
}

// Claims are a logout token's claims (§2.4). It has no nonce: §2.4
// forbids one, so a logout token cannot pass for an ID token.
type Claims struct {
	Issuer   string                     `json:"iss"`
	Audience string                     `json:"aud"`
	IssuedAt int64                      `json:"iat"`
	Expiry   int64                      `json:"exp"`
	JTI      string                     `json:"jti"`
	Events   map[string]json.RawMessage `json:"events"`
	Subject  string                     `json:"sub,omitempty"`
	SID      string                     `json:"sid,omitempty"`
}

// claims are the logout token of d at now.
func claims(issuer string, d *storage.LogoutDelivery, now time.Time) Claims {
	return Claims{Issuer: issuer, Audience: d.ClientID, IssuedAt: now.Unix(), Expiry: now.Add(TokenLifetime).Unix(),
		JTI: d.JTI, Events: map[string]json.RawMessage{EventType: json.RawMessage(`{}`)}, Subject: d.Subject, SID: d.SID}
}

// Token signs the logout token of d at now with the client's ID token alg
// (RS256 when it has none).
func Token(ctx context.Context, s Signer, issuer string, d *storage.LogoutDelivery, now time.Time) (string, error) {
	payload, err := json.Marshal(claims(issuer, d, now))
	if err != nil {
		return "", err
	}
	alg := d.Alg
	if alg == "" {
		alg = "RS256"
	}
	return s.SignType(ctx, alg, TokenType, payload)
}
