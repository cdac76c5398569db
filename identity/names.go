package identity

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/secure/precis"
)

// Limits on prepared values, in bytes.
const (
	MaxUsernameLen = 128
	MinPasswordLen = 8
	// MaxPasswordLen bounds new passwords. argon2id has no limit of its
	// own; this one keeps a request from hashing megabytes. (Passwords of
	// users whose hash is still bcrypt, from before, are at most 72 bytes:
	// a longer one never matches such a hash.)
	MaxPasswordLen = 256
	maxProfileLen  = 256
)

// PrepareUsername applies PRECIS UsernameCaseMapped (RFC 8265 §3.3): width
// mapping, case mapping, NFC, then the IdentifierClass rules, which refuse
// spaces, control and zero-width characters. Two usernames are the same
// account exactly when their prepared forms are equal.
func PrepareUsername(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidUsername)
	}
	p, err := precis.UsernameCaseMapped.String(s)
	if err != nil || p == "" {
		return "", fmt.Errorf("%w: %q is not allowed (letters, digits and symbols such as . _ - @; no spaces or invisible characters)", ErrInvalidUsername, s)
	}
	if len(p) > MaxUsernameLen {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrInvalidUsername, MaxUsernameLen)
	}
	return p, nil
}

// PreparePassword applies PRECIS OpaqueString (RFC 8265 §4.2: non-ASCII
// spaces become U+0020, NFC, no control characters) and checks the length
// of the result.
func PreparePassword(s string) (string, error) {
	p, err := precis.OpaqueString.String(s)
	if err != nil {
		return "", fmt.Errorf("%w: it contains characters that are not allowed (control characters)", ErrInvalidPassword)
	}
	if len(p) < MinPasswordLen {
		return "", fmt.Errorf("%w: at least %d bytes", ErrInvalidPassword, MinPasswordLen)
	}
	if len(p) > MaxPasswordLen {
		return "", fmt.Errorf("%w: at most %d bytes", ErrInvalidPassword, MaxPasswordLen)
	}
	return p, nil
}

// checkProfile validates the free-text profile fields.
func checkProfile(email, name string) error {
	for field, v := range map[string]string{"email": email, "name": name} {
		if len(v) > maxProfileLen || !utf8.ValidString(v) {
			return fmt.Errorf("%w: %s: at most %d bytes of UTF-8", ErrInvalidProfile, field, maxProfileLen)
		}
		for _, r := range v {
			if r < 0x20 || r == 0x7f {
				return fmt.Errorf("%w: %s: no control characters", ErrInvalidProfile, field)
			}
		}
	}
	if email != "" {
		at := strings.IndexByte(email, '@')
		if at <= 0 || at == len(email)-1 || strings.Count(email, "@") != 1 || strings.ContainsAny(email, " \t<>") {
			return fmt.Errorf("%w: email: %q is not an address", ErrInvalidProfile, email)
		}
	}
	return nil
}
