package adminapi_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authd/authd/adminapi"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/storage/memory"
)

// userBackends are the backends of the user endpoint tests: PostgreSQL
// (the arbiter in production) and memory (authd dev). The client cache
// plays no part in them.
var userBackends = []string{"postgres", "memory"}

// userJSON is the body of a create request.
func userJSON(username, password string) string {
	return fmt.Sprintf(`{"username":%q,"password":%q,"email":%q,"email_verified":true,"name":"Test User"}`,
		username, password, strings.ToLower(username)+"@example.com")
}

// countUsers returns how many users the store holds named name.
func (h *harness) countUsers(t *testing.T, name string) int {
	t.Helper()
	us, err := h.store.ListUsers(t.Context(), "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, u := range us {
		if u.Username == name {
			n++
		}
	}
	return n
}

// wantActive fails the test unless token's introspection says active.
func (h *harness) wantActive(t *testing.T, what, token string, active bool) {
	t.Helper()
	if got := h.introspect(t, token); got != active {
		t.Errorf("%s: token active = %v, want %v", what, got, active)
	}
}

// signInFails reports whether user/password is refused on the login page
// with the wrong-password message.
func (h *harness) signInFails(t *testing.T, user, password string) bool {
	t.Helper()
	b := newBrowser(t)
	p := h.signInAs(t, b, get(t, b, h.authURL(publicClient, publicRedirect)), user, password)
	return p.status == http.StatusUnauthorized && strings.Contains(p.body, "Wrong username or password.")
}

// TestAdminUserLifecycle: create → get → list pages → rename → set password
// → disable → enable → sessions → sign-out → consents → revoke consent →
// delete, over HTTP, with the effects of each on sign-in, sessions and
// tokens.
func TestAdminUserLifecycle(t *testing.T) {
	for _, backend := range userBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})
			const pw1, pw2 = "first passphrase", "second passphrase"

			// Create: 201, the user with a new opaque sub, never a password.
			res := h.admin(t, adminReq{method: "POST", path: "/admin/users", body: userJSON("Bob", pw1)})
			wantStatus(t, "create", res, http.StatusCreated, "")
			sub := res.str("sub")
			if len(sub) != 32 || res.str("username") != "bob" || res.str("email") != "bob@example.com" ||
				res.body["email_verified"] != true || res.str("name") != "Test User" || res.body["disabled"] != false {
				t.Fatalf("create = %s", res)
			}
			if _, err := hex.DecodeString(sub); err != nil {
				t.Errorf("sub %q is not hex", sub)
			}
			if res.header.Get("Location") != "/admin/users/bob" {
				t.Errorf("Location = %q", res.header.Get("Location"))
			}
			for _, leak := range []string{pw1, "password", "hash", "$2a$"} {
				if bytes.Contains(res.raw, []byte(leak)) {
					t.Errorf("the answer contains %q: %s", leak, res)
				}
			}

			// Get, by any spelling PRECIS maps to the name.
			for _, path := range []string{"/admin/users/bob", "/admin/users/BOB", "/admin/users/%EF%BC%A2ob"} { // fullwidth B
				got := h.admin(t, adminReq{method: "GET", path: path})
				wantStatus(t, "get "+path, got, http.StatusOK, "")
				if fmt.Sprint(got.body) != fmt.Sprint(res.body) {
					t.Errorf("GET %s = %v\nwant %v", path, got.body, res.body)
				}
			}

			// List: page through with limit 2, in username order.
			all := []string{testUser, "bob"}
			for _, name := range []string{"carol", "dave", "erin"} {
				wantStatus(t, "create "+name, h.admin(t, adminReq{method: "POST", path: "/admin/users", body: userJSON(name, pw1)}), http.StatusCreated, "")
				all = append(all, name)
			}
			slices.Sort(all)
			var seen []string
			cursor, pages := "", 0
			for {
				path := "/admin/users?limit=2"
				if cursor != "" {
					path += "&cursor=" + url.QueryEscape(cursor)
				}
				page := h.admin(t, adminReq{method: "GET", path: path})
				wantStatus(t, "list", page, http.StatusOK, "")
				pages++
				items, _ := page.body["users"].([]any)
				if len(items) == 0 || len(items) > 2 {
					t.Fatalf("page %d has %d users: %s", pages, len(items), page)
				}
				for _, it := range items {
					seen = append(seen, it.(map[string]any)["username"].(string))
				}
				if bytes.Contains(page.raw, []byte("password")) {
					t.Errorf("list shows a password: %s", page)
				}
				if cursor = page.str("next_cursor"); cursor == "" {
					break
				}
				if pages > 10 {
					t.Fatal("paging does not end")
				}
			}
			if pages != 3 || !slices.Equal(seen, all) {
				t.Fatalf("%d pages listed %q, want %q over 3 pages", pages, seen, all)
			}

			// Tokens and a session of bob.
			b := newBrowser(t)
			tok := h.tokensFor(t, b, "bob", pw1)

			// Rename and profile (PUT): the sub and the tokens stay.
			res = h.admin(t, adminReq{method: "PUT", path: "/admin/users/bob", body: `{"username":"Robert","email":"r@example.com","name":"Robert"}`})
			wantStatus(t, "rename", res, http.StatusOK, "")
			if res.str("sub") != sub || res.str("username") != "robert" || res.str("email") != "r@example.com" ||
				res.body["email_verified"] != false || res.str("name") != "Robert" {
				t.Fatalf("rename = %s", res)
			}
			wantStatus(t, "old name", h.admin(t, adminReq{method: "GET", path: "/admin/users/bob"}), http.StatusNotFound, "not_found")
			if active, s := h.introspectSub(t, tok.str("access_token")); !active || s != sub {
				t.Fatalf("after rename: active %v, sub %q, want %q", active, s, sub)
			}
			// Profile only: omitted fields are cleared, the name stays.
			res = h.admin(t, adminReq{method: "PUT", path: "/admin/users/robert", body: `{"name":"Rob"}`})
			wantStatus(t, "profile", res, http.StatusOK, "")
			if res.str("username") != "robert" || res.str("email") != "" || res.str("name") != "Rob" {
				t.Fatalf("profile = %s", res)
			}
			wantStatus(t, "rename onto a taken name", h.admin(t, adminReq{method: "PUT", path: "/admin/users/robert", body: `{"username":"Carol"}`}),
				http.StatusConflict, "user_exists")

			// Set password: the old tokens and session end, the old password
			// stops working, the new one works.
			res = h.admin(t, adminReq{method: "POST", path: "/admin/users/robert/password", body: `{"password":"` + pw2 + `"}`})
			wantStatus(t, "set password", res, http.StatusOK, "")
			if res.str("sub") != sub || bytes.Contains(res.raw, []byte(pw2)) {
				t.Fatalf("set password = %s", res)
			}
			h.wantActive(t, "after set-password", tok.str("access_token"), false)
			if p := get(t, b, h.authURL(publicClient, publicRedirect)); !strings.Contains(p.body, `name="password"`) {
				t.Errorf("the session survived set-password: %d", p.status)
			}
			if !h.signInFails(t, "robert", pw1) {
				t.Error("the old password still signs in")
			}
			tok = h.tokensFor(t, newBrowser(t), "robert", pw2)

			// Disable: tokens inactive, refresh refused, no sign-in (the
			// wrong-password message), no session left.
			res = h.admin(t, adminReq{method: "POST", path: "/admin/users/robert/disable"})
			wantStatus(t, "disable", res, http.StatusOK, "")
			if res.body["disabled"] != true || res.str("sub") != sub {
				t.Fatalf("disable = %s", res)
			}
			h.wantActive(t, "access token after disable", tok.str("access_token"), false)
			h.wantActive(t, "refresh token after disable", tok.str("refresh_token"), false)
			if r := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient},
				"refresh_token": {tok.str("refresh_token")}}, "", ""); r.status == http.StatusOK {
				t.Error("refresh works after disable")
			}
			if !h.signInFails(t, "robert", pw2) {
				t.Error("a disabled user signs in")
			}
			sessions := h.admin(t, adminReq{method: "GET", path: "/admin/users/robert/sessions"})
			wantStatus(t, "sessions after disable", sessions, http.StatusOK, "")
			if s, _ := sessions.body["sessions"].([]any); len(s) != 0 {
				t.Errorf("sessions after disable: %s", sessions)
			}

			// Enable: sign-in works again; sessions are listed.
			res = h.admin(t, adminReq{method: "POST", path: "/admin/users/robert/enable", body: `{}`})
			wantStatus(t, "enable", res, http.StatusOK, "")
			if res.body["disabled"] != false {
				t.Fatalf("enable = %s", res)
			}
			b = newBrowser(t)
			tok = h.tokensFor(t, b, "robert", pw2)
			sessions = h.admin(t, adminReq{method: "GET", path: "/admin/users/Robert/sessions"})
			wantStatus(t, "sessions", sessions, http.StatusOK, "")
			list, _ := sessions.body["sessions"].([]any)
			if len(list) != 1 {
				t.Fatalf("sessions = %s, want 1", sessions)
			}
			if s := list[0].(map[string]any); s["sub"] != sub || s["id"] == "" || s["auth_time"] == nil {
				t.Errorf("session = %v", s)
			}

			// Sign out: every session ends, the browser gets the login
			// form; tokens stay.
			res = h.admin(t, adminReq{method: "POST", path: "/admin/users/robert/sign-out"})
			wantStatus(t, "sign-out", res, http.StatusOK, "")
			if res.body["sessions_ended"] != float64(1) || res.str("sub") != sub {
				t.Fatalf("sign-out = %s", res)
			}
			if p := get(t, b, h.authURL(publicClient, publicRedirect)); !strings.Contains(p.body, `name="password"`) {
				t.Errorf("the session survived sign-out: %d", p.status)
			}
			h.wantActive(t, "token after sign-out", tok.str("access_token"), true)

			// Consents: grant one to the confidential client, list it,
			// revoke it (its tokens die), then 404.
			b = newBrowser(t)
			p := h.signInAs(t, b, get(t, b, h.authURL(confClient, confRedirect, "openid", "offline_access")), "robert", pw2)
			if p = submit(t, b, h.srv.URL, p, url.Values{"step": {"consent"}, "decision": {"allow"}}); p.loc == nil {
				t.Fatalf("consent: %d %s", p.status, p.body)
			}
			conf := h.confTokens(t, b)
			consents := h.admin(t, adminReq{method: "GET", path: "/admin/users/robert/consents"})
			wantStatus(t, "consents", consents, http.StatusOK, "")
			cl, _ := consents.body["consents"].([]any)
			if len(cl) != 1 || cl[0].(map[string]any)["client_id"] != confClient {
				t.Fatalf("consents = %s", consents)
			}
			wantStatus(t, "revoke consent", h.admin(t, adminReq{method: "DELETE", path: "/admin/users/robert/consents/" + confClient}), http.StatusNoContent, "")
			h.wantActive(t, "token under the withdrawn consent", conf.str("access_token"), false)
			h.wantActive(t, "token of another client", tok.str("access_token"), true)
			consents = h.admin(t, adminReq{method: "GET", path: "/admin/users/robert/consents"})
			if cl, _ := consents.body["consents"].([]any); consents.status != http.StatusOK || len(cl) != 0 {
				t.Errorf("consents after revoke = %s", consents)
			}
			wantStatus(t, "revoke again", h.admin(t, adminReq{method: "DELETE", path: "/admin/users/robert/consents/" + confClient}), http.StatusNotFound, "not_found")

			// Delete: 204, tokens inactive, then 404 everywhere; the name
			// is free and a new user under it gets a new sub.
			wantStatus(t, "delete", h.admin(t, adminReq{method: "DELETE", path: "/admin/users/robert"}), http.StatusNoContent, "")
			h.wantActive(t, "token after delete", tok.str("access_token"), false)
			for _, req := range []adminReq{
				{method: "GET", path: "/admin/users/robert"},
				{method: "DELETE", path: "/admin/users/robert"},
				{method: "GET", path: "/admin/users/robert/sessions"},
				{method: "POST", path: "/admin/users/robert/disable"},
			} {
				wantStatus(t, req.method+" "+req.path+" after delete", h.admin(t, req), http.StatusNotFound, "not_found")
			}
			again := h.admin(t, adminReq{method: "POST", path: "/admin/users", body: userJSON("robert", pw1)})
			wantStatus(t, "re-create", again, http.StatusCreated, "")
			if again.str("sub") == sub {
				t.Error("a re-created username got the old sub")
			}
		})
	}
}

// TestAdminUserIdempotentCreate: one POST /admin/users with one
// Idempotency-Key, sent twice in sequence and then 16 times concurrently,
// creates one user; every answer is the stored 201 byte for byte (marked
// Idempotent-Replayed), or a 409 for requests overlapping the first, which
// get the stored answer on retry.
func TestAdminUserIdempotentCreate(t *testing.T) {
	for _, backend := range userBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})

			t.Run("sequential", func(t *testing.T) {
				key := newKey()
				body := userJSON("Sequential", "a good passphrase")
				first := h.admin(t, adminReq{method: "POST", path: "/admin/users", body: body, key: key})
				wantStatus(t, "first", first, http.StatusCreated, "")
				if first.header.Get("Idempotent-Replayed") != "" {
					t.Error("first answer marked as replayed")
				}
				// The same request in another member order and spacing, and
				// with the username in another case: the same meaning.
				var v map[string]any
				_ = json.Unmarshal([]byte(body), &v)
				reordered, _ := json.MarshalIndent(v, "", "  ")
				cased := strings.Replace(body, "Sequential", "SEQUENTIAL", 1)
				for i, b := range []string{body, string(reordered), cased} {
					again := h.admin(t, adminReq{method: "POST", path: "/admin/users", body: b, key: key})
					if again.status != http.StatusCreated || !bytes.Equal(again.raw, first.raw) {
						t.Fatalf("retry %d = %s\nwant %s", i, again, first)
					}
					if again.header.Get("Idempotent-Replayed") != "true" || again.header.Get("Location") != first.header.Get("Location") {
						t.Errorf("retry %d headers %v", i, again.header)
					}
				}
				if n := h.countUsers(t, "sequential"); n != 1 {
					t.Fatalf("%d users created, want 1", n)
				}
				// Without the key, the same POST is a second create: 409.
				wantStatus(t, "no key", h.admin(t, adminReq{method: "POST", path: "/admin/users", body: body}), http.StatusConflict, "user_exists")
			})

			t.Run("concurrent", func(t *testing.T) {
				const n = 16
				req := adminReq{method: "POST", path: "/admin/users", body: userJSON("Concurrent", "a good passphrase"), key: newKey()}
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
				for range conflicts {
					if r := h.admin(t, req); r.status != http.StatusCreated || !bytes.Equal(r.raw, created) {
						t.Fatalf("retry after 409 = %s\nwant %s", r, created)
					}
				}
				if got := h.countUsers(t, "concurrent"); got != 1 {
					t.Fatalf("%d users created, want 1", got)
				}
				t.Logf("%d of %d concurrent requests got 409", conflicts, n)
			})
		})
	}
}

// TestAdminUserIdempotencyKeyRules: the same key with another body is 422;
// a failed request (before or inside the transaction) leaves no key, so
// the fixed body may reuse it; keys are scoped to the admin credential and
// the endpoint (and user); every write replays its first answer, and a
// replayed password change or delete does nothing again.
func TestAdminUserIdempotencyKeyRules(t *testing.T) {
	for _, backend := range userBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			second := "second-admin-token"
			h := newHarness(t, harnessOpts{backend: backend, cfg: func(c *oauth.Config) {
				c.AdminTokens = append(c.AdminTokens, second)
			}})
			post := func(key, body string, token *string) adminResult {
				t.Helper()
				return h.admin(t, adminReq{method: "POST", path: "/admin/users", body: body, key: key, token: token})
			}

			// Same key, another body: 422, nothing created, the original
			// still replays.
			key := newKey()
			first := post(key, userJSON("keyed", "a good passphrase"), nil)
			wantStatus(t, "first", first, http.StatusCreated, "")
			wantStatus(t, "other body", post(key, userJSON("another", "a good passphrase"), nil), http.StatusUnprocessableEntity, "idempotency_key_reused")
			wantStatus(t, "other password", post(key, userJSON("keyed", "another passphrase"), nil), http.StatusUnprocessableEntity, "idempotency_key_reused")
			if n := h.countUsers(t, "another"); n != 0 {
				t.Fatalf("a 422 created %d users", n)
			}
			if r := post(key, userJSON("keyed", "a good passphrase"), nil); !bytes.Equal(r.raw, first.raw) {
				t.Fatalf("replay after 422 = %s", r)
			}

			// Failed requests leave no key: a body refused before the
			// transaction, a password refused inside it, a username taken
			// inside it; then the fixed body with the same key creates.
			key = newKey()
			wantStatus(t, "bad JSON", post(key, `{"username":`, nil), http.StatusBadRequest, "invalid_request")
			wantStatus(t, "short password", post(key, userJSON("fixed", "short"), nil), http.StatusBadRequest, "invalid_password")
			wantStatus(t, "name taken", post(key, userJSON(testUser, "a good passphrase"), nil), http.StatusConflict, "user_exists")
			fixed := post(key, userJSON("fixed", "a good passphrase"), nil)
			wantStatus(t, "fixed body, same key", fixed, http.StatusCreated, "")
			if r := post(key, userJSON("fixed", "a good passphrase"), nil); !bytes.Equal(r.raw, fixed.raw) || r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("replay of the fixed request = %s", r)
			}

			// Another admin credential has its own key space: its request is
			// run, not replayed (and the name is taken).
			wantStatus(t, "other credential", post(key, userJSON("fixed", "a good passphrase"), &second), http.StatusConflict, "user_exists")

			// Every write replays its first answer byte for byte, and the
			// same key on another endpoint or another user is independent.
			writes := []adminReq{
				{method: "PUT", path: "/admin/users/fixed", body: `{"email":"f@example.com","name":"Fixed"}`},
				{method: "POST", path: "/admin/users/fixed/password", body: `{"password":"the next passphrase"}`},
				{method: "POST", path: "/admin/users/fixed/disable"},
				{method: "POST", path: "/admin/users/fixed/enable"},
				{method: "POST", path: "/admin/users/fixed/sign-out"},
				{method: "POST", path: "/admin/users/keyed/disable"},
			}
			for _, w := range writes {
				w.key = key
				r1 := h.admin(t, w)
				wantStatus(t, w.method+" "+w.path, r1, http.StatusOK, "")
				if r1.header.Get("Idempotent-Replayed") != "" {
					t.Errorf("%s %s: a key of another endpoint replayed: %s", w.method, w.path, r1)
				}
				r2 := h.admin(t, w)
				if r2.status != r1.status || !bytes.Equal(r2.raw, r1.raw) || r2.header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("%s %s: retry = %s\nwant %s", w.method, w.path, r2, r1)
				}
			}
			// The replayed password change changed nothing: tokens issued
			// after the first one are still active after the retry.
			pw := adminReq{method: "POST", path: "/admin/users/fixed/password", body: `{"password":"a fourth passphrase"}`, key: newKey()}
			wantStatus(t, "password", h.admin(t, pw), http.StatusOK, "")
			tok := h.tokensFor(t, newBrowser(t), "fixed", "a fourth passphrase")
			if r := h.admin(t, pw); r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("password retry = %s", r)
			}
			h.wantActive(t, "token after a replayed password change", tok.str("access_token"), true)
			pw.body = `{"password":"a fifth passphrase"}`
			wantStatus(t, "password, other body", h.admin(t, pw), http.StatusUnprocessableEntity, "idempotency_key_reused")

			// PUT: another body under the key is 422.
			wantStatus(t, "PUT other body", h.admin(t, adminReq{method: "PUT", path: "/admin/users/fixed", key: key, body: `{"name":"Other"}`}),
				http.StatusUnprocessableEntity, "idempotency_key_reused")

			// DELETE with a key: the retry gets the stored 204, not 404.
			del := adminReq{method: "DELETE", path: "/admin/users/fixed", key: key}
			wantStatus(t, "delete", h.admin(t, del), http.StatusNoContent, "")
			if r := h.admin(t, del); r.status != http.StatusNoContent || r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("delete retry = %s %v", r, r.header)
			}
			wantStatus(t, "delete without the key", h.admin(t, adminReq{method: "DELETE", path: "/admin/users/fixed"}), http.StatusNotFound, "not_found")
			// A failed keyed write (unknown user) left no key: the name,
			// re-created, can be deleted with it.
			k404 := newKey()
			wantStatus(t, "delete unknown", h.admin(t, adminReq{method: "DELETE", path: "/admin/users/ghost", key: k404}), http.StatusNotFound, "not_found")
			wantStatus(t, "create ghost", post("", userJSON("ghost", "a good passphrase"), nil), http.StatusCreated, "")
			wantStatus(t, "delete ghost", h.admin(t, adminReq{method: "DELETE", path: "/admin/users/ghost", key: k404}), http.StatusNoContent, "")
		})
	}
}

// TestAdminUserKeyInFlight: while a keyed create is in its transaction
// (held on the username's unique index by another transaction), a retry
// with the same key is 409 idempotency_key_in_flight, whatever its body;
// once the first commits, the retry gets its 201 byte for byte.
func TestAdminUserKeyInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "postgres"})
	ctx := t.Context()
	blocker, err := h.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(context.WithoutCancel(ctx)) }()
	var blockerPID int
	if err := blocker.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&blockerPID); err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(ctx, `INSERT INTO users (subject, username, password_hash, created_at)
		VALUES ('00000000000000000000000000000000', 'inflight', '\x00', now())`); err != nil {
		t.Fatal(err)
	}

	req := adminReq{method: "POST", path: "/admin/users", body: userJSON("inflight", "a good passphrase"), key: newKey()}
	done := make(chan adminResult, 1)
	go func() {
		r, err := h.adminDo(req)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	// Wait until the request is blocked behind the blocker.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := h.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid)))`,
			blockerPID).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the keyed create never waited on the blocker")
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantStatus(t, "retry in flight", h.admin(t, req), http.StatusConflict, "idempotency_key_in_flight")
	other := req
	other.body = userJSON("inflight2", "a good passphrase")
	wantStatus(t, "other body in flight", h.admin(t, other), http.StatusConflict, "idempotency_key_in_flight")

	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	first := <-done
	wantStatus(t, "first", first, http.StatusCreated, "")
	if r := h.admin(t, req); r.status != http.StatusCreated || !bytes.Equal(r.raw, first.raw) || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry after commit = %s\nwant %s", r, first)
	}
}

// TestAdminUserIdempotencyDump: a dump of idempotency_keys after user
// writes holds no password, raw key, username, profile field or sub.
func TestAdminUserIdempotencyDump(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "postgres"})
	key := "dump-" + oauth.NewClientID()
	const pw, pw2 = "dump passphrase one", "dump passphrase two"
	res := h.admin(t, adminReq{method: "POST", path: "/admin/users", key: key,
		body: `{"username":"dumpling","password":"` + pw + `","email":"dumpling@example.org","name":"Dumpling Person"}`})
	wantStatus(t, "create", res, http.StatusCreated, "")
	wantStatus(t, "password", h.admin(t, adminReq{method: "POST", path: "/admin/users/dumpling/password", key: key, body: `{"password":"` + pw2 + `"}`}), http.StatusOK, "")
	wantStatus(t, "disable", h.admin(t, adminReq{method: "POST", path: "/admin/users/dumpling/disable", key: key}), http.StatusOK, "")

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
	if n != 3 {
		t.Fatalf("dump has %d rows, want 3:\n%s", n, dump.String())
	}
	d := strings.ToLower(dump.String())
	for name, v := range map[string]string{"password": pw, "new password": pw2, "Idempotency-Key": key, "username": "dumpling",
		"email": "dumpling@example.org", "name": "Dumpling Person", "sub": res.str("sub"), "admin token": testAdminToken} {
		for _, enc := range []string{v, hex.EncodeToString([]byte(v))} {
			if strings.Contains(d, strings.ToLower(enc)) {
				t.Errorf("the dump contains the %s (%q):\n%s", name, enc, dump.String())
			}
		}
	}
}

// TestAdminUserMalformedRequests: every kind of bad request to the user
// endpoints gets its status and an error object, never a 500; the admin
// token is required (401 with a Bearer challenge, RFC 6750 §3); nothing
// is created or changed.
func TestAdminUserMalformedRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "postgres"})
	wrong, none := "wrong-token", ""
	valid := userJSON("valid", "a good passphrase")
	huge := `{"username":"x","password":"` + strings.Repeat("a", 40<<10) + `"}`
	type tc struct {
		name       string
		req        adminReq
		wantStatus int
		wantError  string
	}
	tests := []tc{
		{"bad JSON", adminReq{method: "POST", path: "/admin/users", body: `{"username": "x",`}, 400, "invalid_request"},
		{"not an object", adminReq{method: "POST", path: "/admin/users", body: `["x"]`}, 400, "invalid_request"},
		{"null", adminReq{method: "POST", path: "/admin/users", body: `null`}, 400, "invalid_request"},
		{"trailing data", adminReq{method: "POST", path: "/admin/users", body: valid + `{}`}, 400, "invalid_request"},
		{"unknown member", adminReq{method: "POST", path: "/admin/users", body: `{"username":"x","password":"a good passphrase","admin":true}`}, 400, "invalid_request"},
		{"sub in body", adminReq{method: "POST", path: "/admin/users", body: `{"username":"x","password":"a good passphrase","sub":"abc"}`}, 400, "invalid_request"},
		{"password hash in body", adminReq{method: "POST", path: "/admin/users", body: `{"username":"x","password_hash":"$2a$10$x"}`}, 400, "invalid_request"},
		{"wrong type", adminReq{method: "POST", path: "/admin/users", body: `{"username":["x"],"password":"a good passphrase"}`}, 400, "invalid_request"},
		{"email_verified as string", adminReq{method: "POST", path: "/admin/users", body: `{"username":"x","password":"a good passphrase","email_verified":"yes"}`}, 400, "invalid_request"},
		{"empty body", adminReq{method: "POST", path: "/admin/users", header: map[string]string{"Content-Type": "application/json"}}, 400, "invalid_request"},
		{"text/plain", adminReq{method: "POST", path: "/admin/users", body: valid, header: map[string]string{"Content-Type": "text/plain"}}, 415, "invalid_request"},
		{"form", adminReq{method: "POST", path: "/admin/users", body: "username=x", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415, "invalid_request"},
		{"no content type", adminReq{method: "POST", path: "/admin/users", body: valid, header: map[string]string{"Content-Type": ""}}, 415, "invalid_request"},
		{"latin1", adminReq{method: "PUT", path: "/admin/users/" + testUser, body: `{"name":"x"}`, header: map[string]string{"Content-Type": "application/json; charset=iso-8859-1"}}, 415, "invalid_request"},
		{"huge body", adminReq{method: "POST", path: "/admin/users", body: huge}, 413, "invalid_request"},
		{"huge chunked body", adminReq{method: "POST", path: "/admin/users/" + testUser + "/password", chunked: true, body: huge}, 413, "invalid_request"},
		{"huge disable body", adminReq{method: "POST", path: "/admin/users/" + testUser + "/disable", chunked: true, body: strings.Repeat(" ", 40<<10)}, 413, "invalid_request"},
		{"disable with parameters", adminReq{method: "POST", path: "/admin/users/" + testUser + "/disable", body: `{"reason":"x"}`}, 400, "invalid_request"},
		{"delete with parameters", adminReq{method: "DELETE", path: "/admin/users/" + testUser, body: `{"force":true}`}, 400, "invalid_request"},
		{"no username", adminReq{method: "POST", path: "/admin/users", body: `{"password":"a good passphrase"}`}, 400, "invalid_username"},
		{"username with a space", adminReq{method: "POST", path: "/admin/users", body: `{"username":"a b","password":"a good passphrase"}`}, 400, "invalid_username"},
		{"zero-width username", adminReq{method: "POST", path: "/admin/users", body: `{"username":"al\u200dice","password":"a good passphrase"}`}, 400, "invalid_username"},
		{"long username", adminReq{method: "POST", path: "/admin/users", body: `{"username":"` + strings.Repeat("u", 200) + `","password":"a good passphrase"}`}, 400, "invalid_username"},
		{"no password", adminReq{method: "POST", path: "/admin/users", body: `{"username":"x"}`}, 400, "invalid_password"},
		{"short password", adminReq{method: "POST", path: "/admin/users", body: `{"username":"x","password":"short"}`}, 400, "invalid_password"},
		{"long password", adminReq{method: "POST", path: "/admin/users", body: `{"username":"x","password":"` + strings.Repeat("p", 257) + `"}`}, 400, "invalid_password"},
		{"control character in password", adminReq{method: "POST", path: "/admin/users", body: `{"username":"x","password":"a good\u0007passphrase"}`}, 400, "invalid_password"},
		{"bad email", adminReq{method: "POST", path: "/admin/users", body: `{"username":"x","password":"a good passphrase","email":"not an address"}`}, 400, "invalid_profile"},
		{"control character in name", adminReq{method: "PUT", path: "/admin/users/" + testUser, body: `{"name":"a\u0000b"}`}, 400, "invalid_profile"},
		{"taken username", adminReq{method: "POST", path: "/admin/users", body: userJSON("ALICE", "a good passphrase")}, 409, "user_exists"},
		{"invalid rename", adminReq{method: "PUT", path: "/admin/users/" + testUser, body: `{"username":"a b"}`}, 400, "invalid_username"},
		{"password in PUT", adminReq{method: "PUT", path: "/admin/users/" + testUser, body: `{"password":"a good passphrase"}`}, 400, "invalid_request"},
		{"disabled in PUT", adminReq{method: "PUT", path: "/admin/users/" + testUser, body: `{"disabled":true}`}, 400, "invalid_request"},
		{"password body not an object", adminReq{method: "POST", path: "/admin/users/" + testUser + "/password", body: `"a good passphrase"`}, 400, "invalid_request"},
		{"password too short", adminReq{method: "POST", path: "/admin/users/" + testUser + "/password", body: `{"password":"short"}`}, 400, "invalid_password"},
		{"password without body", adminReq{method: "POST", path: "/admin/users/" + testUser + "/password", header: map[string]string{"Content-Type": "application/json"}}, 400, "invalid_request"},
		{"empty Idempotency-Key", adminReq{method: "POST", path: "/admin/users", body: valid, header: map[string]string{"Idempotency-Key": " "}}, 400, "invalid_request"},
		{"long Idempotency-Key", adminReq{method: "POST", path: "/admin/users", body: valid, key: strings.Repeat("k", 256)}, 400, "invalid_request"},
		{"Idempotency-Key with spaces", adminReq{method: "POST", path: "/admin/users/" + testUser + "/disable", key: "a b"}, 400, "invalid_request"},
		{"limit zero", adminReq{method: "GET", path: "/admin/users?limit=0"}, 400, "invalid_request"},
		{"limit too big", adminReq{method: "GET", path: "/admin/users?limit=1000"}, 400, "invalid_request"},
		{"limit not a number", adminReq{method: "GET", path: "/admin/users?limit=ten"}, 400, "invalid_request"},
		{"bad query", adminReq{method: "GET", path: "/admin/users?cursor=%zz"}, 400, "invalid_request"},
		{"bad cursor", adminReq{method: "GET", path: "/admin/users?cursor=%%%"}, 400, "invalid_request"},
		{"forged cursor", adminReq{method: "GET", path: "/admin/users?cursor=YWJj"}, 400, "invalid_request"},
		{"invalid username in path", adminReq{method: "GET", path: "/admin/users/al%E2%80%8Dice"}, 400, "invalid_username"},
		{"space in path", adminReq{method: "POST", path: "/admin/users/a%20b/disable"}, 400, "invalid_username"},
		{"unknown endpoint", adminReq{method: "GET", path: "/admin/users/" + testUser + "/tokens"}, 404, "not_found"},
		{"method not allowed", adminReq{method: "PATCH", path: "/admin/users/" + testUser, body: `{"name":"x"}`}, 405, "invalid_request"},
		{"revoke consent of no client", adminReq{method: "DELETE", path: "/admin/users/" + testUser + "/consents/nope"}, 404, "not_found"},
	}
	// Unknown users, and the admin token, on every endpoint.
	for _, ep := range []struct{ method, path, body string }{
		{"GET", "/admin/users/%s", ""},
		{"PUT", "/admin/users/%s", `{"name":"x"}`},
		{"DELETE", "/admin/users/%s", ""},
		{"POST", "/admin/users/%s/password", `{"password":"a good passphrase"}`},
		{"POST", "/admin/users/%s/disable", ""},
		{"POST", "/admin/users/%s/enable", ""},
		{"GET", "/admin/users/%s/sessions", ""},
		{"POST", "/admin/users/%s/sign-out", ""},
		{"GET", "/admin/users/%s/consents", ""},
		{"DELETE", "/admin/users/%s/consents/" + confClient, ""},
	} {
		name := ep.method + " " + ep.path
		tests = append(tests,
			tc{"unknown user: " + name, adminReq{method: ep.method, path: fmt.Sprintf(ep.path, "nobody"), body: ep.body}, 404, "not_found"},
			tc{"no token: " + name, adminReq{method: ep.method, path: fmt.Sprintf(ep.path, testUser), body: ep.body, token: &none}, 401, "invalid_token"},
			tc{"wrong token: " + name, adminReq{method: ep.method, path: fmt.Sprintf(ep.path, testUser), body: ep.body, token: &wrong}, 401, "invalid_token"})
	}
	tests = append(tests,
		tc{"no token: list", adminReq{method: "GET", path: "/admin/users", token: &none}, 401, "invalid_token"},
		tc{"no token: create", adminReq{method: "POST", path: "/admin/users", body: valid, token: &none}, 401, "invalid_token"},
		tc{"basic auth", adminReq{method: "GET", path: "/admin/users", header: map[string]string{"Authorization": "Basic YWRtaW46YWRtaW4="}}, 401, "invalid_token"},
		tc{"token prefix", adminReq{method: "POST", path: "/admin/users", body: valid, token: ptr(testAdminToken[:5])}, 401, "invalid_token"},
		tc{"no token: unknown endpoint", adminReq{method: "GET", path: "/admin/users/x/y/z", token: &none}, 401, "invalid_token"},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := h.admin(t, tt.req)
			wantStatus(t, tt.name, res, tt.wantStatus, tt.wantError)
			if tt.wantStatus == 401 && !strings.HasPrefix(res.header.Get("WWW-Authenticate"), `Bearer realm="authd-admin"`) {
				t.Errorf("401 without a Bearer challenge (RFC 6750 §3): %v", res.header)
			}
			if tt.wantStatus == 405 && res.header.Get("Allow") != "GET, PUT, DELETE" {
				t.Errorf("405 Allow = %q (RFC 9110 §15.5.6)", res.header.Get("Allow"))
			}
		})
	}
	// Nothing above created, changed or disabled a user.
	us, err := h.store.ListUsers(t.Context(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 1 || us[0].Username != testUser || us[0].Disabled || us[0].Name != "" {
		t.Errorf("users after malformed requests: %+v, want the seeded one unchanged", us)
	}
	if !h.signInFails(t, testUser, "not the password") || h.signInFails(t, testUser, testPassword) {
		t.Error("the seeded user's password changed")
	}
}

// TestAdminUserAuditLog: every user operation is one audit event naming
// who, what and the user (username and sub), and no event carries a
// password, a token or an Idempotency-Key.
func TestAdminUserAuditLog(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	store := memory.New()
	a, err := adminapi.New(adminapi.Config{Secret: []byte(testSecret), AdminTokens: []string{testAdminToken}, Store: store,
		People: identity.New(store, identity.Options{Passwords: testPasswords, Logger: logger}), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	caller, _ := a.AuthenticateToken(testAdminToken)
	ctx := context.Background()
	key := newKey()
	const pw, pw2 = "audited passphrase", "another audited passphrase"
	created := a.CreateUser(ctx, caller, key, []byte(userJSON("Audited", pw)))
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	var u struct{ Sub string }
	_ = json.Unmarshal(created.Body, &u)
	replay := a.CreateUser(ctx, caller, key, []byte(userJSON("Audited", pw)))
	if !replay.Replayed || !bytes.Equal(replay.Body, created.Body) {
		t.Fatalf("replay: %+v", replay)
	}
	a.SetUserPassword(ctx, caller, "audited", "", []byte(`{"password":"`+pw2+`"}`))
	a.SetUserPassword(ctx, caller, "audited", "", []byte(`{"password":"short"}`))
	a.DisableUser(ctx, caller, "audited", "")
	a.GetUser(ctx, caller, "nobody")
	a.DeleteUser(ctx, a.LocalCaller("cli"), "audited", "")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []struct {
		what   string
		status float64
	}{{"user.create", 201}, {"user.create", 201}, {"user.set_password", 200}, {"user.set_password", 400},
		{"user.disable", 200}, {"user.get", 404}, {"user.delete", 204}}
	if len(lines) != len(want) {
		t.Fatalf("%d log lines, want %d audit events:\n%s", len(lines), len(want), buf.String())
	}
	for i, line := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if ev["msg"] != "admin audit" || ev["what"] != want[i].what || ev["status"] != want[i].status {
			t.Errorf("event %d = %v, want %s %v", i, ev, want[i].what, want[i].status)
		}
		who := ev["who"]
		if (i < 6 && who != caller.String()) || (i == 6 && who != "local:cli") {
			t.Errorf("event %d who = %v", i, who)
		}
		if i != 3 && i != 5 && (ev["sub"] != u.Sub || ev["username"] != "audited") {
			t.Errorf("event %d does not name the user: %v", i, ev)
		}
	}
	if !strings.Contains(lines[1], `"replayed":true`) || !strings.Contains(lines[3], `"error":"invalid_password"`) {
		t.Errorf("events do not tell the replay or the failure apart:\n%s", buf.String())
	}
	for name, secret := range map[string]string{"password": pw, "new password": pw2, "Idempotency-Key": key, "admin token": testAdminToken} {
		if strings.Contains(buf.String(), secret) {
			t.Errorf("the audit log contains the %s", name)
		}
	}
}
