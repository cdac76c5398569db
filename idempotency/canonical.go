package idempotency

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Canonical returns the canonical form of a decoded request, for
// Write.Request: its JSON encoding with object members sorted by name, so
// that two requests meaning the same have the same fingerprint whatever
// their member order or spacing. Hash what was decoded, not the raw body:
// encoding/json matches member names case-insensitively and the last one
// wins, so two bodies that differ only there would otherwise hash alike
// while meaning different things, or differ while meaning the same.
func Canonical(v any) ([]byte, error) {
	decoded, err := json.Marshal(v)
	if err == nil {
		decoded, err = CanonicalJSON(decoded)
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency: canonical form: %w", err)
	}
	return decoded, nil
}

// CanonicalJSON returns the canonical form of a JSON document: parsed and
// re-encoded compactly with object members sorted by name (encoding/json
// sorts map keys), so that two bodies differing only in whitespace or
// member order have the same request hash. An empty body is canonically
// "{}".
func CanonicalJSON(body []byte) ([]byte, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return []byte("{}"), nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
