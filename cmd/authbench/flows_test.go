package main

import (
	"encoding/json"
	"testing"
)

// TestAccessToken checks the shortcut the replay and ceiling modes use
// against a full JSON decode.
func TestAccessToken(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"access_token":"ory_at_abc.def","token_type":"bearer"}`, "ory_at_abc.def"},
		{`{"token_type":"bearer","access_token":"x"}`, "x"},
		{`{"token_type":"bearer"}`, ""},
		{`{"access_token":"a\"b"}`, ""},
		{`{"access_token":"unterminated`, ""},
		{``, ""},
	} {
		if got := accessToken([]byte(c.body)); got != c.want {
			t.Errorf("accessToken(%s) = %q, want %q", c.body, got, c.want)
		}
	}
}

// TestFixedTokenBody: the HTTP ceiling answers a well-formed token
// response of the size of authd's (910 bytes with its ID token).
func TestFixedTokenBody(t *testing.T) {
	var tb tokenBody
	if err := json.Unmarshal(fixedTokenBody, &tb); err != nil {
		t.Fatal(err)
	}
	if tb.AccessToken == "" || tb.RefreshToken == "" || tb.IDToken == "" || accessToken(fixedTokenBody) != tb.AccessToken {
		t.Errorf("ceiling body %+v", tb)
	}
	if len(fixedTokenBody) != 910 {
		t.Errorf("ceiling body is %d bytes, want 910", len(fixedTokenBody))
	}
}
