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
	if err := got.unmarshal(append([]byte{2}, good[1:]...)); err == nil {
		t.Fatal("another version decoded")
	}
}
