package oauth_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"sync"
	"testing"
)

// adminCall sends an admin API request and decodes the JSON answer.
func (h *harness) adminCall(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	if body != nil {
		_ = json.NewEncoder(&buf).Encode(body)
	}
	req, _ := http.NewRequest(method, h.srv.URL+path, &buf)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestAdminUpdateRacingRotation: a PUT and a secret rotation of the same
// client at the same moment never lose the rotation — the secret the
// rotation returned is the one that works afterwards.
func TestAdminUpdateRacingRotation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "postgres"})
	meta := map[string]any{
		"client_name": "Race", "grant_types": []string{"client_credentials"},
		"token_endpoint_auth_method": "client_secret_basic", "scope": "openid",
	}
	for i := range 10 {
		status, created := h.adminCall(t, http.MethodPost, "/admin/clients", meta)
		if status != http.StatusCreated {
			t.Fatalf("create: %d %v", status, created)
		}
		id := created["client_id"].(string)
		var (
			wg      sync.WaitGroup
			rotated map[string]any
			rs, us  int
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			rs, rotated = h.adminCall(t, http.MethodPost, "/admin/clients/"+url.PathEscape(id)+"/secret", nil)
		}()
		go func() {
			defer wg.Done()
			upd := map[string]any{}
			for k, v := range meta {
				upd[k] = v
			}
			upd["client_name"] = "Race renamed"
			us, _ = h.adminCall(t, http.MethodPut, "/admin/clients/"+url.PathEscape(id), upd)
		}()
		wg.Wait()
		if rs != http.StatusOK || us != http.StatusOK {
			t.Fatalf("round %d: rotate %d, update %d", i, rs, us)
		}
		secret := rotated["client_secret"].(string)
		res := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"openid"}}, id, secret)
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
	post := func(body string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/admin/clients", bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "key-meaning-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out := map[string]any{}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	const tail = `"redirect_uris":["com.example.app:/cb"],"token_endpoint_auth_method":"none"}`
	if s, out := post(`{"client_name":"alpha","CLIENT_NAME":"beta",` + tail); s != http.StatusCreated || out["client_name"] != "beta" {
		t.Fatalf("first: %d %v", s, out)
	}
	if s, out := post(`{"CLIENT_NAME":"beta","client_name":"alpha",` + tail); s != http.StatusUnprocessableEntity {
		t.Fatalf("a body with another meaning under the same key: %d %v, want 422", s, out)
	}
	if s, out := post(`{"token_endpoint_auth_method":"none","client_name":"beta","redirect_uris":["com.example.app:/cb"]}`); s != http.StatusCreated || out["client_name"] != "beta" {
		t.Fatalf("the same meaning in another order: %d %v, want the stored 201", s, out)
	}
}
