package adminapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/oauth/oauthtest"
	"github.com/authd/authd/storage/memory"
)

// FuzzAdminClientMetadata posts arbitrary bodies to the admin client
// registration endpoint: the answer is 201 or an RFC 7591 §3.2.2 error
// (4xx with an error code), never a 5xx or a panic; an accepted client
// only has redirect URIs that ValidateRedirectURI accepts.
func FuzzAdminClientMetadata(f *testing.F) {
	for _, s := range []string{
		`{"client_name":"App","redirect_uris":["com.example.app:/cb"],"token_endpoint_auth_method":"none"}`,
		`{"redirect_uris":["https://app.example.com/cb"],"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"scope":"openid offline_access"}`,
		`{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"client_secret_post","contacts":["a@b.c"]}`,
		`{"grant_types":["client_credentials"],"token_endpoint_auth_method":"client_secret_basic"}`,
		`{"redirect_uris":["http://localhost/cb"]}`, `{"redirect_uris":"x"}`, `{"unknown":1}`, `[]`, `null`, `{`,
		`{"redirect_uris":["com.example.app:/cb"]}{"x":1}`, `{"client_name":"\u0000\ud800"}`,
	} {
		f.Add(s)
	}
	store := memory.New()
	cfg := oauth.Config{Issuer: "http://127.0.0.1:1", Secret: []byte(testSecret), AdminTokens: []string{testAdminToken}}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	app, err := oauthtest.NewServer(cfg, oauth.Deps{Store: store, Logger: logger}, oauthtest.Services{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, "/admin/clients", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		rec := httptest.NewRecorder()
		app.ServeHTTP(rec, req)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("non-JSON answer %d: %q", rec.Code, rec.Body)
		}
		switch {
		case rec.Code == http.StatusCreated:
			uris, _ := out["redirect_uris"].([]any)
			for _, u := range uris {
				if s, _ := u.(string); oauth.ValidateRedirectURI(s) != nil {
					t.Fatalf("registered an invalid redirect URI %q from %q", s, body)
				}
			}
		case rec.Code >= 400 && rec.Code < 500:
			if out["error"] == nil {
				t.Fatalf("error answer without error code: %d %s", rec.Code, rec.Body)
			}
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
	})
}
