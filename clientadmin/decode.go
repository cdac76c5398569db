package clientadmin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// DecodeMetadata decodes the JSON of a create request: one object of RFC
// 7591 §2 metadata (plus skip_consent) with no unknown member. Anything
// else is ErrInvalidMetadata with a description.
func DecodeMetadata(body []byte) (ClientMetadata, error) {
	var m ClientMetadata
	return m, decodeJSON(body, &m)
}

// DecodeUpdate decodes the JSON of an update request: as DecodeMetadata,
// and the body may repeat the client_id.
func DecodeUpdate(body []byte) (UpdateRequest, error) {
	var r UpdateRequest
	return r, decodeJSON(body, &r)
}

// DecodeEmpty checks the optional JSON of a request without parameters
// (secret rotation): nothing, or an empty object.
func DecodeEmpty(body []byte) error {
	if body == nil {
		return nil
	}
	var none struct{}
	return decodeJSON(body, &none)
}

// decodeJSON decodes body, which must be one JSON object with only known
// members, into v.
func decodeJSON(body []byte, v any) error {
	if problem := DecodeObject(body, v, "client metadata"); problem != "" {
		return newError(ErrInvalidMetadata, strings.TrimSuffix(problem, ".")+" (RFC 7591 §2).")
	}
	return nil
}

// DecodeObject decodes body, which must be exactly one JSON object with
// only members v knows, into v, and returns "" or a description of what is
// wrong with it (for an error_description; what names the object, e.g.
// "client metadata"). The admin API's adapters share it.
func DecodeObject(body []byte, v any, what string) string {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return "The request body must be a JSON object of " + what + "."
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var (
			syn *json.SyntaxError
			typ *json.UnmarshalTypeError
		)
		switch {
		case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF):
			return "The request body is not valid JSON."
		case errors.As(err, &typ):
			return fmt.Sprintf("The member %q has the wrong type.", typ.Field)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			// encoding/json has no typed error for unknown fields.
			return fmt.Sprintf("Unknown %s member %s.", what, strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return "The request body is not valid " + what + "."
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "The request body must hold exactly one JSON object."
	}
	return ""
}
