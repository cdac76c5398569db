package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/authd/authd/storage/postgres/pgtest"
)

// TestClientsOIDCMetadata: authd clients create and get carry
// post_logout_redirect_uris and id_token_signed_response_alg (issue 12
// item 8), and refuse an alg authd does not sign with (exit 2).
func TestClientsOIDCMetadata(t *testing.T) {
	e := map[string]string{"AUTHD_SECRET": strings.Repeat("o", 40), "AUTHD_DATABASE_URL": pgtest.DSN(t)}
	clients := func(stdin string, args ...string) (map[string]any, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(t.Context(), append([]string{"clients"}, args...), env(e), strings.NewReader(stdin), &out, &errOut)
		res := map[string]any{}
		if out.Len() > 0 {
			_ = json.Unmarshal(out.Bytes(), &res)
		}
		return res, err
	}
	created, err := clients(`{"client_name":"OIDC","redirect_uris":["com.example.app:/cb"],"token_endpoint_auth_method":"none",
		"post_logout_redirect_uris":["com.example.app:/bye"],"id_token_signed_response_alg":"ES256"}`, "create")
	if err != nil {
		t.Fatal(err)
	}
	got, err := clients("", "get", created["client_id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if got["id_token_signed_response_alg"] != "ES256" || len(got["post_logout_redirect_uris"].([]any)) != 1 {
		t.Fatalf("get: %v", got)
	}
	_, err = clients(`{"redirect_uris":["com.example.app:/cb"],"token_endpoint_auth_method":"none","id_token_signed_response_alg":"none"}`, "create")
	var errb bytes.Buffer
	if code := exitCode(err, &errb); code == 0 || !strings.Contains(errb.String(), "invalid_client_metadata") {
		t.Fatalf("alg none: exit %d %s", code, errb.String())
	}
}
