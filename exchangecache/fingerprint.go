package exchangecache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// fingerprintLabel separates fingerprints from any other SHA-256 use.
const fingerprintLabel = "authd/exchangecache/fingerprint/v1"

// Fingerprint returns the request fingerprint that decides whether a retried
// exchange is "the same request": 64 lower-case hex characters of
//
//	SHA-256( "authd/exchangecache/fingerprint/v1"
//	         || u64be(len(clientID))    || clientID
//	         || u64be(len(redirectURI)) || redirectURI
//	         || SHA-256(codeVerifier) )
//
// Every variable-length field is length-prefixed, so no two different inputs
// share an encoding (client "a", redirect "bc" differs from "ab", "c"). The
// verifier enters only through its SHA-256 and the result is itself a hash, so
// the stored fingerprint does not reveal the verifier that the sealing key is
// derived from. Pass the values exactly as the client sent them (the same strings the
// OAuth layer compares). For the refresh grant pass redirectURI "" and the
// presented refresh token as codeVerifier.
func Fingerprint(clientID, redirectURI, codeVerifier string) string {
	v := sha256.Sum256([]byte(codeVerifier))
	h := sha256.New()
	var n [8]byte
	h.Write([]byte(fingerprintLabel))
	binary.BigEndian.PutUint64(n[:], uint64(len(clientID)))
	h.Write(n[:])
	h.Write([]byte(clientID))
	binary.BigEndian.PutUint64(n[:], uint64(len(redirectURI)))
	h.Write(n[:])
	h.Write([]byte(redirectURI))
	h.Write(v[:])
	return hex.EncodeToString(h.Sum(nil))
}

// boundLabel separates key-bound fingerprints.
const boundLabel = "authd/exchangecache/fingerprint/dpop/v1"

// BoundFingerprint is the fingerprint of a request that presented a DPoP
// proof (RFC 9449) from the key whose JWK thumbprint (RFC 7638) is jkt:
// a retry is the same request only with a proof from the same key. It is
// fingerprint itself when jkt is "" (no proof), so requests without DPoP
// keep the fingerprint they always had, and one with a proof never
// matches one without.
//
//	SHA-256( "authd/exchangecache/fingerprint/dpop/v1"
//	         || u64be(len(fingerprint)) || fingerprint
//	         || u64be(len(jkt))         || jkt )
func BoundFingerprint(fingerprint, jkt string) string {
	if jkt == "" {
		return fingerprint
	}
	h := sha256.New()
	var n [8]byte
	h.Write([]byte(boundLabel))
	binary.BigEndian.PutUint64(n[:], uint64(len(fingerprint)))
	h.Write(n[:])
	h.Write([]byte(fingerprint))
	binary.BigEndian.PutUint64(n[:], uint64(len(jkt)))
	h.Write(n[:])
	h.Write([]byte(jkt))
	return hex.EncodeToString(h.Sum(nil))
}
