package oauth_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/storage"
)

const (
	serviceClient = "billing-service"
	serviceSecret = "billing-service-secret-with-enough-entropy-0"
)

// addServiceClient registers a confidential client allowed only the
// client_credentials grant.
func (h *harness) addServiceClient(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	hash, _ := h.app.Hasher().Hash(ctx, []byte(serviceSecret))
	if err := h.store.CreateClient(ctx, &storage.Client{
		ID: serviceClient, Name: "Billing", SecretHash: hash,
		GrantTypes: []string{"client_credentials"}, Scopes: []string{"invoices.read", "invoices.write", "offline_access"},
		TokenEndpointAuthMethod: "client_secret_basic",
		CreatedAt:               time.Now().UTC(), UpdatedAt: time.Now().UTC(),
	}); err != nil {
		t.Fatal(err)
	}
}

// TestClientCredentials covers RFC 6749 §4.4 over HTTP: a confidential
// client gets an access token (no refresh token) for the scopes it may
// have; public clients and clients not registered for the grant get
// unauthorized_client; a wrong secret is invalid_client.
func TestClientCredentials(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})
			h.addServiceClient(t)

			res := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"invoices.read offline_access"}}, serviceClient, serviceSecret)
			if res.status != http.StatusOK {
				t.Fatalf("client_credentials: %d %v", res.status, res.body)
			}
			if res.str("access_token") == "" || res.str("token_type") != "bearer" {
				t.Errorf("token response %v", res.body)
			}
			if _, ok := res.body["refresh_token"]; ok {
				t.Errorf("a refresh token was issued (RFC 6749 §4.4.3): %v", res.body)
			}
			if res.str("scope") != "invoices.read" {
				t.Errorf("scope = %q, want invoices.read (offline_access is not granted without a refresh token)", res.str("scope"))
			}
			if exp, _ := res.body["expires_in"].(float64); exp < 3500 || exp > 3600 {
				t.Errorf("expires_in = %v", res.body["expires_in"])
			}
			if cc := res.header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control = %q", cc)
			}

			// The token is active; its subject is the client.
			in := h.postForm(t, "/oauth2/introspect", url.Values{"token": {res.str("access_token")}}, serviceClient, serviceSecret)
			if in.status != http.StatusOK || in.body["active"] != true || in.str("client_id") != serviceClient || in.str("sub") != serviceClient || in.str("scope") != "invoices.read" {
				t.Errorf("introspection: %d %v", in.status, in.body)
			}
			if _, ok := in.body["username"]; ok {
				t.Errorf("introspection reports a username for a client token: %v", in.body)
			}

			// The registered method (client_secret_basic) is the only one
			// accepted: the same secret in the body is invalid_client.
			res = h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}, "client_id": {serviceClient}, "client_secret": {serviceSecret}}, "", "")
			if res.status != http.StatusUnauthorized || res.str("error") != "invalid_client" || res.header.Get("WWW-Authenticate") == "" {
				t.Errorf("client_secret_post for a client_secret_basic client: %d %v", res.status, res.body)
			}

			for _, c := range []struct {
				name       string
				form       url.Values
				user, pass string
				status     int
				code       string
			}{
				{"wrong secret", url.Values{"grant_type": {"client_credentials"}}, serviceClient, "wrong", http.StatusUnauthorized, "invalid_client"},
				{"unknown client", url.Values{"grant_type": {"client_credentials"}}, "nobody", "x", http.StatusUnauthorized, "invalid_client"},
				{"scope not allowed", url.Values{"grant_type": {"client_credentials"}, "scope": {"admin"}}, serviceClient, serviceSecret, http.StatusBadRequest, "invalid_scope"},
				{"public client", url.Values{"grant_type": {"client_credentials"}, "client_id": {publicClient}}, "", "", http.StatusBadRequest, "unauthorized_client"},
				{"confidential client without the grant", url.Values{"grant_type": {"client_credentials"}}, confClient, confSecret, http.StatusBadRequest, "unauthorized_client"},
			} {
				res := h.postForm(t, "/oauth2/token", c.form, c.user, c.pass)
				if res.status != c.status || res.str("error") != c.code {
					t.Errorf("%s: %d %v, want %d %s", c.name, res.status, res.body, c.status, c.code)
				}
				if res.str("access_token") != "" {
					t.Errorf("%s: a token was issued", c.name)
				}
			}
		})
	}
}

// TestMetadataAdvertisesClientCredentials checks RFC 8414 grant_types_supported.
func TestMetadataAdvertisesClientCredentials(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	resp, err := http.Get(h.srv.URL + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md struct {
		GrantTypes []string `json:"grant_types_supported"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"authorization_code": true, "refresh_token": true, "client_credentials": true}
	for _, g := range md.GrantTypes {
		delete(want, g)
	}
	if len(want) != 0 {
		t.Errorf("grant_types_supported = %v, missing %v", md.GrantTypes, want)
	}
}

// TestRegisterServiceClient: a confidential client may register for
// client_credentials alone, without redirect URIs; a public one may not.
func TestRegisterServiceClient(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	ctx := t.Context()
	info, err := oauth.RegisterClient(ctx, h.store, h.app.Hasher(), oauth.ClientMetadata{
		ClientName: "svc", GrantTypes: []string{"client_credentials"}, TokenEndpointAuthMethod: "client_secret_basic", Scope: "invoices.read",
	}, time.Now())
	if err != nil {
		t.Fatalf("register a client_credentials-only client: %v", err)
	}
	if info.ClientSecret == "" || len(info.ResponseTypes) != 0 {
		t.Errorf("registered %+v", info)
	}
	res := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"invoices.read"}}, info.ClientID, info.ClientSecret)
	if res.status != http.StatusOK {
		t.Errorf("token for the registered client: %d %v", res.status, res.body)
	}
	_, err = oauth.RegisterClient(ctx, h.store, h.app.Hasher(), oauth.ClientMetadata{
		GrantTypes: []string{"client_credentials"}, TokenEndpointAuthMethod: "none",
	}, time.Now())
	if err == nil {
		t.Error("a public client registered for client_credentials")
	}
}
