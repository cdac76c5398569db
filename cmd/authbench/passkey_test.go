package main

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
)

// TestPasskeyMode runs -mode passkey against an in-process authd whose
// issuer is http://localhost:PORT (passkeys on): every iteration signs in
// with its worker's passkey and exchanges the code.
func TestPasskeyMode(t *testing.T) {
	store := memory.New()
	srv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + strings.Replace(srv.Listener.Addr().String(), "127.0.0.1", "localhost", 1)
	app, err := newServer(oauth.Config{Issuer: issuer, Secret: []byte(testSecret)}, store)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = app
	srv.Start()
	t.Cleanup(srv.Close)
	hash, _ := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
	if err := store.CreateUser(t.Context(), &storage.User{Username: "bench", PasswordHash: hash}); err != nil {
		t.Fatal(err)
	}
	pub, err := oauth.RegisterClient(t.Context(), store, app.Hasher(), oauth.ClientMetadata{
		ClientName: "authbench", RedirectURIs: []string{"dev.authd.authbench:/callback"}, TokenEndpointAuthMethod: "none",
		GrantTypes: []string{"authorization_code", "refresh_token"}, Scope: "openid offline_access", SkipConsent: true,
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	res := runJSON(t, "-mode", "passkey", "-target", srv.URL, "-c", "4", "-n", "40", "-client-id", pub.ClientID, "-password", testPassword)
	if res.Failed != 0 || len(res.Errors) != 0 || res.Iterations != 40 {
		t.Fatalf("iterations %d, failed %d: %v", res.Iterations, res.Failed, res.Errors)
	}
	var steps []string
	for _, s := range res.Steps {
		steps = append(steps, s.Step)
	}
	if !slices.Equal(steps, []string{"authorize", "options", "login", "token", "flow"}) {
		t.Errorf("steps %v", steps)
	}
}
