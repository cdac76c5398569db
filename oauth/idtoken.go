package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/ory/fosite"

	"github.com/authd/authd/signing"
	"github.com/authd/authd/storage"
)

// idTokenClaims are the claims of an ID token (OpenID Connect Core §2,
// §5.1). Field order is the order in the JWT.
type idTokenClaims struct {
	Issuer        string   `json:"iss"`
	Subject       string   `json:"sub"`
	Audience      []string `json:"aud"`
	AZP           string   `json:"azp"`
	Expires       int64    `json:"exp"`
	IssuedAt      int64    `json:"iat"`
	AuthTime      int64    `json:"auth_time,omitempty"`
	AMR           []string `json:"amr,omitempty"`
	Nonce         string   `json:"nonce,omitempty"`
	ATHash        string   `json:"at_hash,omitempty"`
	SID           string   `json:"sid,omitempty"`
	Email         string   `json:"email,omitempty"`
	EmailVerified *bool    `json:"email_verified,omitempty"`
	Name          string   `json:"name,omitempty"`
}

// idTokenAlg is the client's id_token_signed_response_alg (OpenID Connect
// Dynamic Client Registration §2), RS256 when unset (OpenID Connect Core
// §15.1: the default and mandatory to implement).
func idTokenAlg(c fosite.Client) string {
	if sc, ok := c.(*storage.Client); ok && sc.IDTokenSignedResponseAlg != "" {
		return sc.IDTokenSignedResponseAlg
	}
	return signing.RS256
}

// sessionExtra reads the OpenID Connect facts userSession stored with the
// code: the browser session ("sid"), when the user authenticated
// ("auth_time", Unix seconds; a JSON number after a round trip through
// storage) and the authorization request's "nonce".
func sessionExtra(ar fosite.Requester) (sid string, authTime int64, nonce string) {
	s, ok := ar.GetSession().(*fosite.DefaultSession)
	if !ok || s.Extra == nil {
		return "", 0, ""
	}
	sid, _ = s.Extra["sid"].(string)
	nonce, _ = s.Extra["nonce"].(string)
	switch v := s.Extra["auth_time"].(type) {
	case int64:
		authTime = v
	case float64:
		authTime = int64(math.Round(v))
	case json.Number:
		authTime, _ = v.Int64()
	}
	return sid, authTime, nonce
}

// atHash is the at_hash of an access token for RS256 and ES256 (OpenID
// Connect Core §3.1.3.6): the base64url left half of its SHA-256.
func atHash(accessToken string) string {
	sum := sha256.Sum256([]byte(accessToken))
	return base64.RawURLEncoding.EncodeToString(sum[:len(sum)/2])
}

// idToken signs the ID token of a token response (OpenID Connect Core
// §3.1.3.3) when the granted scope includes openid; "" otherwise. It runs
// inside the exchange transaction, before the commit (issue 12 item 4): if
// it fails, nothing commits and the code stays unused.
//
// For the refresh grant (§12.2) the claims are those of the original
// authentication: the same sub and auth_time and sid, no nonce. A grant
// issued before ID tokens existed carries no auth_time: it is omitted
// rather than invented.
func (x *grantExchanger) idToken(ctx context.Context, req *tokenRequest, ar fosite.AccessRequester, accessToken string) (string, error) {
	if !ar.GetGrantedScopes().Has("openid") || x.keys == nil {
		return "", nil
	}
	sess, _ := ar.GetSession().(*fosite.DefaultSession)
	if sess == nil || sess.Subject == "" {
		return "", nil // client_credentials: no end-user, no ID token
	}
	now := x.now()
	sid, authTime, nonce := sessionExtra(ar)
	if req.grantType == "refresh_token" {
		nonce = ""
	}
	c := idTokenClaims{
		Issuer: x.issuer, Subject: sess.Subject,
		Audience: []string{req.client.GetID()}, AZP: req.client.GetID(),
		Expires: now.Add(x.idTokenTTL).Unix(), IssuedAt: now.Unix(),
		AuthTime: authTime, AMR: sessionAMR(ar), Nonce: nonce, ATHash: atHash(accessToken), SID: sid,
	}
	if ar.GetGrantedScopes().Has("email") || ar.GetGrantedScopes().Has("profile") {
		if u, err := x.users.GetUserBySubject(ctx, sess.Subject); err == nil {
			addProfileClaims(&c, u, ar.GetGrantedScopes())
		} else if !errors.Is(err, storage.ErrNotFound) {
			return "", fosite.ErrServerError.WithWrap(err)
		}
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fosite.ErrServerError.WithWrap(err)
	}
	jwt, err := x.keys.Sign(ctx, idTokenAlg(req.client), payload)
	if err != nil {
		return "", fosite.ErrServerError.WithWrap(fmt.Errorf("sign ID token: %w", err)).WithHint("The ID token could not be signed; nothing was used up, retry.")
	}
	return jwt, nil
}

// addProfileClaims adds the claims of the email and profile scopes (OpenID
// Connect Core §5.4) that the user has.
func addProfileClaims(c *idTokenClaims, u *storage.User, granted fosite.Arguments) {
	if granted.Has("email") && u.Email != "" {
		v := u.EmailVerified
		c.Email, c.EmailVerified = u.Email, &v
	}
	if granted.Has("profile") && u.Name != "" {
		c.Name = u.Name
	}
}
