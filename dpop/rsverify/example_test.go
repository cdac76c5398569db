package rsverify_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/authd/authd/dpop"
	"github.com/authd/authd/dpop/rsverify"
)

// A resource server accepting a DPoP-bound access token: the proof is
// checked locally, the token with authd's introspection, and the token's
// cnf.jkt must be the proof's key. (Here a stand-in answers introspection
// as authd does for a DPoP-bound token.)
func Example() {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jkt, _ := dpop.Thumbprint(key.Public())
	authd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "sub": "alice", "client_id": "mobile-app",
			"token_type": "DPoP", "cnf": map[string]string{"jkt": jkt}})
	}))
	defer authd.Close()

	v := &rsverify.Verifier{IntrospectionURL: authd.URL + "/oauth2/introspect", ClientID: "orders-api", ClientSecret: "secret"}
	const resource = "https://api.example.com/orders"

	// The client: Authorization: DPoP and a proof with ath.
	proof, _ := dpop.NewProof(key, "ES256", dpop.ProofClaims{Method: "GET", URL: resource, AccessToken: "ory_at_example"})
	r := httptest.NewRequest(http.MethodGet, resource, nil)
	r.Header.Set("Authorization", "DPoP ory_at_example")
	r.Header.Set("DPoP", proof)
	tok, err := v.Verify(context.Background(), r, resource)
	fmt.Println(tok.Subject, tok.JKT == jkt, err)

	// The same token as a Bearer token is refused (RFC 9449 §7.2).
	r.Header.Set("Authorization", "Bearer ory_at_example")
	_, err = v.Verify(context.Background(), r, resource)
	fmt.Println(rsverify.Challenge(err))
	// Output:
	// alice true <nil>
	// DPoP algs="ES256 RS256 EdDSA Ed25519", error="invalid_token"
}
