package oauth

import (
	"reflect"
	"testing"
	"time"
)

func TestSealedResponseRoundTrip(t *testing.T) {
	for _, r := range []sealedResponse{
		{Body: tokenBody{AccessToken: "at", TokenType: "bearer", Scope: "openid offline_access", RefreshToken: "rt"}, ExpiresAt: time.Unix(1700000000, 0)},
		{Body: tokenBody{AccessToken: "at", TokenType: "bearer"}, ExpiresAt: time.Unix(1, 0), Scope: []string{}},
		{Body: tokenBody{AccessToken: "at", TokenType: "bearer"}, ExpiresAt: time.Unix(1, 0), Scope: []string{"a", "b c"}},
		{Body: tokenBody{AccessToken: "at", TokenType: "bearer", Scope: "openid", IDToken: "eyJ.eyJ.sig"}, ExpiresAt: time.Unix(1, 0)},
	} {
		var got sealedResponse
		if err := got.unmarshal(r.marshal()); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip: %+v, want %+v", got, r)
		}
	}
	good := (&sealedResponse{Body: tokenBody{AccessToken: "at"}, Scope: []string{"x"}}).marshal()
	for i := range good {
		var got sealedResponse
		_ = got.unmarshal(good[:i]) // must not panic
	}
	var got sealedResponse
	if err := got.unmarshal(append([]byte{sealedVersion + 1}, good[1:]...)); err == nil {
		t.Fatal("another version decoded")
	}
}

// TestSealedResponseV1: a record sealed before ID tokens (version 1: no
// id_token field) still opens during an upgrade, with no ID token.
func TestSealedResponseV1(t *testing.T) {
	v1 := []byte{sealedVersionV1, 0, 0, 0, 0, 0, 0, 0, 1}
	for _, f := range []string{"at", "bearer", "openid", "rt"} {
		v1 = append(v1, byte(len(f)))
		v1 = append(v1, f...)
	}
	v1 = append(v1, 0)
	var got sealedResponse
	if err := got.unmarshal(v1); err != nil {
		t.Fatal(err)
	}
	want := tokenBody{AccessToken: "at", TokenType: "bearer", Scope: "openid", RefreshToken: "rt"}
	if got.Body != want {
		t.Fatalf("v1 decoded as %+v, want %+v", got.Body, want)
	}
}
