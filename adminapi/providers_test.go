package adminapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestProvidersAPI: /admin/providers CRUD with the clients' Idempotency-Key
// rules (same key and body: the stored answer; same key, other body: 422),
// secrets never in an answer.
func TestProvidersAPI(t *testing.T) {
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			h := newHarness(t, harnessOpts{backend: backend})
			body := `{"id":"corp","kind":"oidc","issuer":"https://login.corp.example","client_id":"authd","client_secret":"s3cret-value","display_name":"Corp SSO"}`
			first := h.admin(t, adminReq{method: http.MethodPost, path: "/admin/providers", body: body, key: "p1"})
			wantStatus(t, "create", first, http.StatusCreated, "")
			if strings.Contains(string(first.raw), "s3cret") || first.body["has_client_secret"] != true ||
				!strings.HasSuffix(first.str("redirect_uri"), "/signin/fed/corp/callback") || first.header.Get("Location") != "/admin/providers/corp" {
				t.Fatalf("create: %s", first)
			}
			again := h.admin(t, adminReq{method: http.MethodPost, path: "/admin/providers", body: body, key: "p1"})
			if again.status != http.StatusCreated || string(again.raw) != string(first.raw) || again.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("retry: %s", again)
			}
			other := h.admin(t, adminReq{method: http.MethodPost, path: "/admin/providers", body: strings.Replace(body, "Corp SSO", "Other", 1), key: "p1"})
			wantStatus(t, "same key, other body", other, http.StatusUnprocessableEntity, "idempotency_key_reused")
			bad := h.admin(t, adminReq{method: http.MethodPost, path: "/admin/providers", body: `{"id":"x","kind":"saml"}`})
			wantStatus(t, "bad kind", bad, http.StatusBadRequest, "invalid_request")
			list := h.admin(t, adminReq{method: http.MethodGet, path: "/admin/providers"})
			if list.status != 200 || !strings.Contains(string(list.raw), `"id":"corp"`) {
				t.Fatalf("list: %s", list)
			}
			upd := h.admin(t, adminReq{method: http.MethodPut, path: "/admin/providers/corp", key: "u1",
				body: `{"kind":"oidc","issuer":"https://login.corp.example","client_id":"authd2","display_name":"Corp"}`})
			if upd.status != 200 || upd.body["has_client_secret"] != true || upd.str("client_id") != "authd2" {
				t.Fatalf("update: %s", upd)
			}
			wantStatus(t, "delete", h.admin(t, adminReq{method: http.MethodDelete, path: "/admin/providers/corp"}), http.StatusNoContent, "")
			wantStatus(t, "get after delete", h.admin(t, adminReq{method: http.MethodGet, path: "/admin/providers/corp"}), http.StatusNotFound, "not_found")
		})
	}
}
