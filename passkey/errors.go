package passkey

import "errors"

// Errors of the ceremonies. Message gives the sentence a person sees.
var (
	// ErrDisabled: passkeys are off (an IP-address issuer without
	// AUTHD_WEBAUTHN_RP_ID).
	ErrDisabled = errors.New("passkey: passkeys are not enabled")
	// ErrMalformed: the browser's answer could not be read.
	ErrMalformed = errors.New("passkey: malformed answer")
	// ErrCeremony: no ceremony matches the answer's challenge: unknown,
	// expired, already used, or started by another browser.
	ErrCeremony = errors.New("passkey: challenge unknown, expired or used")
	// ErrOrigin: the answer came from an origin that is not authd's.
	ErrOrigin = errors.New("passkey: wrong origin")
	// ErrRPID: the authenticator signed for another relying party.
	ErrRPID = errors.New("passkey: wrong RP ID")
	// ErrUserVerification: the authenticator did not verify the user.
	ErrUserVerification = errors.New("passkey: user not verified")
	// ErrVerification: another check of the answer failed (signature,
	// ceremony type, flags, attestation).
	ErrVerification = errors.New("passkey: verification failed")
	// ErrUnknown: no usable credential: unknown, removed, or its user is
	// disabled or deleted (one answer for all).
	ErrUnknown = errors.New("passkey: unknown credential")
	// ErrCloned: the sign count went backwards; the credential is now
	// disabled.
	ErrCloned = errors.New("passkey: sign count went backwards")
	// ErrExists: the credential is already registered.
	ErrExists = errors.New("passkey: already registered")
	// ErrNotFound: the user has no passkey with this ID.
	ErrNotFound = errors.New("passkey: not found")
	// ErrLastMethod: removing it would leave the user no way to sign in.
	ErrLastMethod = errors.New("passkey: last way to sign in")
	// ErrInvalidName: a passkey name is empty or too long.
	ErrInvalidName = errors.New("passkey: invalid name")
	// ErrLink: the enrolment link is unknown, used or expired.
	ErrLink = errors.New("passkey: enrolment link unknown, used or expired")
)

// Message is err in words for the person at the browser.
func Message(err error) string {
	switch {
	case errors.Is(err, ErrDisabled):
		return "Passkeys are not available on this server."
	case errors.Is(err, ErrCeremony):
		return "This passkey request has expired or was already used. Please try again."
	case errors.Is(err, ErrOrigin):
		return "This passkey answer came from another site."
	case errors.Is(err, ErrRPID):
		return "This passkey belongs to another site."
	case errors.Is(err, ErrUserVerification):
		return "Your device did not confirm it is you (fingerprint, face or screen lock). Please try again."
	case errors.Is(err, ErrUnknown):
		return "This passkey is not recognised. Sign in another way, or use another passkey."
	case errors.Is(err, ErrCloned):
		return "This passkey has been turned off because it may have been copied. Sign in another way and remove it."
	case errors.Is(err, ErrExists):
		return "This passkey is already registered."
	case errors.Is(err, ErrNotFound):
		return "That passkey does not exist (it may have been removed already)."
	case errors.Is(err, ErrLastMethod):
		return "This is your last way to sign in: add another passkey or a password before removing it."
	case errors.Is(err, ErrInvalidName):
		return "A passkey name must be 1 to 64 characters."
	case errors.Is(err, ErrLink):
		return "This enrolment link is not valid any more (links work once, for 15 minutes). Ask for a new one."
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrVerification):
		return "This passkey could not be verified. Please try again."
	}
	return "Something went wrong with the passkey. Please try again in a moment."
}
