package oauth

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/ory/fosite"
)

// handleJWKS serves the ID token signing keys as a JWK Set (RFC 7517 §5) at
// jwks_uri (OpenID Connect Discovery 1.0 §3): the next, current and retired
// generations. Its Cache-Control max-age is shorter than the time a new key
// is published before it signs (signing.Config.JWKSMaxAge), so a relying
// party that caches as told never meets a kid it has not fetched; go-oidc
// and openid-client also refetch on an unknown kid.
func (s *Server) handleJWKS(w http.ResponseWriter, r *http.Request) {
	set, err := s.keys.JWKS(r.Context())
	if err != nil {
		s.log.Error("jwks", "error", err)
		s.writeError(w, r, fosite.ErrServerError.WithHint("The signing keys are unavailable; retry later."))
		return
	}
	w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(s.keys.Config().JWKSMaxAge().Seconds())))
	w.Header().Set("Content-Type", "application/jwk-set+json")
	_ = json.NewEncoder(w).Encode(set)
}
