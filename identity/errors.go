package identity

import "errors"

// Errors returned by the Service. Compare with errors.Is; messages add the
// detail (which field, which rule) after the sentinel's text.
var (
	// ErrInvalidUsername: the username is empty, too long, or refused by
	// PRECIS UsernameCaseMapped (RFC 8265 §3.3).
	ErrInvalidUsername = errors.New("invalid username")
	// ErrInvalidPassword: the password is too short, too long, or refused
	// by PRECIS OpaqueString (RFC 8265 §4.2).
	ErrInvalidPassword = errors.New("invalid password")
	// ErrInvalidProfile: a profile field (email, name) is not acceptable.
	ErrInvalidProfile = errors.New("invalid profile")
	// ErrUserExists: the username is taken.
	ErrUserExists = errors.New("user already exists")
	// ErrUserNotFound: no user has this username.
	ErrUserNotFound = errors.New("user not found")
	// ErrInvalidCredentials: a sign-in failed. Unknown user, wrong
	// password and disabled user are deliberately indistinguishable.
	ErrInvalidCredentials = errors.New("wrong username or password")
	// ErrConsentNotFound: the user has no consent for this client.
	ErrConsentNotFound = errors.New("consent not found")
	// ErrNoSession: the session reference is unknown, expired or ended.
	ErrNoSession = errors.New("no valid session")
	// ErrInvalidClientID: an operation on a user's consent names no client.
	ErrInvalidClientID = errors.New("a client_id is required")
	// ErrInvalidLimit: a page's limit is out of range (Admin.Page).
	ErrInvalidLimit = errors.New("invalid limit")
	// ErrInvalidCursor: a page's cursor is not one Admin.Page returned.
	ErrInvalidCursor = errors.New("invalid cursor")
)
