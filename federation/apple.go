package federation

import (
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// appleSecretTTL is the lifetime of Apple's client-secret JWT (Apple
// allows up to six months; authd makes a fresh one per use).
const appleSecretTTL = 5 * time.Minute

// ClientSecret is the client_secret to present at the provider's token
// endpoint: the stored secret, or for Apple an ES256 JWT signed with the
// team's key (Apple, "Creating a client secret": iss team_id, sub
// client_id, aud https://appleid.apple.com, kid key_id).
func (p *Provider) ClientSecret(now time.Time) (string, error) {
	if p.Kind != KindApple {
		return p.Secret, nil
	}
	key, err := ParseAppleKey([]byte(p.Secret))
	if err != nil {
		return "", err
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithHeader("kid", p.KeyID))
	if err != nil {
		return "", fmt.Errorf("federation: apple client secret: %w", err)
	}
	claims := jwt.Claims{Issuer: p.TeamID, Subject: p.ClientID, Audience: jwt.Audience{AppleIssuer},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(appleSecretTTL))}
	return jwt.Signed(sig).Claims(claims).Serialize()
}
