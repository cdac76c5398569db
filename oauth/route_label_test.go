package oauth_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestRouteLabels: every endpoint has its own route label in the request
// metric (and the access log); only unknown paths are "other", so their
// number stays bounded whatever a client sends.
func TestRouteLabels(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	for _, c := range []struct{ method, path, route string }{
		{"GET", "/.well-known/openid-configuration", "/.well-known/openid-configuration"},
		{"GET", "/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server"},
		{"GET", "/oauth2/jwks", "/oauth2/jwks"},
		{"GET", "/oauth2/userinfo", "/oauth2/userinfo"},
		{"GET", "/oauth2/logout", "/oauth2/logout"},
		{"POST", "/oauth2/par", "/oauth2/par"},
		{"POST", "/oauth2/challenge", "/oauth2/challenge"},
		{"POST", "/oauth2/token", "/oauth2/token"}, // the route that bypasses mux
		{"GET", "/oauth2/revoke", "/oauth2/revoke"},
		{"GET", "/admin/users/alice", "/admin/users"},
		{"GET", "/admin/clients/x", "/admin/clients"},
		{"GET", "/no/such/path-123", "other"},
	} {
		req, _ := http.NewRequest(c.method, h.srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := http.Get(h.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	metrics := string(b)
	for _, route := range []string{"/.well-known/openid-configuration", "/.well-known/oauth-authorization-server", "/oauth2/jwks",
		"/oauth2/userinfo", "/oauth2/logout", "/oauth2/par", "/oauth2/challenge", "/oauth2/token", "/oauth2/revoke", "/admin/users", "/admin/clients", "other"} {
		if !strings.Contains(metrics, `route="`+route+`"`) {
			t.Errorf("no request counted under route %q", route)
		}
	}
	if strings.Contains(metrics, "no/such") {
		t.Error("an unknown path became a label")
	}
}
