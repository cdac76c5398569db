package adminapi_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/authd/authd/adminapi"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/oauth/oauthtest"
	"github.com/authd/authd/storage/memory"
)

// metaJSON returns client metadata JSON for a confidential web client.
func metaJSON(name string) string {
	return fmt.Sprintf(`{"client_name":%q,"redirect_uris":["https://app.example.com/cb"],`+
		`"grant_types":["authorization_code","refresh_token"],"response_types":["code"],`+
		`"token_endpoint_auth_method":"client_secret_basic","scope":"openid offline_access profile",`+
		`"client_uri":"https://app.example.com","logo_uri":"https://app.example.com/logo.png",`+
		`"contacts":["ops@example.com"],"skip_consent":true}`, name)
}

func newKey() string { return "key-" + oauth.NewClientID() }

// clientLogin runs authorize → login for a registered client and exchanges
// the code, returning the tokens.
func (h *harness) clientLogin(t *testing.T, clientID, secret, redirect string) *oauth2.Token {
	t.Helper()
	conf := &oauth2.Config{
		ClientID: clientID, ClientSecret: secret, RedirectURL: redirect,
		Scopes: []string{"openid", "offline_access"},
		Endpoint: oauth2.Endpoint{AuthURL: h.srv.URL + "/oauth2/authorize", TokenURL: h.srv.URL + "/oauth2/token",
			AuthStyle: oauth2.AuthStyleInHeader},
	}
	v := oauth2.GenerateVerifier()
	loc := h.login(t, newBrowser(t), conf.AuthCodeURL("state-admin", oauth2.S256ChallengeOption(v)))
	tok, err := conf.Exchange(t.Context(), loc.Query().Get("code"), oauth2.VerifierOption(v))
	if err != nil {
		t.Fatalf("exchange for %s: %v", clientID, err)
	}
	return tok
}

// introspectAs introspects token authenticating as a confidential client and
// returns the HTTP status.
func (h *harness) introspectAs(t *testing.T, clientID, secret, token string) int {
	t.Helper()
	return h.postForm(t, "/oauth2/introspect", url.Values{"token": {token}}, clientID, secret).status
}

// TestAdminClientLifecycle: create → get → list (several pages) → update →
// rotate → delete over HTTP; the deleted client's tokens are inactive.
func TestAdminClientLifecycle(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})

			// Create.
			res := h.admin(t, adminReq{method: "POST", path: "/admin/clients", body: metaJSON("Lifecycle")})
			wantStatus(t, "create", res, http.StatusCreated, "")
			id, secret := res.str("client_id"), res.str("client_secret")
			if len(id) < 22 || len(secret) < 43 { // 128 and 256 bits, base64url
				t.Fatalf("client_id %q / client_secret %q too short", id, secret)
			}
			if res.header.Get("Location") != "/admin/clients/"+id {
				t.Errorf("Location = %q", res.header.Get("Location"))
			}
			if exp, ok := res.body["client_secret_expires_at"].(float64); !ok || exp != 0 {
				t.Errorf("client_secret_expires_at = %v, want 0 (RFC 7591 §3.2.1)", res.body["client_secret_expires_at"])
			}
			if iat, _ := res.body["client_id_issued_at"].(float64); time.Since(time.Unix(int64(iat), 0)) > time.Minute {
				t.Errorf("client_id_issued_at = %v", res.body["client_id_issued_at"])
			}
			if res.str("client_name") != "Lifecycle" || res.str("scope") != "openid offline_access profile" ||
				res.body["skip_consent"] != true || res.str("token_endpoint_auth_method") != "client_secret_basic" {
				t.Errorf("metadata not echoed: %s", res)
			}
			// The client works: a login with its secret.
			tok := h.clientLogin(t, id, secret, "https://app.example.com/cb")

			// Get: the same information, without the secret.
			got := h.admin(t, adminReq{method: "GET", path: "/admin/clients/" + id})
			wantStatus(t, "get", got, http.StatusOK, "")
			if _, ok := got.body["client_secret"]; ok {
				t.Errorf("GET shows the client_secret: %s", got)
			}
			delete(res.body, "client_secret")
			if fmt.Sprint(got.body) != fmt.Sprint(res.body) {
				t.Errorf("GET = %v\nwant %v", got.body, res.body)
			}

			// List: more clients, then page through with limit 2.
			all := []string{id, publicClient, confClient, "other-app"}
			for i := range 4 {
				r := h.admin(t, adminReq{method: "POST", path: "/admin/clients", body: metaJSON(fmt.Sprint("Extra ", i))})
				wantStatus(t, "create extra", r, http.StatusCreated, "")
				all = append(all, r.str("client_id"))
			}
			slices.Sort(all)
			var seen []string
			cursor, pages := "", 0
			for {
				path := "/admin/clients?limit=2"
				if cursor != "" {
					path += "&cursor=" + url.QueryEscape(cursor)
				}
				page := h.admin(t, adminReq{method: "GET", path: path})
				wantStatus(t, "list", page, http.StatusOK, "")
				pages++
				items, _ := page.body["clients"].([]any)
				if len(items) == 0 || len(items) > 2 {
					t.Fatalf("page %d has %d clients: %s", pages, len(items), page)
				}
				for _, it := range items {
					c := it.(map[string]any)
					seen = append(seen, c["client_id"].(string))
					if _, ok := c["client_secret"]; ok {
						t.Errorf("list shows a client_secret: %v", c)
					}
				}
				cursor = page.str("next_cursor")
				if cursor == "" {
					break
				}
				if pages > 10 {
					t.Fatal("paging does not end")
				}
			}
			if pages < 3 || !slices.Equal(seen, all) {
				t.Fatalf("%d pages listed %q, want %q in order over at least 3 pages", pages, seen, all)
			}

			// Update: full replace; the secret stays valid.
			upd := `{"client_id":"` + id + `","client_name":"Renamed","redirect_uris":["https://app.example.com/cb","https://app.example.com/cb2"],"scope":"openid offline_access"}`
			res = h.admin(t, adminReq{method: "PUT", path: "/admin/clients/" + id, body: upd})
			wantStatus(t, "update", res, http.StatusOK, "")
			if res.str("client_name") != "Renamed" || res.str("client_id") != id || res.body["skip_consent"] != nil ||
				len(res.body["redirect_uris"].([]any)) != 2 || res.str("client_uri") != "" {
				t.Errorf("update = %s", res)
			}
			if _, ok := res.body["client_secret"]; ok {
				t.Errorf("update of a confidential client shows a secret: %s", res)
			}
			if st := h.introspectAs(t, id, secret, tok.AccessToken); st != http.StatusOK {
				t.Fatalf("secret after update: introspect %d", st)
			}
			got = h.admin(t, adminReq{method: "GET", path: "/admin/clients/" + id})
			if got.str("client_name") != "Renamed" || got.body["client_id_issued_at"] != res.body["client_id_issued_at"] {
				t.Errorf("GET after update = %s", got)
			}

			// Rotate: a new secret, shown once; the old one stops working.
			res = h.admin(t, adminReq{method: "POST", path: "/admin/clients/" + id + "/secret"})
			wantStatus(t, "rotate", res, http.StatusOK, "")
			newSecret := res.str("client_secret")
			if len(newSecret) < 43 || newSecret == secret {
				t.Fatalf("rotated secret %q", newSecret)
			}
			if st := h.introspectAs(t, id, secret, tok.AccessToken); st != http.StatusUnauthorized {
				t.Errorf("old secret after rotation: introspect %d, want 401", st)
			}
			if st := h.introspectAs(t, id, newSecret, tok.AccessToken); st != http.StatusOK {
				t.Errorf("new secret: introspect %d, want 200", st)
			}
			if !h.introspect(t, tok.AccessToken) || !h.introspect(t, tok.RefreshToken) {
				t.Fatal("tokens inactive before the delete")
			}

			// Delete: 204, then 404, and the client's tokens are dead.
			res = h.admin(t, adminReq{method: "DELETE", path: "/admin/clients/" + id})
			wantStatus(t, "delete", res, http.StatusNoContent, "")
			if h.introspect(t, tok.AccessToken) || h.introspect(t, tok.RefreshToken) {
				t.Error("a deleted client's token is still active")
			}
			wantStatus(t, "get after delete", h.admin(t, adminReq{method: "GET", path: "/admin/clients/" + id}), http.StatusNotFound, "not_found")
			wantStatus(t, "delete again", h.admin(t, adminReq{method: "DELETE", path: "/admin/clients/" + id}), http.StatusNotFound, "not_found")
			wantStatus(t, "rotate deleted", h.admin(t, adminReq{method: "POST", path: "/admin/clients/" + id + "/secret"}), http.StatusNotFound, "not_found")
			wantStatus(t, "update deleted", h.admin(t, adminReq{method: "PUT", path: "/admin/clients/" + id, body: metaJSON("x")}), http.StatusNotFound, "not_found")
			if h.pool != nil {
				var n int
				if err := h.pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM access_tokens WHERE client_id = $1)
					+ (SELECT count(*) FROM refresh_tokens WHERE client_id = $1)`, id).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Errorf("%d tokens of the deleted client remain in the database", n)
				}
			}
		})
	}
}

// countClients returns how many clients are named name.
func (h *harness) countClients(t *testing.T, name string) int {
	t.Helper()
	all, err := h.store.ListClients(t.Context(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range all {
		if c.Name == name {
			n++
		}
	}
	if h.pool != nil {
		var db int
		if err := h.pool.QueryRow(t.Context(), `SELECT count(*) FROM clients WHERE name = $1`, name).Scan(&db); err != nil {
			t.Fatal(err)
		}
		if db != n {
			t.Fatalf("database holds %d clients named %q, the store lists %d", db, name, n)
		}
	}
	return n
}

// TestAdminIdempotentCreate: one POST with one Idempotency-Key, sent twice
// in sequence and then 16 times concurrently, creates one client; every
// answer is the stored 201 byte for byte (same client_id and secret), or a
// 409 for requests overlapping the first, which get the stored answer on
// retry.
func TestAdminIdempotentCreate(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})

			t.Run("sequential", func(t *testing.T) {
				key := newKey()
				req := adminReq{method: "POST", path: "/admin/clients", body: metaJSON("Sequential"), key: key}
				first := h.admin(t, req)
				wantStatus(t, "first", first, http.StatusCreated, "")
				if first.header.Get("Idempotent-Replayed") != "" {
					t.Error("first answer marked as replayed")
				}
				// Same JSON, other formatting and member order: same request.
				var v map[string]any
				_ = json.Unmarshal([]byte(req.body), &v)
				reordered, _ := json.MarshalIndent(v, "", "   ")
				for i, body := range []string{req.body, string(reordered)} {
					again := h.admin(t, adminReq{method: "POST", path: "/admin/clients", body: body, key: key})
					if again.status != http.StatusCreated || !bytes.Equal(again.raw, first.raw) {
						t.Fatalf("retry %d = %s\nwant %s", i, again, first)
					}
					if again.header.Get("Idempotent-Replayed") != "true" || again.header.Get("Location") != first.header.Get("Location") {
						t.Errorf("retry %d headers %v", i, again.header)
					}
				}
				if n := h.countClients(t, "Sequential"); n != 1 {
					t.Fatalf("%d clients created, want 1", n)
				}
				// Without a key, the same POST creates another client.
				wantStatus(t, "no key", h.admin(t, adminReq{method: "POST", path: "/admin/clients", body: metaJSON("Sequential")}), http.StatusCreated, "")
				if n := h.countClients(t, "Sequential"); n != 2 {
					t.Fatalf("%d clients, want 2", n)
				}
			})

			t.Run("concurrent", func(t *testing.T) {
				const n = 16
				req := adminReq{method: "POST", path: "/admin/clients", body: metaJSON("Concurrent"), key: newKey()}
				results := make([]adminResult, n)
				errs := make([]error, n)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						<-start
						results[i], errs[i] = h.adminDo(req)
					})
				}
				close(start)
				wg.Wait()
				var created []byte
				conflicts := 0
				for i, r := range results {
					if errs[i] != nil {
						t.Fatal(errs[i])
					}
					switch r.status {
					case http.StatusCreated:
						if created == nil {
							created = r.raw
						} else if !bytes.Equal(r.raw, created) {
							t.Errorf("two different 201 answers:\n%s\n%s", created, r.raw)
						}
					case http.StatusConflict:
						wantStatus(t, "overlapping request", r, http.StatusConflict, "idempotency_key_in_flight")
						conflicts++
					default:
						t.Errorf("unexpected answer %s", r)
					}
				}
				if created == nil {
					t.Fatal("no request got 201")
				}
				// The overlapping ones retry and get the stored answer.
				for range conflicts {
					r := h.admin(t, req)
					if r.status != http.StatusCreated || !bytes.Equal(r.raw, created) {
						t.Fatalf("retry after 409 = %s\nwant %s", r, created)
					}
				}
				if got := h.countClients(t, "Concurrent"); got != 1 {
					t.Fatalf("%d clients created, want 1", got)
				}
				t.Logf("%d of %d concurrent requests got 409", conflicts, n)
			})
		})
	}
}

// TestAdminIdempotencyKeyRules: same key and another body is 422; a request
// that failed validation leaves no key, so the fixed body may reuse it;
// keys are scoped to the endpoint and the admin credential; PUT and
// rotation replay too.
func TestAdminIdempotencyKeyRules(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			second := "second-admin-token"
			h := newHarness(t, harnessOpts{backend: backend, cfg: func(c *oauth.Config) {
				c.AdminTokens = append(c.AdminTokens, second)
			}})
			post := func(key, body string, token *string) adminResult {
				return h.admin(t, adminReq{method: "POST", path: "/admin/clients", body: body, key: key, token: token})
			}

			// Same key, different body: 422, and nothing is created.
			key := newKey()
			first := post(key, metaJSON("Keyed"), nil)
			wantStatus(t, "first", first, http.StatusCreated, "")
			wantStatus(t, "other body", post(key, metaJSON("Another"), nil), http.StatusUnprocessableEntity, "idempotency_key_reused")
			if n := h.countClients(t, "Another"); n != 0 {
				t.Fatalf("a 422 created %d clients", n)
			}
			if r := post(key, metaJSON("Keyed"), nil); !bytes.Equal(r.raw, first.raw) {
				t.Fatalf("replay after 422 = %s", r)
			}

			// A failed request leaves no key: fix the body, reuse the key.
			key = newKey()
			bad := strings.Replace(metaJSON("Fixed"), "https://app.example.com/cb", "http://localhost/cb", 1)
			wantStatus(t, "invalid redirect", post(key, bad, nil), http.StatusBadRequest, "invalid_redirect_uri")
			wantStatus(t, "invalid JSON", post(key, `{"client_name":`, nil), http.StatusBadRequest, "invalid_client_metadata")
			fixed := post(key, metaJSON("Fixed"), nil)
			wantStatus(t, "fixed body, same key", fixed, http.StatusCreated, "")
			if r := post(key, metaJSON("Fixed"), nil); !bytes.Equal(r.raw, fixed.raw) {
				t.Fatalf("replay of the fixed request = %s", r)
			}

			// Another admin credential has its own key space.
			other := post(key, metaJSON("Fixed"), &second)
			wantStatus(t, "other credential", other, http.StatusCreated, "")
			if other.str("client_id") == fixed.str("client_id") {
				t.Fatal("a key of another admin credential replayed this one's answer")
			}

			// Rotation with a key: the retry shows the same new secret, once
			// rotated; another endpoint with the same key is independent.
			id := fixed.str("client_id")
			rot := h.admin(t, adminReq{method: "POST", path: "/admin/clients/" + id + "/secret", key: key})
			wantStatus(t, "rotate", rot, http.StatusOK, "")
			rot2 := h.admin(t, adminReq{method: "POST", path: "/admin/clients/" + id + "/secret", key: key})
			if !bytes.Equal(rot.raw, rot2.raw) || rot2.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("rotation replay = %s, want %s", rot2, rot)
			}
			if rot.str("client_secret") == fixed.str("client_secret") {
				t.Fatal("rotation kept the secret")
			}
			// The secret in force is the rotated one.
			tok := h.clientLogin(t, id, rot.str("client_secret"), "https://app.example.com/cb")
			if st := h.introspectAs(t, id, rot.str("client_secret"), tok.AccessToken); st != http.StatusOK {
				t.Fatalf("rotated secret: %d", st)
			}

			// PUT with a key, including one that turns a public client
			// confidential: the retry gets the same new secret.
			pub := post("", `{"client_name":"Pub","redirect_uris":["com.example.pub:/cb"],"token_endpoint_auth_method":"none"}`, nil)
			wantStatus(t, "create public", pub, http.StatusCreated, "")
			if _, ok := pub.body["client_secret"]; ok {
				t.Fatalf("public client got a secret: %s", pub)
			}
			wantStatus(t, "rotate public", h.admin(t, adminReq{method: "POST", path: "/admin/clients/" + pub.str("client_id") + "/secret"}), http.StatusBadRequest, "invalid_request")
			put := adminReq{method: "PUT", path: "/admin/clients/" + pub.str("client_id"), key: key,
				body: `{"client_name":"Pub","redirect_uris":["https://pub.example/cb"],"token_endpoint_auth_method":"client_secret_post"}`}
			up1, up2 := h.admin(t, put), h.admin(t, put)
			wantStatus(t, "put", up1, http.StatusOK, "")
			if up1.str("client_secret") == "" || !bytes.Equal(up1.raw, up2.raw) {
				t.Fatalf("put = %s, retry = %s", up1, up2)
			}
			put.body = strings.Replace(put.body, "Pub", "Pub2", 1)
			wantStatus(t, "put other body", h.admin(t, put), http.StatusUnprocessableEntity, "idempotency_key_reused")
		})
	}
}

// TestAdminIdempotencyDump: a dump of idempotency_keys holds neither a
// client_secret nor a raw Idempotency-Key, in any encoding.
func TestAdminIdempotencyDump(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "postgres"})
	key := "dump-" + oauth.NewClientID()
	res := h.admin(t, adminReq{method: "POST", path: "/admin/clients", body: metaJSON("Dump"), key: key})
	wantStatus(t, "create", res, http.StatusCreated, "")
	rot := h.admin(t, adminReq{method: "POST", path: "/admin/clients/" + res.str("client_id") + "/secret", key: key})
	wantStatus(t, "rotate", rot, http.StatusOK, "")

	rows, err := h.pool.Query(t.Context(), `SELECT t::text FROM idempotency_keys t`)
	if err != nil {
		t.Fatal(err)
	}
	var dump strings.Builder
	n := 0
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		dump.WriteString(line + "\n")
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("dump has %d rows, want 2:\n%s", n, dump.String())
	}
	d := strings.ToLower(dump.String())
	for name, v := range map[string]string{
		"client_secret": res.str("client_secret"), "rotated client_secret": rot.str("client_secret"),
		"Idempotency-Key": key, "admin token": testAdminToken, "client_name": "Dump",
	} {
		for _, enc := range []string{v, hex.EncodeToString([]byte(v))} {
			if strings.Contains(d, strings.ToLower(enc)) {
				t.Errorf("the dump contains the %s (%q):\n%s", name, enc, dump.String())
			}
		}
	}
	if strings.Contains(d, "client_secret") || strings.Contains(d, "redirect_uris") {
		t.Errorf("the dump contains the response in the clear:\n%s", dump.String())
	}
}

// TestAdminMalformedRequests: every kind of bad request gets its status and
// an RFC 7591 §3.2.2 error object; none is a 500.
func TestAdminMalformedRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	wrong, none := "wrong-token", ""
	valid := metaJSON("Valid")
	tests := []struct {
		name       string
		req        adminReq
		wantStatus int
		wantError  string
	}{
		{"no token", adminReq{method: "GET", path: "/admin/clients", token: &none}, 401, "invalid_token"},
		{"wrong token", adminReq{method: "POST", path: "/admin/clients", body: valid, token: &wrong}, 401, "invalid_token"},
		{"basic auth", adminReq{method: "GET", path: "/admin/clients", header: map[string]string{"Authorization": "Basic YWRtaW46YWRtaW4="}}, 401, "invalid_token"},
		{"token prefix", adminReq{method: "GET", path: "/admin/clients", token: ptr(testAdminToken[:5])}, 401, "invalid_token"},
		{"bad JSON", adminReq{method: "POST", path: "/admin/clients", body: `{"client_name": "x",`}, 400, "invalid_client_metadata"},
		{"not an object", adminReq{method: "POST", path: "/admin/clients", body: `["https://app.example.com/cb"]`}, 400, "invalid_client_metadata"},
		{"null", adminReq{method: "POST", path: "/admin/clients", body: `null`}, 400, "invalid_client_metadata"},
		{"trailing data", adminReq{method: "POST", path: "/admin/clients", body: valid + `{}`}, 400, "invalid_client_metadata"},
		{"unknown field", adminReq{method: "POST", path: "/admin/clients", body: `{"redirect_uris":["https://a.example/cb"],"jwks_uri":"https://a.example/jwks"}`}, 400, "invalid_client_metadata"},
		{"client_secret in body", adminReq{method: "POST", path: "/admin/clients", body: `{"redirect_uris":["https://a.example/cb"],"client_secret":"mine"}`}, 400, "invalid_client_metadata"},
		{"wrong type", adminReq{method: "POST", path: "/admin/clients", body: `{"redirect_uris":"https://a.example/cb"}`}, 400, "invalid_client_metadata"},
		{"empty body", adminReq{method: "POST", path: "/admin/clients", header: map[string]string{"Content-Type": "application/json"}}, 400, "invalid_client_metadata"},
		{"text/plain", adminReq{method: "POST", path: "/admin/clients", body: valid, header: map[string]string{"Content-Type": "text/plain"}}, 415, "invalid_client_metadata"},
		{"form", adminReq{method: "POST", path: "/admin/clients", body: "client_name=x", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415, "invalid_client_metadata"},
		{"no content type", adminReq{method: "POST", path: "/admin/clients", body: valid, header: map[string]string{"Content-Type": ""}}, 415, "invalid_client_metadata"},
		{"latin1", adminReq{method: "PUT", path: "/admin/clients/" + publicClient, body: valid, header: map[string]string{"Content-Type": "application/json; charset=iso-8859-1"}}, 415, "invalid_client_metadata"},
		{"huge body", adminReq{method: "POST", path: "/admin/clients", body: `{"client_name":"` + strings.Repeat("a", 40<<10) + `"}`}, 413, "invalid_client_metadata"},
		{"huge body over the server limit", adminReq{method: "POST", path: "/admin/clients", body: `{"client_name":"` + strings.Repeat("a", 100<<10) + `"}`}, 413, "invalid_client_metadata"},
		{"huge chunked body", adminReq{method: "PUT", path: "/admin/clients/" + publicClient, chunked: true, body: `{"client_name":"` + strings.Repeat("a", 40<<10) + `"}`}, 413, "invalid_client_metadata"},
		{"huge rotate body", adminReq{method: "POST", path: "/admin/clients/" + confClient + "/secret", chunked: true, body: strings.Repeat(" ", 40<<10)}, 413, "invalid_client_metadata"},
		{"rotate with parameters", adminReq{method: "POST", path: "/admin/clients/" + confClient + "/secret", body: `{"client_secret":"mine"}`}, 400, "invalid_client_metadata"},
		{"no redirect_uris", adminReq{method: "POST", path: "/admin/clients", body: `{"client_name":"x"}`}, 400, "invalid_redirect_uri"},
		{"localhost", adminReq{method: "POST", path: "/admin/clients", body: `{"redirect_uris":["http://localhost:8080/cb"]}`}, 400, "invalid_redirect_uri"},
		{"implicit", adminReq{method: "POST", path: "/admin/clients", body: `{"redirect_uris":["https://a.example/cb"],"response_types":["token"]}`}, 400, "invalid_client_metadata"},
		{"grant and response types disagree", adminReq{method: "POST", path: "/admin/clients", body: `{"redirect_uris":["https://a.example/cb"],"grant_types":["authorization_code"],"response_types":["code","token"]}`}, 400, "invalid_client_metadata"},
		{"public client_credentials", adminReq{method: "POST", path: "/admin/clients", body: `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","client_credentials"]}`}, 400, "invalid_client_metadata"},
		{"unknown auth method", adminReq{method: "POST", path: "/admin/clients", body: `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt"}`}, 400, "invalid_client_metadata"},
		{"bad scope", adminReq{method: "POST", path: "/admin/clients", body: `{"redirect_uris":["https://a.example/cb"],"scope":"openid \"quoted\""}`}, 400, "invalid_client_metadata"},
		{"javascript logo", adminReq{method: "POST", path: "/admin/clients", body: `{"redirect_uris":["https://a.example/cb"],"logo_uri":"javascript:alert(1)"}`}, 400, "invalid_client_metadata"},
		{"mismatched client_id", adminReq{method: "PUT", path: "/admin/clients/" + publicClient, body: `{"client_id":"other","redirect_uris":["https://a.example/cb"]}`}, 400, "invalid_client_metadata"},
		{"empty Idempotency-Key", adminReq{method: "POST", path: "/admin/clients", body: valid, header: map[string]string{"Idempotency-Key": " "}}, 400, "invalid_request"},
		{"long Idempotency-Key", adminReq{method: "POST", path: "/admin/clients", body: valid, key: strings.Repeat("k", 256)}, 400, "invalid_request"},
		{"Idempotency-Key with spaces", adminReq{method: "POST", path: "/admin/clients", body: valid, key: "a b"}, 400, "invalid_request"},
		{"limit zero", adminReq{method: "GET", path: "/admin/clients?limit=0"}, 400, "invalid_request"},
		{"limit too big", adminReq{method: "GET", path: "/admin/clients?limit=1000"}, 400, "invalid_request"},
		{"limit not a number", adminReq{method: "GET", path: "/admin/clients?limit=ten"}, 400, "invalid_request"},
		{"bad cursor", adminReq{method: "GET", path: "/admin/clients?cursor=%%%"}, 400, "invalid_request"},
		{"forged cursor", adminReq{method: "GET", path: "/admin/clients?cursor=YWJj"}, 400, "invalid_request"},
		{"unknown client", adminReq{method: "GET", path: "/admin/clients/nope"}, 404, "not_found"},
		{"method not allowed", adminReq{method: "PATCH", path: "/admin/clients/" + publicClient, body: valid}, 405, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := h.admin(t, tt.req)
			wantStatus(t, tt.name, res, tt.wantStatus, tt.wantError)
			if tt.wantStatus == 401 && !strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("401 without a Bearer challenge (RFC 6750 §3): %v", res.header)
			}
		})
	}
	// Nothing above created or changed a client.
	all, err := h.store.ListClients(t.Context(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Errorf("%d clients after malformed requests, want the 3 seeded", len(all))
	}
}

// TestAdminAuditLog: every admin request is one audit event naming who (the
// credential's fingerprint), what and the client_id, and no event carries a
// secret, a token or an Idempotency-Key.
func TestAdminAuditLog(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	store := memory.New()
	a, err := adminapi.New(adminapi.Config{Secret: []byte(testSecret), AdminTokens: []string{testAdminToken},
		Store: store, People: identity.New(store, identity.Options{Logger: logger}), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	caller, ok := a.AuthenticateToken(testAdminToken)
	if !ok {
		t.Fatal("the admin token is not accepted")
	}
	if _, ok := a.AuthenticateToken("nope"); ok {
		t.Fatal("a wrong token is accepted")
	}
	ctx := context.Background()
	key := newKey()
	created := a.CreateClient(ctx, caller, key, []byte(metaJSON("Audited")))
	var info oauth.ClientInformation
	if err := json.Unmarshal(created.Body, &info); err != nil || created.Status != 201 || info.ClientSecret == "" {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	replay := a.CreateClient(ctx, caller, key, []byte(metaJSON("Audited")))
	rotated := a.RotateClientSecret(ctx, caller, info.ClientID, "")
	a.GetClient(ctx, caller, info.ClientID)
	a.DeleteClient(ctx, caller, info.ClientID)
	a.DeleteClient(ctx, a.LocalCaller("cli"), info.ClientID)
	if !replay.Replayed || !bytes.Equal(replay.Body, created.Body) {
		t.Fatalf("replay: %+v", replay)
	}

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d log lines, want 6 audit events:\n%s", len(lines), buf.String())
	}
	wantWhat := []string{"client.create", "client.create", "client.rotate_secret", "client.get", "client.delete", "client.delete"}
	for i, line := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if ev["msg"] != "admin audit" || ev["what"] != wantWhat[i] || ev["client_id"] != info.ClientID {
			t.Errorf("event %d = %v", i, ev)
		}
		who, _ := ev["who"].(string)
		if (i < 5 && (who != caller.String() || !strings.HasPrefix(who, "token:"))) || (i == 5 && who != "local:cli") {
			t.Errorf("event %d who = %q", i, who)
		}
	}
	if lines[1] == lines[0] || !strings.Contains(lines[1], `"replayed":true`) || !strings.Contains(lines[5], `"status":404`) {
		t.Errorf("events do not tell the replay or the failure apart:\n%s", buf.String())
	}
	var rot oauth.ClientInformation
	_ = json.Unmarshal(rotated.Body, &rot)
	for name, secret := range map[string]string{"client_secret": info.ClientSecret, "rotated secret": rot.ClientSecret,
		"Idempotency-Key": key, "admin token": testAdminToken} {
		if secret == "" || strings.Contains(buf.String(), secret) {
			t.Errorf("the audit log contains the %s %q", name, secret)
		}
	}
	if _, err := adminapi.New(adminapi.Config{Secret: []byte("short"), Store: store, People: identity.New(store, identity.Options{})}); err == nil {
		t.Error("New accepted a short secret")
	}

	// Over HTTP, the event carries the request ID; a refused request is
	// logged too.
	buf.Reset()
	cfg := oauth.Config{Issuer: "http://127.0.0.1", Secret: []byte(testSecret), AdminTokens: []string{testAdminToken}}
	srv, err := oauthtest.NewServer(cfg, oauth.Deps{Store: store, Logger: logger}, oauthtest.Services{})
	if err != nil {
		t.Fatal(err)
	}
	for rid, token := range map[string]string{"rid-ok": testAdminToken, "rid-bad": "wrong-token"} {
		req, _ := http.NewRequest("GET", "/admin/clients/nope", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Request-Id", rid)
		srv.ServeHTTP(httptest.NewRecorder(), req)
	}
	mu.Lock()
	logged := buf.String()
	mu.Unlock()
	for _, want := range []string{`"msg":"admin audit","request_id":"rid-ok","who":"` + caller.String() + `","what":"client.get","client_id":"nope","status":404`,
		`"msg":"admin audit","request_id":"rid-bad","who":"unauthenticated","what":"authenticate","client_id":"nope","status":401`} {
		if !strings.Contains(logged, want) {
			t.Errorf("log lacks %s:\n%s", want, logged)
		}
	}
	if strings.Contains(logged, "wrong-token") || strings.Contains(logged, testAdminToken) {
		t.Errorf("a bearer token is logged:\n%s", logged)
	}
}
