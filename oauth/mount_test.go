package oauth_test

import (
	"encoding/json"
	"fmt"
	"go/build"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestNoAdminImports: the protocol package imports no admin code, directly
// or through another package of the module: the admin API is mounted
// through oauth.AdminAPI, and the services it shares with the server
// (identity, clientadmin's metadata rules) know no HTTP.
func TestNoAdminImports(t *testing.T) {
	const module = "github.com/authd/authd/"
	seen := map[string]bool{}
	var walk func(path, from string)
	walk = func(path, from string) {
		if seen[path] || !strings.HasPrefix(path, module) {
			return
		}
		seen[path] = true
		if path == module+"adminapi" {
			t.Errorf("oauth imports %s (through %s)", path, from)
			return
		}
		pkg, err := build.Import(path, ".", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pkg.Imports {
			walk(imp, path)
		}
	}
	walk(module+"oauth", "")
	if !seen[module+"identity"] {
		t.Fatal("the walk did not reach package identity; the test checks nothing")
	}
}

// adminResult is one answer of the admin API.
type adminResult struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (r adminResult) str(k string) string { s, _ := r.body[k].(string); return s }

func (r adminResult) String() string { return fmt.Sprintf("%d %s", r.status, r.raw) }

// adminReq is an admin request; the zero value of every field but method
// and path is a sensible default (the admin token, JSON, no key).
type adminReq struct {
	method, path string
	body         string
	key          string            // Idempotency-Key; "" for none
	token        *string           // bearer token; nil for the admin token
	header       map[string]string // extra or overriding headers
	chunked      bool              // send the body without Content-Length
}

// adminDo sends req and decodes the answer. It never stops the test, so
// goroutines may call it. Every answer but 204 must be a JSON object.
func (h *harness) adminDo(req adminReq) (adminResult, error) {
	var body io.Reader
	if req.body != "" {
		body = strings.NewReader(req.body)
		if req.chunked {
			body = io.MultiReader(body) // hides the length: chunked encoding
		}
	}
	r, err := http.NewRequest(req.method, h.srv.URL+req.path, body)
	if err != nil {
		return adminResult{}, err
	}
	if req.body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	token := testAdminToken
	if req.token != nil {
		token = *req.token
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if req.key != "" {
		r.Header.Set("Idempotency-Key", req.key)
	}
	for k, v := range req.header {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return adminResult{}, err
	}
	defer resp.Body.Close()
	res := adminResult{status: resp.StatusCode, header: resp.Header, body: map[string]any{}}
	res.raw, err = io.ReadAll(resp.Body)
	if err != nil {
		return res, err
	}
	if resp.StatusCode == http.StatusNoContent {
		if len(res.raw) != 0 {
			return res, fmt.Errorf("%s %s: 204 with a body: %q", req.method, req.path, res.raw)
		}
		return res, nil
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return res, fmt.Errorf("%s %s: Content-Type %q, want application/json: %s", req.method, req.path, ct, res)
	}
	if err := json.Unmarshal(res.raw, &res.body); err != nil {
		return res, fmt.Errorf("%s %s: non-JSON answer %s", req.method, req.path, res)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		return res, fmt.Errorf("%s %s: Cache-Control %q, want no-store", req.method, req.path, cc)
	}
	return res, nil
}

func (h *harness) admin(t testing.TB, req adminReq) adminResult {
	t.Helper()
	res, err := h.adminDo(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// wantStatus fails the test unless res has status (and, for errors, an RFC
// 7591 §3.2.2 body with code).
func wantStatus(t testing.TB, what string, res adminResult, status int, code string) {
	t.Helper()
	if res.status != status {
		t.Fatalf("%s: got %s, want %d", what, res, status)
	}
	if code != "" && (res.str("error") != code || res.str("error_description") == "") {
		t.Fatalf("%s: got %s, want error %q with a description", what, res, code)
	}
}
