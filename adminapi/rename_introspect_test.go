package adminapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestRenamedUserTokensIntrospect: introspection's username is the current
// name of the token's sub. Rename dora → carol and create a new dora:
// carol's old and new tokens introspect as carol, never as dora, and the
// new dora's as dora.
func TestRenamedUserTokensIntrospect(t *testing.T) {
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			h := newHarness(t, harnessOpts{backend: backend})
			const pw = "a good passphrase"
			wantStatus(t, "create dora", h.admin(t, adminReq{method: "POST", path: "/admin/users", body: userJSON("dora", pw)}), http.StatusCreated, "")
			old := h.tokensFor(t, newBrowser(t), "dora", pw)
			wantStatus(t, "rename", h.admin(t, adminReq{method: "PUT", path: "/admin/users/dora",
				body: `{"username":"carol","email":"carol@example.com","email_verified":true,"name":"Carol"}`}), http.StatusOK, "")
			wantStatus(t, "create the new dora", h.admin(t, adminReq{method: "POST", path: "/admin/users", body: userJSON("dora", pw+" 2")}), http.StatusCreated, "")
			renewed := h.tokensFor(t, newBrowser(t), "carol", pw)
			fresh := h.tokensFor(t, newBrowser(t), "dora", pw+" 2")
			for name, c := range map[string]struct {
				token, want string
			}{
				"carol's old access token":  {old.str("access_token"), "carol"},
				"carol's old refresh token": {old.str("refresh_token"), "carol"},
				"carol's new access token":  {renewed.str("access_token"), "carol"},
				"the new dora's token":      {fresh.str("access_token"), "dora"},
			} {
				got := introspectUsername(t, h, c.token)
				if got != c.want {
					t.Errorf("%s introspects as %q, want %q", name, got, c.want)
				}
			}
		})
	}
}

func introspectUsername(t *testing.T, h *harness, token string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || out["active"] != true {
		t.Fatalf("introspect: %d %v %v", resp.StatusCode, out, err)
	}
	s, _ := out["username"].(string)
	return s
}
