package oauth

import "github.com/ory/fosite"

// sessionAMR reads the authentication methods (RFC 8176) that userSession
// stored with the code from the browser session ("amr": a []string, or
// []any after a round trip through storage), for the ID token's amr
// claim (OpenID Connect Core §2). A grant from before it was stored has
// none: the claim is omitted rather than invented.
func sessionAMR(ar fosite.Requester) []string {
	s, ok := ar.GetSession().(*fosite.DefaultSession)
	if !ok || s.Extra == nil {
		return nil
	}
	switch v := s.Extra["amr"].(type) {
	case []string:
		return v
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			if str, ok := x.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}
