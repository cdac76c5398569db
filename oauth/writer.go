package oauth

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/dpop"
	"github.com/authd/authd/storage"
)

// This file is the one writer of the token, revocation and introspection
// endpoints' answers (docs/architecture.md, "The token pipeline"): every
// 200, 4xx, 429 and 503 they send goes through writeJSON and writeError.

// retryLater is an answer the client should repeat after a delay: 429
// (rate limited) or 503 (the first exchange of a code still in flight).
// writeError sends Retry-After (RFC 9110 §10.2.3).
type retryLater struct {
	err   *fosite.RFC6749Error
	after time.Duration
}

func (e *retryLater) Error() string { return e.err.Error() }
func (e *retryLater) Unwrap() error { return e.err }

// errTooManyRequests is 429 temporarily_unavailable with Retry-After.
func errTooManyRequests(after time.Duration, hint string) error {
	e := *fosite.ErrTemporarilyUnavailable.WithHint(hint)
	e.CodeField = http.StatusTooManyRequests
	return &retryLater{err: &e, after: after}
}

// errBusy is 503 temporarily_unavailable with Retry-After: 1, for a
// duplicate whose first attempt is still running (RFC 9110 §15.6.4).
var errBusy error = &retryLater{
	err:   fosite.ErrTemporarilyUnavailable.WithHint("The first exchange of this code is still in progress; retry the same request."),
	after: time.Second,
}

// errUnavailable is 503 temporarily_unavailable, for a request that failed
// because the database could not be reached (storage.ErrUnavailable): a
// retry is safe and will be answered once it is back (an exchange whose
// commit was cut off is then answered from its replay record).
var errUnavailable = fosite.ErrTemporarilyUnavailable.WithHint("The server's storage is unavailable for a moment; retry the request.")

// toRFC6749 is the RFC 6749 error answered for err: errUnavailable when a
// storage outage is anywhere in its chain (fosite wraps it as
// server_error), else fosite's reading of it.
func toRFC6749(err error) *fosite.RFC6749Error {
	if errors.Is(err, storage.ErrUnavailable) {
		return errUnavailable
	}
	return fosite.ErrorToRFC6749Error(err)
}

// writeJSON writes v as JSON (as json.Encoder does: a trailing newline)
// with the given status and no-store caching (RFC 6749 §5.1: token
// responses MUST carry Cache-Control: no-store), through writeJSONBytes.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only for a value authd never passes (a channel, say)
		b, status = []byte(`{"error":"server_error"}`), http.StatusInternalServerError
	}
	writeJSONBytes(w, status, append(b, '\n'))
}

// Header values every JSON answer carries, shared rather than allocated
// per answer (net/http only reads them; an Add appends to a copy, as
// their capacity is their length).
var (
	jsonContentType = []string{"application/json;charset=UTF-8"}
	noStore         = []string{"no-store"}
	noCache         = []string{"no-cache"}
)

// writeJSONBytes is writeJSON for a body already encoded.
func writeJSONBytes(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	h["Pragma"] = noCache
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// appendJSON appends b as encoding/json encodes it (the same bytes, field
// order and trailing newline as writeJSON), without reflection: the token
// response is the hottest answer authd writes.
func (b *tokenBody) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"access_token":`...)
	dst = appendJSONString(dst, b.AccessToken)
	dst = append(dst, `,"token_type":`...)
	dst = appendJSONString(dst, b.TokenType)
	dst = append(dst, `,"expires_in":`...)
	dst = strconv.AppendInt(dst, b.ExpiresIn, 10)
	for _, f := range [...]struct{ name, v string }{{`,"scope":`, b.Scope}, {`,"refresh_token":`, b.RefreshToken}, {`,"id_token":`, b.IDToken}, {`,"issued_token_type":`, b.IssuedTokenType}} {
		if f.v != "" {
			dst = append(dst, f.name...)
			dst = appendJSONString(dst, f.v)
		}
	}
	return append(dst, "}\n"...)
}

// jsonSize is the length of appendJSON's output when no value needs
// escaping (tokens never do), so that one allocation holds the body.
func (b *tokenBody) jsonSize() int {
	const fixed = len(`{"access_token":"","token_type":"","expires_in":,"scope":"","refresh_token":"","id_token":""}`+"\n") + 20
	return fixed + len(b.AccessToken) + len(b.TokenType) + len(b.Scope) + len(b.RefreshToken) + len(b.IDToken) + len(b.IssuedTokenType) + len(`,"issued_token_type":""`)
}

// appendJSONString appends s as a JSON string exactly as encoding/json
// writes it: printable ASCII other than the characters it escapes is
// copied; anything else goes through encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// oauthErrorBody is an RFC 6749 §5.2 error response.
type oauthErrorBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// writeError writes err as an RFC 6749 §5.2 error response:
//   - a 401 always carries WWW-Authenticate (RFC 9110 §11.6.1; RFC 6749
//     §5.2 for invalid_client): Basic when the client tried the
//     Authorization header, else the scheme a client should use;
//   - 429 and 503 carry Retry-After;
//   - a storage outage (storage.ErrUnavailable) is 503
//     temporarily_unavailable, not a server error;
//   - error_description holds only the characters RFC 6749 §5.2 allows.
//
// Server errors (5xx other than 503) are logged once, here, without request
// content; the client sees server_error and nothing of the cause.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	rfc := toRFC6749(err)
	status := rfc.CodeField
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError
	}
	var later *retryLater
	if errors.As(err, &later) {
		w.Header().Set("Retry-After", retryAfter(later.after))
	} else if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1") // RFC 9110 §10.2.3
	}
	code := rfc.ErrorField
	desc := rfc.GetDescription()
	if status >= 500 && status != http.StatusServiceUnavailable {
		s.log.Error("oauth endpoint error", "route", r.URL.Path, "error", rfc.ErrorField, "cause", errorCause(err), "debug", rfc.DebugField)
		code, desc = fosite.ErrServerError.ErrorField, "The server could not complete the request; retry it."
	}
	if status == http.StatusUnauthorized || code == fosite.ErrInvalidClient.ErrorField {
		// RFC 6749 §5.2: invalid_client MAY be 400 but MUST be 401 when
		// the client tried the Authorization header; authd always uses
		// 401, which always carries a challenge.
		status = http.StatusUnauthorized
		if hasBearer(r.Header.Get("Authorization")) {
			// RFC 6750 §3: a bearer token that is not accepted.
			w.Header().Set("WWW-Authenticate", `Bearer realm="authd", error="invalid_token"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Basic realm="authd", charset="UTF-8"`)
		}
	}
	writeJSON(w, status, oauthErrorBody{Error: code, Description: errorDescription(desc)})
}

// writeBearerError writes an error of a resource served with a Bearer
// token (the UserInfo endpoint) per RFC 6750 §3: the WWW-Authenticate
// challenge carries the error code and description (§3.1), and so does a
// JSON body like every other error. An empty code is the challenge alone
// (a request without credentials, §3.1).
func (s *Server) writeBearerError(w http.ResponseWriter, r *http.Request, status int, code, desc string) {
	desc = errorDescription(desc)
	challenge := `Bearer realm="authd"`
	if code != "" {
		challenge += `, error="` + code + `"`
		if desc != "" {
			challenge += `, error_description="` + desc + `"`
		}
	}
	w.Header().Set("WWW-Authenticate", challenge)
	if code == "" {
		code = "invalid_request"
		desc = "The request carries no access token."
	}
	writeJSON(w, status, oauthErrorBody{Error: code, Description: desc})
}

// writeDPoPError writes an error of a resource served with a DPoP-bound
// token (RFC 9449 §7.1): a DPoP challenge with the accepted algorithms
// and the error code, and the same as a JSON body.
func (s *Server) writeDPoPError(w http.ResponseWriter, status int, code, desc string) {
	desc = errorDescription(desc)
	w.Header().Set("WWW-Authenticate", `DPoP algs="`+strings.Join(dpop.SigningAlgs(), " ")+`", error="`+code+`", error_description="`+desc+`"`)
	writeJSON(w, status, oauthErrorBody{Error: code, Description: desc})
}

// errorCause is the message of the first error in err's chain that is not
// fosite's (whose own message is only its code, e.g. "server_error"), for
// the log: it names the failure (a storage operation, a driver error),
// never request content.
func errorCause(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		var rfc *fosite.RFC6749Error
		if errors.As(e, &rfc) && e.Error() == rfc.Error() {
			continue // fosite's error, or a stack around it: its message is its code
		}
		return e.Error()
	}
	return ""
}

// maxErrorDescription bounds an error_description (bytes): fosite's hints
// may echo what the request sent (a scope, a parameter's name).
const maxErrorDescription = 1024

// errorDescription returns d with only the characters RFC 6749 §5.2 allows
// in error_description (%x20-21 / %x23-5B / %x5D-7E): "§" becomes
// "Section", "…" becomes "...", a double quote a single one, and any other
// character outside the set (non-ASCII, control, backslash) is dropped, so
// nothing a client sent is echoed in a form the spec forbids. It is at most
// maxErrorDescription bytes (cut with "...").
func errorDescription(d string) string {
	var b strings.Builder
	b.Grow(min(len(d), maxErrorDescription+16))
	for _, c := range d {
		if b.Len() > maxErrorDescription+8 {
			break
		}
		switch {
		case c == '§':
			b.WriteString("Section ")
		case c == '…':
			b.WriteString("...")
		case c == '"':
			b.WriteByte('\'')
		case c == 0x20 || c == 0x21 || (c >= 0x23 && c <= 0x5B) || (c >= 0x5D && c <= 0x7E):
			b.WriteRune(c)
		}
	}
	out := strings.TrimSpace(strings.ReplaceAll(b.String(), "Section  ", "Section "))
	if len(out) > maxErrorDescription {
		out = out[:maxErrorDescription-3] + "..."
	}
	return out
}
