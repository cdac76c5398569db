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
// description is "human-readable ASCII text", and held to the stricter
// charset RFC 6749 §5.2 gives error_description (%x20-21 / %x23-5B /
// %x5D-7E), which the admin API shares with the OAuth endpoints: "§"
// becomes "Section", a double quote a single one, a backslash and any
// other character outside the set are dropped. It is at most
// maxDescription bytes, because a description may quote what the request
// sent (a member name, a redirect URI).
func (e *Error) MarshalJSON() ([]byte, error) {
	type plain Error
	c := plain(*e)
	c.Description = asciiText(c.Description)
	return json.Marshal(c)
}

// maxDescription bounds an error_description, in bytes.
const maxDescription = 1024

// asciiText returns d in the error_description charset (see MarshalJSON).
func asciiText(d string) string {
	var b strings.Builder
	for _, r := range d {
		if b.Len() > maxDescription+8 {
			break
		}
		switch {
		case r == '§':
			b.WriteString("Section ")
		case r == '…':
			b.WriteString("...")
		case r == '–' || r == '—':
			b.WriteByte('-')
		case r == '"':
			b.WriteByte('\'')
		case r == '\\':
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		}
	}
	out := strings.ReplaceAll(b.String(), "Section  ", "Section ")
	if len(out) > maxDescription {
		out = out[:maxDescription-3] + "..."
	}
	return out
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
