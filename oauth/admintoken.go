package oauth

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/authd/authd/secrets"
)

// adminTokens recognises the admin bearer tokens (Config.AdminTokens),
// with which an operator may introspect any token (RFC 7662 §2.1 leaves
// the endpoint's authorization to the server). Each is kept as a keyed
// hash; a presented token's hash is compared with every one, each in
// constant time, so neither the tokens nor their lengths leak through
// timing.
type adminTokens struct {
	key    []byte
	hashes [][]byte
}

func newAdminTokens(secret []byte, tokens []string) adminTokens {
	a := adminTokens{key: secrets.Derive(secret, "admin-credential")}
	for _, t := range tokens {
		if t != "" {
			a.hashes = append(a.hashes, a.hash(t))
		}
	}
	return a
}

func (a adminTokens) hash(token string) []byte {
	return secrets.MAC(a.key, []byte("token"), []byte(token))
}

// match reports whether token is one of the admin tokens.
func (a adminTokens) match(token string) bool {
	h := a.hash(token)
	ok := 0
	for _, t := range a.hashes {
		ok |= subtle.ConstantTimeCompare(h, t)
	}
	return ok == 1 && token != ""
}

// bearerToken returns the token of an "Authorization: Bearer" header (the
// scheme is case-insensitive, RFC 9110 §11.1) and whether one was present.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", h != ""
	}
	return strings.TrimSpace(token), true
}
