package clientadmin_test

import (
	"context"
	"errors"
	"testing"

	"github.com/authd/authd/clientadmin"
)

// TestBackchannelLogoutMetadata: backchannel_logout_uri and
// backchannel_logout_session_required (OpenID Connect Back-Channel Logout
// 1.0 §2.2) are stored and returned on both backends; a URI that is not
// https (or http on a loopback IP literal), not absolute, or has a
// fragment or user information is invalid_client_metadata (RFC 7591
// §3.2.2), as is session_required without a URI.
func TestBackchannelLogoutMetadata(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			svc, err := clientadmin.New(clientadmin.Config{Secret: []byte(secret), Store: store})
			if err != nil {
				t.Fatal(err)
			}
			cli := svc.LocalCaller("test")
			for _, uri := range []string{"https://rp.example/backchannel?tenant=1", "http://127.0.0.1:8080/bc", "http://[::1]/bc"} {
				meta, err := clientadmin.DecodeMetadata([]byte(`{"redirect_uris":["com.example.app:/cb"],"token_endpoint_auth_method":"none",
					"backchannel_logout_uri":"` + uri + `","backchannel_logout_session_required":true}`))
				if err != nil {
					t.Fatal(err)
				}
				res, err := svc.Create(ctx, cli, "", meta)
				if err != nil {
					t.Fatalf("%s: %v", uri, err)
				}
				got, err := svc.Get(ctx, cli, res.Client.ClientID)
				if err != nil {
					t.Fatal(err)
				}
				if got.BackchannelLogoutURI != uri || !got.BackchannelLogoutSessionRequired {
					t.Errorf("stored %q %v, want %q true", got.BackchannelLogoutURI, got.BackchannelLogoutSessionRequired, uri)
				}
			}
			for _, bad := range []string{
				`"backchannel_logout_uri":"http://localhost/bc"`,
				`"backchannel_logout_uri":"http://rp.example/bc"`,
				`"backchannel_logout_uri":"https://rp.example/bc#frag"`,
				`"backchannel_logout_uri":"/bc"`,
				`"backchannel_logout_uri":"https:///bc"`,
				`"backchannel_logout_uri":"ftp://rp.example/bc"`,
				`"backchannel_logout_uri":"com.example.app:/bc"`,
				`"backchannel_logout_uri":"https://user:pw@rp.example/bc"`,
				`"backchannel_logout_uri":"https://rp.example:0/bc"`,
				`"backchannel_logout_uri":"https://rp.example/b c"`,
				`"backchannel_logout_session_required":true`,
			} {
				m, err := clientadmin.DecodeMetadata([]byte(`{"redirect_uris":["com.example.app:/cb"],"token_endpoint_auth_method":"none",` + bad + `}`))
				if err == nil {
					_, err = svc.Create(ctx, cli, "", m)
				}
				if !errors.Is(err, clientadmin.ErrInvalidMetadata) {
					t.Errorf("%s: %v, want invalid_client_metadata", bad, err)
				}
			}
		})
	}
}
