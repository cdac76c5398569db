package clientadmin_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/authd/authd/clientadmin"
)

// TestOIDCMetadata: post_logout_redirect_uris and
// id_token_signed_response_alg (OpenID Connect Dynamic Client Registration
// 1.0 §2, RP-Initiated Logout 1.0 §3.1) are stored and returned on both
// backends; an unsupported alg or a bad URI is invalid_client_metadata.
func TestOIDCMetadata(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			svc, err := clientadmin.New(clientadmin.Config{Secret: []byte(secret), Store: store})
			if err != nil {
				t.Fatal(err)
			}
			cli := svc.LocalCaller("test")
			meta, err := clientadmin.DecodeMetadata([]byte(`{"client_name":"App","redirect_uris":["com.example.app:/cb"],
				"token_endpoint_auth_method":"none","post_logout_redirect_uris":["com.example.app:/bye"],
				"id_token_signed_response_alg":"ES256"}`))
			if err != nil {
				t.Fatal(err)
			}
			res, err := svc.Create(ctx, cli, "", meta)
			if err != nil {
				t.Fatal(err)
			}
			got, err := svc.Get(ctx, cli, res.Client.ClientID)
			if err != nil {
				t.Fatal(err)
			}
			if got.IDTokenSignedResponseAlg != "ES256" || !slices.Equal(got.PostLogoutRedirectURIs, []string{"com.example.app:/bye"}) {
				t.Fatalf("stored %q %v", got.IDTokenSignedResponseAlg, got.PostLogoutRedirectURIs)
			}
			for _, body := range []string{
				`{"redirect_uris":["com.example.app:/cb"],"token_endpoint_auth_method":"none","id_token_signed_response_alg":"none"}`,
				`{"redirect_uris":["com.example.app:/cb"],"token_endpoint_auth_method":"none","id_token_signed_response_alg":"HS256"}`,
				`{"redirect_uris":["com.example.app:/cb"],"token_endpoint_auth_method":"none","post_logout_redirect_uris":["https://a.example/#frag"]}`,
			} {
				m, err := clientadmin.DecodeMetadata([]byte(body))
				if err == nil {
					_, err = svc.Create(ctx, cli, "", m)
				}
				if !errors.Is(err, clientadmin.ErrInvalidMetadata) {
					t.Errorf("%s: %v, want invalid_client_metadata", body, err)
				}
			}
		})
	}
}
