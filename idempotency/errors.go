package idempotency

import "errors"

// The refusals of the engine. An error of Run that is one of them is an
// *Error, which matches its sentinel with errors.Is and carries a
// description for the person who sent the request.
var (
	// ErrInvalidKey: the Idempotency-Key is empty, too long or holds a
	// character that is not allowed.
	ErrInvalidKey = errors.New("invalid idempotency key")
	// ErrInFlight: a request with this key is still being processed.
	ErrInFlight = errors.New("idempotency key in flight")
	// ErrKeyReused: the key was used for a different request.
	ErrKeyReused = errors.New("idempotency key reused")
)

// Error is a refusal of the engine: Kind is one of the sentinels above,
// Description a sentence saying what is wrong, fit to show to the caller.
type Error struct {
	Kind        error
	Description string
}

// Error returns the kind and the description.
func (e *Error) Error() string { return e.Kind.Error() + ": " + e.Description }

// Unwrap returns the sentinel, for errors.Is.
func (e *Error) Unwrap() error { return e.Kind }

func refuse(kind error, description string) *Error {
	return &Error{Kind: kind, Description: description}
}
