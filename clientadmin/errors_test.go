package clientadmin

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestErrorDescriptionCharset: every description the admin API answers is
// in RFC 6749 §5.2's error_description charset and bounded, whatever the
// request put into it (a member name, a grant type, a redirect URI).
func TestErrorDescriptionCharset(t *testing.T) {
	long := strings.Repeat("y", 40000)
	bodies := []string{
		`{"\u00e9\u0001` + long + `":1}`,
		`{"a\"b\\c":1}`,
		`{"redirect_uris":["com.example.app:/cb"],"grant_types":["\"\\` + long + `"]}`,
		`{"redirect_uris":["com.example.app:/cb"],"token_endpoint_auth_method":"\"\\` + long + `"}`,
		`{"redirect_uris":["https://a.example/\"x"]}`,
		`{"redirect_uris":"x"}`,
	}
	for _, body := range bodies {
		m, err := DecodeMetadata([]byte(body))
		if err == nil {
			err = validateMetadata(&m)
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%.60s: %T", body, err)
		}
		raw, _ := json.Marshal(e)
		var out struct {
			Description string `json:"error_description"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		d := out.Description
		if d == "" || len(d) > 1024 {
			t.Errorf("%.60s: description of %d bytes", body, len(d))
		}
		for _, c := range []byte(d) {
			if !(c == 0x20 || c == 0x21 || (c >= 0x23 && c <= 0x5B) || (c >= 0x5D && c <= 0x7E)) {
				t.Errorf("%.60s: description %.80q has %q, outside RFC 6749 §5.2", body, d, c)
				break
			}
		}
	}
}
