package adminapi_test

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
)

// TestAdminUpdateRacingRotation: a PUT and a secret rotation of the same
// client at the same moment never lose the rotation — the secret the
// rotation returned is the one that works afterwards.
func TestAdminUpdateRacingRotation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "postgres"})
	const meta = `{"client_name":"Race","grant_types":["client_credentials"],"token_endpoint_auth_method":"client_secret_basic","scope":"openid"}`
	const renamed = `{"client_name":"Race renamed","grant_types":["client_credentials"],"token_endpoint_auth_method":"client_secret_basic","scope":"openid"}`
	for i := range 10 {
		created, err := h.adminDo(adminReq{method: http.MethodPost, path: "/admin/clients", body: meta})
		if err != nil || created.status != http.StatusCreated {
			t.Fatalf("create: %v %v", created, err)
		}
		path := "/admin/clients/" + url.PathEscape(created.str("client_id"))
		var (
			wg               sync.WaitGroup
			rotated, updated adminResult
			rerr, uerr       error
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			rotated, rerr = h.adminDo(adminReq{method: http.MethodPost, path: path + "/secret"})
		}()
		go func() {
			defer wg.Done()
			updated, uerr = h.adminDo(adminReq{method: http.MethodPut, path: path, body: renamed})
		}()
		wg.Wait()
		if rerr != nil || uerr != nil || rotated.status != http.StatusOK || updated.status != http.StatusOK {
			t.Fatalf("round %d: rotate %v (%v), update %v (%v)", i, rotated, rerr, updated, uerr)
		}
		res := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"openid"}},
			created.str("client_id"), rotated.str("client_secret"))
		if res.status != http.StatusOK {
			t.Fatalf("round %d: the rotated secret does not work after a concurrent update: %d %v", i, res.status, res.body)
		}
	}
}

// TestAdminIdempotencyHashesMeaning: bodies that differ only in the case of
// a repeated member mean different things and must not share a stored
// answer (422), while the same meaning in another member order replays.
func TestAdminIdempotencyHashesMeaning(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	post := func(body string) adminResult {
		t.Helper()
		r, err := h.adminDo(adminReq{method: http.MethodPost, path: "/admin/clients", body: body, key: "key-meaning-1"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	const tail = `"redirect_uris":["com.example.app:/cb"],"token_endpoint_auth_method":"none"}`
	if r := post(`{"client_name":"alpha","CLIENT_NAME":"beta",` + tail); r.status != http.StatusCreated || r.str("client_name") != "beta" {
		t.Fatalf("first: %v", r)
	}
	if r := post(`{"CLIENT_NAME":"beta","client_name":"alpha",` + tail); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("a body with another meaning under the same key: %v, want 422", r)
	}
	if r := post(`{"token_endpoint_auth_method":"none","client_name":"beta","redirect_uris":["com.example.app:/cb"]}`); r.status != http.StatusCreated || r.str("client_name") != "beta" {
		t.Fatalf("the same meaning in another order: %v, want the stored 201", r)
	}
}
