package clientadmin

import (
	"encoding/json"
	"strings"
)

// Error is an error of a client administration operation, in the shape of
// an RFC 7591 §3.2.2 error response: Code is "invalid_redirect_uri" or
// "invalid_client_metadata" for metadata, or one of the codes of the
// sentinels below. Compare with errors.Is against a sentinel: an *Error
// matches the sentinel of its code whatever its description.
type Error struct {
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

// MarshalJSON encodes the error as an RFC 7591 §3.2.2 object. The
// description is "human-readable ASCII text": "§" becomes "Section", any
// other character outside printable ASCII is dropped.
func (e *Error) MarshalJSON() ([]byte, error) {
	type plain Error
	c := plain(*e)
	c.Description = asciiText(c.Description)
	return json.Marshal(c)
}

// asciiText returns d as printable ASCII (see MarshalJSON).
func asciiText(d string) string {
	var b strings.Builder
	for _, r := range d {
		switch {
		case r == '§':
			b.WriteString("Section ")
		case r == '…':
			b.WriteString("...")
		case r == '–' || r == '—':
			b.WriteByte('-')
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		}
	}
	return strings.ReplaceAll(b.String(), "Section  ", "Section ")
}

// Error returns the code and the description.
func (e *Error) Error() string {
	if e.Description == "" {
		return e.Code
	}
	return e.Code + ": " + e.Description
}

// Is reports whether target is the sentinel of e's code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Description == "" && t.Code == e.Code
}

// The errors of the operations, by code. The HTTP adapter maps them to
// statuses; the CLI to exit codes.
var (
	// ErrInvalidRedirectURI: a redirect URI is not acceptable (RFC 7591 §3.2.2).
	ErrInvalidRedirectURI = &Error{Code: "invalid_redirect_uri"}
	// ErrInvalidMetadata: the metadata is not acceptable (RFC 7591 §3.2.2),
	// or the request body is not one JSON object of known members.
	ErrInvalidMetadata = &Error{Code: "invalid_client_metadata"}
	// ErrInvalidRequest: a parameter (limit, cursor, Idempotency-Key) is not
	// valid, or the operation does not apply (rotating a public client).
	ErrInvalidRequest = &Error{Code: "invalid_request"}
	// ErrNotFound: no client with this client_id.
	ErrNotFound = &Error{Code: "not_found"}
	// ErrKeyInFlight: a request with this Idempotency-Key is still running.
	ErrKeyInFlight = &Error{Code: "idempotency_key_in_flight"}
	// ErrKeyReused: this Idempotency-Key was used for another request.
	ErrKeyReused = &Error{Code: "idempotency_key_reused"}
	// ErrConflict: a concurrent request conflicted; retrying is safe.
	ErrConflict = &Error{Code: "conflict"}
)

func newError(sentinel *Error, description string) *Error {
	return &Error{Code: sentinel.Code, Description: description}
}
