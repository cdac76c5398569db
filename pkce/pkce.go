package pkce

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
)

// Code challenge methods (RFC 7636 §4.2, §4.3).
const (
	// MethodS256 is BASE64URL-ENCODE(SHA256(ASCII(code_verifier))). It is
	// the only method accepted by default.
	MethodS256 = "S256"
	// MethodPlain sends the verifier itself as the challenge. It is
	// accepted only when explicitly allowed; an empty
	// code_challenge_method means plain (RFC 7636 §4.3).
	MethodPlain = "plain"
)

// Form keys of the authorization request (RFC 7636 §4.3) and of the token
// request (RFC 7636 §4.5).
const (
	ChallengeKey       = "code_challenge"
	ChallengeMethodKey = "code_challenge_method"
	VerifierKey        = "code_verifier"
)

const (
	minVerifierLen   = 43 // RFC 7636 §4.1
	maxVerifierLen   = 128
	s256ChallengeLen = 43 // base64url of 32 octets, no padding (RFC 7636 §4.2, Appendix A)
)

// Sentinel errors returned by this package, possibly wrapped with
// detail. Compare them with errors.Is. No error message ever contains a
// code_verifier.
var (
	// ErrVerifierFormat means the code_verifier is not 43 to 128 characters of
	// [A-Za-z0-9-._~] (RFC 7636 §4.1).
	ErrVerifierFormat = errors.New("pkce: malformed code_verifier")
	// ErrChallengeFormat means the code_challenge does not fit its method
	// (RFC 7636 §4.2).
	ErrChallengeFormat = errors.New("pkce: malformed code_challenge")
	// ErrChallengeRequired means no code_challenge was given, and PKCE is
	// required (RFC 7636 §4.4.1, RFC 9700 §2.1.1).
	ErrChallengeRequired = errors.New("pkce: code_challenge required")
	// ErrVerifierRequired means a token request for a code bound to a
	// code_challenge carries no code_verifier (RFC 7636 §4.5). Only
	// [Handler] returns it, wrapped in invalid_request.
	ErrVerifierRequired = errors.New("pkce: code_verifier required")
	// ErrMethodNotAllowed means the code_challenge_method is unknown, or is
	// plain (or empty) while plain is not allowed (RFC 7636 §4.2, §4.4.1).
	ErrMethodNotAllowed = errors.New("pkce: code_challenge_method not allowed")
	// ErrMismatch means the code_verifier does not transform to the
	// code_challenge (RFC 7636 §4.6).
	ErrMismatch = errors.New("pkce: code_verifier does not match code_challenge")
)

// ValidateVerifier reports whether v is a well-formed code_verifier:
// 43 to 128 characters from the unreserved set [A-Za-z0-9-._~]
// (RFC 7636 §4.1). It returns nil or an error wrapping [ErrVerifierFormat].
//
// Call it on the code_verifier of every token request before any
// comparison; [Verify] calls it itself.
func ValidateVerifier(v string) error {
	if n := len(v); n < minVerifierLen || n > maxVerifierLen { // RFC 7636 §4.1: min 43, max 128 characters
		return fmt.Errorf("%w: length %d, want %d to %d", ErrVerifierFormat, n, minVerifierLen, maxVerifierLen)
	}
	for i := 0; i < len(v); i++ {
		if !isUnreserved(v[i]) { // RFC 7636 §4.1: ALPHA / DIGIT / "-" / "." / "_" / "~"
			return fmt.Errorf("%w: character at offset %d is outside [A-Za-z0-9-._~]", ErrVerifierFormat, i)
		}
	}
	return nil
}

// ValidateChallenge reports whether the code_challenge c and its
// code_challenge_method are acceptable, as sent in an authorization request
// (RFC 7636 §4.4.1). S256 is always accepted; plain, and the empty method
// that means plain (RFC 7636 §4.3), only when allowPlain is true.
//
// It returns nil, or an error wrapping [ErrChallengeRequired] (c is empty),
// [ErrMethodNotAllowed] (unknown method, or plain not allowed) or
// [ErrChallengeFormat] (an S256 challenge that is not exactly 43 base64url
// characters without padding encoding 32 octets; a plain challenge that is
// not a valid verifier).
func ValidateChallenge(c, method string, allowPlain bool) error {
	if c == "" { // RFC 7636 §4.4.1; RFC 9700 §2.1.1: PKCE is required for every client
		return ErrChallengeRequired
	}
	switch method {
	case MethodS256:
		// RFC 7636 §4.2: BASE64URL-ENCODE(SHA256(...)) is 43 characters,
		// no padding. Strict decoding also rejects non-zero trailing bits,
		// so only the canonical encoding of 32 octets passes.
		if len(c) != s256ChallengeLen || !isBase64URL(c) {
			return fmt.Errorf("%w: S256 code_challenge must be %d base64url characters without padding", ErrChallengeFormat, s256ChallengeLen)
		}
		if b, err := base64.RawURLEncoding.Strict().DecodeString(c); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("%w: S256 code_challenge is not the base64url encoding of %d octets", ErrChallengeFormat, sha256.Size)
		}
		return nil
	case MethodPlain, "": // RFC 7636 §4.3: an absent method means plain
		if !allowPlain { // RFC 7636 §4.2: a client able to use S256 MUST use it; RFC 9700 §2.1.1: S256 does not expose the verifier
			return fmt.Errorf("%w: plain is disabled, use S256", ErrMethodNotAllowed)
		}
		// RFC 7636 §4.2: plain code_challenge = code_verifier, so §4.1 applies.
		if err := ValidateVerifier(c); err != nil {
			return fmt.Errorf("%w: plain code_challenge must be 43 to 128 characters of [A-Za-z0-9-._~]", ErrChallengeFormat)
		}
		return nil
	default: // RFC 7636 §4.4.1: unsupported transformation
		return fmt.Errorf("%w: unsupported method, use S256", ErrMethodNotAllowed)
	}
}

// S256Challenge returns the S256 code_challenge for verifier:
// BASE64URL-ENCODE(SHA256(ASCII(verifier))) (RFC 7636 §4.2). It does not
// validate verifier; see [ValidateVerifier].
func S256Challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// Verify checks a token request's code_verifier against the code_challenge
// and code_challenge_method recorded with the authorization code
// (RFC 7636 §4.6). The comparison is constant-time.
//
// It returns nil, or an error wrapping [ErrVerifierFormat] (malformed
// verifier), [ErrMethodNotAllowed] (unknown method) or [ErrMismatch].
// Verify does not apply the plain policy: call [ValidateChallenge] on the
// recorded challenge first.
func Verify(verifier, challenge, method string) error {
	if err := ValidateVerifier(verifier); err != nil {
		return err
	}
	var want string
	switch method {
	case MethodS256: // RFC 7636 §4.6: BASE64URL-ENCODE(SHA256(ASCII(code_verifier))) == code_challenge
		want = S256Challenge(verifier)
	case MethodPlain, "": // RFC 7636 §4.6: code_verifier == code_challenge; §4.3: absent means plain
		want = verifier
	default:
		return fmt.Errorf("%w: unsupported method", ErrMethodNotAllowed)
	}
	// RFC 7636 §4.6 comparison, in constant time (defence in depth: the RFC
	// does not demand it). ConstantTimeCompare returns early only on a
	// length difference, and lengths are public (43 for S256).
	if subtle.ConstantTimeCompare([]byte(want), []byte(challenge)) != 1 {
		return ErrMismatch
	}
	return nil
}

// isUnreserved reports whether b is in RFC 3986's unreserved set, which
// RFC 7636 §4.1 uses for the code_verifier.
func isUnreserved(b byte) bool {
	return isBase64URLByte(b) || b == '.' || b == '~'
}

func isBase64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isBase64URLByte(s[i]) {
			return false
		}
	}
	return true
}

// isBase64URLByte reports whether b is in the base64url alphabet
// (RFC 4648 §5), without the padding character.
func isBase64URLByte(b byte) bool {
	return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-' || b == '_'
}
