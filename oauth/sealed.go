package oauth

import (
	"encoding/binary"
	"errors"
	"time"
)

// sealedResponse is the plaintext of a replay record and of a replay
// cache entry: the response, the access token's absolute expiry (a replay
// recomputes expires_in from it) and, for the refresh grant, the scope the
// first request asked for (nil: omitted).
type sealedResponse struct {
	Body      tokenBody
	ExpiresAt time.Time
	Scope     []string
}

// sealedVersion is the first byte of the encoding. Version 2 added the
// id_token after refresh_token; version 1 (written before ID tokens, still
// in replay windows during an upgrade) decodes with no ID token. A record
// of any other version does not open (a retry then is treated as reuse).
const (
	sealedVersion   = 2
	sealedVersionV1 = 1
)

var errSealedFormat = errors.New("oauth: malformed sealed response")

// marshal encodes r compactly: a version byte, the access token's expiry
// (Unix seconds, 8 bytes), then uvarint-length-prefixed access_token,
// token_type, scope, refresh_token and id_token, then the count of requested scopes
// and each of them. Replays decode it on the hot path, where JSON cost
// more than the AEAD.
func (r *sealedResponse) marshal() []byte {
	b := make([]byte, 0, 20+len(r.Body.AccessToken)+len(r.Body.TokenType)+len(r.Body.Scope)+len(r.Body.RefreshToken)+len(r.Body.IDToken)+8*len(r.Scope))
	b = append(b, sealedVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(r.ExpiresAt.Unix()))
	for _, s := range []string{r.Body.AccessToken, r.Body.TokenType, r.Body.Scope, r.Body.RefreshToken, r.Body.IDToken} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	if r.Scope == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Scope))+1)
	for _, s := range r.Scope {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// unmarshal decodes what marshal encoded.
func (r *sealedResponse) unmarshal(b []byte) error {
	if len(b) < 9 || (b[0] != sealedVersion && b[0] != sealedVersionV1) {
		return errSealedFormat
	}
	version := b[0]
	r.ExpiresAt = time.Unix(int64(binary.BigEndian.Uint64(b[1:9])), 0)
	b = b[9:]
	next := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	var ok [5]bool
	r.Body.AccessToken, ok[0] = next()
	r.Body.TokenType, ok[1] = next()
	r.Body.Scope, ok[2] = next()
	r.Body.RefreshToken, ok[3] = next()
	r.Body.IDToken, ok[4] = "", true
	if version >= 2 {
		r.Body.IDToken, ok[4] = next()
	}
	if !ok[0] || !ok[1] || !ok[2] || !ok[3] || !ok[4] {
		return errSealedFormat
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return errSealedFormat
	}
	b = b[k:]
	r.Scope = nil
	if n > 0 {
		r.Scope = make([]string, 0, n-1)
		for range n - 1 {
			s, ok := next()
			if !ok {
				return errSealedFormat
			}
			r.Scope = append(r.Scope, s)
		}
	}
	if len(b) != 0 {
		return errSealedFormat
	}
	return nil
}
