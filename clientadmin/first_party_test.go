package clientadmin_test

import (
	"context"
	"testing"

	"github.com/authd/authd/clientadmin"
)

// TestFirstPartyMetadata: first_party (the authorization challenge
// endpoint's gate, issue 28) is stored, returned and cleared by an update
// on both backends, as the admin API and `authd clients` send it.
func TestFirstPartyMetadata(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			svc, err := clientadmin.New(clientadmin.Config{Secret: []byte(secret), Store: store})
			if err != nil {
				t.Fatal(err)
			}
			cli := svc.LocalCaller("test")
			meta, err := clientadmin.DecodeMetadata([]byte(`{"client_name":"App","redirect_uris":["com.example.app:/cb"],
				"token_endpoint_auth_method":"none","first_party":true}`))
			if err != nil {
				t.Fatal(err)
			}
			res, err := svc.Create(ctx, cli, "", meta)
			if err != nil {
				t.Fatal(err)
			}
			got, err := svc.Get(ctx, cli, res.Client.ClientID)
			if err != nil || !got.FirstParty {
				t.Fatalf("stored first_party %v, %v", got.FirstParty, err)
			}
			meta.FirstParty = false
			if _, err := svc.Update(ctx, cli, res.Client.ClientID, "", clientadmin.UpdateRequest{ClientMetadata: meta}); err != nil {
				t.Fatal(err)
			}
			if got, err := svc.Get(ctx, cli, res.Client.ClientID); err != nil || got.FirstParty {
				t.Fatalf("after update first_party %v, %v", got.FirstParty, err)
			}
		})
	}
}
