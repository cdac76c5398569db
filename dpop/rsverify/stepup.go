package rsverify

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrInsufficientAuthentication is a token whose authentication does not
// meet the resource's Requirement (RFC 9470 §3).
var ErrInsufficientAuthentication = errors.New("rsverify: insufficient user authentication")

// Requirement is what a resource demands of the user's authentication
// before it answers (RFC 9470 step-up): an acr among ACRValues (any one
// meets it; with authd, "urn:authd:acr:2fa phr" accepts two factors or a
// passkey) and, when MaxAge > 0, an authentication no older than MaxAge.
type Requirement struct {
	ACRValues []string
	MaxAge    time.Duration
}

// Meets reports whether t meets req at now: nil, or an error wrapping
// ErrInsufficientAuthentication that says what is missing.
func (t *Token) Meets(req Requirement, now time.Time) error {
	if len(req.ACRValues) > 0 && !slices.Contains(req.ACRValues, t.ACR) {
		return fmt.Errorf("%w: acr %q is not one of %q", ErrInsufficientAuthentication, t.ACR, req.ACRValues)
	}
	if req.MaxAge > 0 && (t.AuthTime.IsZero() || now.Sub(t.AuthTime) > req.MaxAge) {
		return fmt.Errorf("%w: authenticated more than %s ago", ErrInsufficientAuthentication, req.MaxAge)
	}
	return nil
}

// StepUpChallenge is the WWW-Authenticate value of a 401 answering a token
// that does not meet req (RFC 9470 §3): scheme is the token's ("DPoP" or
// "Bearer"). The client starts a new authorization request with these
// acr_values and max_age, and retries with the new token.
func StepUpChallenge(scheme string, req Requirement) string {
	var b strings.Builder
	b.WriteString(scheme)
	b.WriteString(` error="insufficient_user_authentication", error_description="A stronger or more recent authentication is required"`)
	if len(req.ACRValues) > 0 {
		b.WriteString(`, acr_values="` + strings.Join(req.ACRValues, " ") + `"`)
	}
	if req.MaxAge > 0 {
		b.WriteString(`, max_age=` + strconv.FormatInt(int64(req.MaxAge/time.Second), 10))
	}
	return b.String()
}
