package oauth_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestUnsupportedGrantNamesTheSupportedOnes: an unknown grant_type's
// error_description names the grants discovery advertises, token exchange
// included, and no other.
func TestUnsupportedGrantNamesTheSupportedOnes(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	resp, err := http.Get(h.srv.URL + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Grants []string `json:"grant_types_supported"`
	}
	err = json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if err != nil || len(m.Grants) == 0 {
		t.Fatalf("discovery: %v %v", err, m)
	}
	r := do(t, "POST", h.srv.URL+"/oauth2/token", "grant_type=password&client_id="+publicClient, "")
	var e struct {
		Description string `json:"error_description"`
	}
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || r.status != 400 || !strings.Contains(r.body, "unsupported_grant_type") {
		t.Fatalf("%d %s", r.status, r.body)
	}
	for _, g := range m.Grants {
		if !strings.Contains(e.Description, g) {
			t.Errorf("description %q does not name %s, which discovery advertises", e.Description, g)
		}
	}
}
