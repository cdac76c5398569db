package oauth

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestTokenBodyJSON: the token response encoder writes exactly what
// encoding/json writes (writeJSON), for plain and awkward values.
func TestTokenBodyJSON(t *testing.T) {
	for _, b := range []tokenBody{
		{AccessToken: "ory_at_abc.def", TokenType: "bearer", ExpiresIn: 3599, Scope: "openid offline_access", RefreshToken: "ory_rt_x.y", IDToken: "eyJ.eyJ.sig"},
		{AccessToken: "a", TokenType: "DPoP", ExpiresIn: 0},
		{AccessToken: `q"uote\back<tag>&amp;`, TokenType: "bearer", ExpiresIn: -1, Scope: "é \u2028 \x01 \x7f"},
		{AccessToken: "bad\xffutf8", TokenType: "bearer", ExpiresIn: 1 << 40, RefreshToken: "r"},
	} {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(b); err != nil {
			t.Fatal(err)
		}
		if got := b.appendJSON(nil); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("appendJSON(%+v)\n got %s\nwant %s", b, got, want.Bytes())
		}
	}
}
