package oauth_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestMalformedRequests sends malformed requests to every endpoint and
// asserts the exact status and RFC 6749 §5.2 error code of each. None may
// be a 500.
func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory"})
	code, verifier := h.code(t, publicClient)
	confCode, confVerifier := h.code(t, confClient)
	good := func(extra ...string) string {
		v := url.Values{"grant_type": {"authorization_code"}, "client_id": {publicClient}, "code": {code},
			"code_verifier": {verifier}, "redirect_uri": {publicRedirect}}
		for i := 0; i+1 < len(extra); i += 2 {
			if extra[i+1] == "" {
				v.Del(extra[i])
			} else {
				v.Set(extra[i], extra[i+1])
			}
		}
		return v.Encode()
	}
	basic := func(id, secret string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
	}
	const form = "application/x-www-form-urlencoded"
	tests := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		auth        string
		wantStatus  int
		wantError   string
	}{
		// Token endpoint: method, content type, encoding, size.
		{"token GET", "GET", "/oauth2/token", "", "", "", 405, "invalid_request"},
		{"token PUT", "PUT", "/oauth2/token", form, good(), "", 405, "invalid_request"},
		{"token JSON body", "POST", "/oauth2/token", "application/json", `{"grant_type":"authorization_code"}`, "", 400, "invalid_request"},
		{"token no content type", "POST", "/oauth2/token", "", good(), "", 400, "invalid_request"},
		{"token text/plain", "POST", "/oauth2/token", "text/plain", good(), "", 400, "invalid_request"},
		{"token multipart", "POST", "/oauth2/token", "multipart/form-data; boundary=x", "--x--", "", 400, "invalid_request"},
		{"token bad percent-encoding", "POST", "/oauth2/token", form, "grant_type=%zz", "", 400, "invalid_request"},
		{"token oversized body", "POST", "/oauth2/token", form, good() + "&pad=" + strings.Repeat("a", 70<<10), "", 413, "invalid_request"},
		{"token empty body", "POST", "/oauth2/token", form, "", "", 401, "invalid_client"},
		// Parameters.
		{"duplicate grant_type", "POST", "/oauth2/token", form, good() + "&grant_type=authorization_code", "", 400, "invalid_request"},
		{"duplicate code", "POST", "/oauth2/token", form, good() + "&code=x", "", 400, "invalid_request"},
		{"parameter in query and body", "POST", "/oauth2/token?code=x", form, good(), "", 400, "invalid_request"},
		{"missing grant_type", "POST", "/oauth2/token", form, good("grant_type", ""), "", 400, "invalid_request"},
		{"unknown grant_type", "POST", "/oauth2/token", form, good("grant_type", "password"), "", 400, "unsupported_grant_type"},
		{"implicit grant_type", "POST", "/oauth2/token", form, good("grant_type", "implicit"), "", 400, "unsupported_grant_type"},
		{"missing code", "POST", "/oauth2/token", form, good("code", ""), "", 400, "invalid_request"},
		{"garbage code", "POST", "/oauth2/token", form, good("code", "garbage"), "", 400, "invalid_grant"},
		{"non-UTF-8 code", "POST", "/oauth2/token", form, good("code", "\xff\xfe"), "", 400, "invalid_grant"},
		{"redirect_uri mismatch", "POST", "/oauth2/token", form, good("redirect_uri", "com.example.app:/other"), "", 400, "invalid_grant"},
		{"missing code_verifier", "POST", "/oauth2/token", form, good("code_verifier", ""), "", 400, "invalid_request"},
		{"short code_verifier", "POST", "/oauth2/token", form, good("code_verifier", "abc"), "", 400, "invalid_grant"},
		{"code_verifier bad chars", "POST", "/oauth2/token", form, good("code_verifier", strings.Repeat("é", 43)), "", 400, "invalid_grant"},
		{"missing refresh_token", "POST", "/oauth2/token", form, "grant_type=refresh_token&client_id=" + publicClient, "", 400, "invalid_request"},
		{"garbage refresh_token", "POST", "/oauth2/token", form, "grant_type=refresh_token&client_id=" + publicClient + "&refresh_token=x", "", 400, "invalid_grant"},
		// Client authentication.
		{"unknown client", "POST", "/oauth2/token", form, good("client_id", "nobody"), "", 401, "invalid_client"},
		{"missing client_id", "POST", "/oauth2/token", form, good("client_id", ""), "", 401, "invalid_client"},
		{"public client sends secret in body", "POST", "/oauth2/token", form, good("client_secret", "s3cret"), "", 401, "invalid_client"},
		{"public client sends secret in Basic", "POST", "/oauth2/token", form, good("client_id", ""), basic(publicClient, "s3cret"), 401, "invalid_client"},
		{"confidential wrong secret Basic", "POST", "/oauth2/token", form, good("client_id", "", "code", confCode, "code_verifier", confVerifier, "redirect_uri", confRedirect), basic(confClient, "wrong"), 401, "invalid_client"},
		{"confidential wrong secret body", "POST", "/oauth2/token", form, good("client_id", confClient, "client_secret", "wrong", "code", confCode, "code_verifier", confVerifier, "redirect_uri", confRedirect), "", 401, "invalid_client"},
		{"confidential no secret", "POST", "/oauth2/token", form, good("client_id", confClient, "code", confCode, "code_verifier", confVerifier, "redirect_uri", confRedirect), "", 401, "invalid_client"},
		{"Basic and body secret", "POST", "/oauth2/token", form, good("client_id", "", "client_secret", confSecret), basic(confClient, confSecret), 400, "invalid_request"},
		{"Basic and other body client_id", "POST", "/oauth2/token", form, good(), basic(confClient, confSecret), 400, "invalid_request"},
		{"Basic bad base64", "POST", "/oauth2/token", form, good("client_id", ""), "Basic !!!notbase64", 401, "invalid_client"},
		{"Basic bad url-encoding", "POST", "/oauth2/token", form, good("client_id", ""), "Basic " + base64.StdEncoding.EncodeToString([]byte("%zz:%zz")), 401, "invalid_client"},
		{"code of another client", "POST", "/oauth2/token", form, good("client_id", "", "code", code), basic(confClient, confSecret), 400, "invalid_grant"},
		// Revocation (RFC 7009).
		{"revoke GET", "GET", "/oauth2/revoke", "", "", "", 405, "invalid_request"},
		{"revoke JSON", "POST", "/oauth2/revoke", "application/json", `{"token":"x"}`, "", 400, "invalid_request"},
		{"revoke duplicate token", "POST", "/oauth2/revoke", form, "token=a&token=b&client_id=" + publicClient, "", 400, "invalid_request"},
		{"revoke missing token", "POST", "/oauth2/revoke", form, "client_id=" + publicClient, "", 400, "invalid_request"},
		{"revoke unknown client", "POST", "/oauth2/revoke", form, "token=x&client_id=nobody", "", 401, "invalid_client"},
		{"revoke unknown token", "POST", "/oauth2/revoke", form, "token=x&client_id=" + publicClient, "", 200, ""},
		{"revoke unauthenticated", "POST", "/oauth2/revoke", form, "token=x", "", 401, "invalid_client"},
		{"revoke with admin token only", "POST", "/oauth2/revoke", form, "token=x", "Bearer " + testAdminToken, 401, "invalid_client"},
		{"revoke oversized", "POST", "/oauth2/revoke", form, "token=" + strings.Repeat("a", 70<<10), "", 413, "invalid_request"},
		// Introspection (RFC 7662).
		{"introspect GET", "GET", "/oauth2/introspect", "", "", "", 405, "invalid_request"},
		{"introspect JSON", "POST", "/oauth2/introspect", "application/json", `{"token":"x"}`, "Bearer " + testAdminToken, 400, "invalid_request"},
		{"introspect unauthenticated", "POST", "/oauth2/introspect", form, "token=x", "", 401, "invalid_client"},
		{"introspect wrong admin token", "POST", "/oauth2/introspect", form, "token=x", "Bearer nope", 401, "invalid_client"},
		{"introspect by public client", "POST", "/oauth2/introspect", form, "token=x&client_id=" + publicClient, "", 401, "invalid_client"},
		{"introspect missing token", "POST", "/oauth2/introspect", form, "", "Bearer " + testAdminToken, 400, "invalid_request"},
		{"introspect duplicate token", "POST", "/oauth2/introspect", form, "token=a&token=b", "Bearer " + testAdminToken, 400, "invalid_request"},
		{"introspect unknown token", "POST", "/oauth2/introspect", form, "token=x", "Bearer " + testAdminToken, 200, ""},
		// Unknown routes.
		{"unknown path", "GET", "/oauth2/nope", "", "", "", 404, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, h.srv.URL+tt.path, strings.NewReader(tt.body))
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var body struct {
				Error       string `json:"error"`
				Description string `json:"error_description"`
			}
			_ = json.Unmarshal(raw, &body)
			if resp.StatusCode != tt.wantStatus || body.Error != tt.wantError {
				t.Fatalf("got %d %q, want %d %q: %s", resp.StatusCode, body.Error, tt.wantStatus, tt.wantError, raw)
			}
			if tt.wantError != "" && body.Description == "" {
				t.Errorf("error without a description: %s", raw)
			}
			// RFC 6749 §5.1 asks it of token responses; an OAuth
			// endpoint's errors carry it too (the body-size 413 once did
			// not), and nothing here may be cached.
			if strings.HasPrefix(tt.path, "/oauth2/") && tt.wantStatus != 404 && resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", resp.Header.Get("Cache-Control"))
			}
			if tt.wantStatus == 401 && strings.HasPrefix(tt.auth, "Basic") && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 for Basic credentials without WWW-Authenticate (RFC 6749 §5.2)")
			}
		})
	}
	// Nothing above consumed the codes: the right requests still work.
	if r := h.exchange(t, publicClient, code, verifier, publicRedirect); r.status != 200 {
		t.Fatalf("the code was consumed by a malformed request: %d %v", r.status, r.body)
	}
}
