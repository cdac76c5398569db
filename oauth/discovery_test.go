package oauth_test

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// appAuthRequired are the discovery fields the AppAuth SDKs require.
// AppAuth-Android (net.openid.appauth.AuthorizationServiceDiscovery)
// throws MissingArgumentException without issuer, authorization_endpoint,
// jwks_uri, response_types_supported, subject_types_supported or
// id_token_signing_alg_values_supported; AppAuth-iOS
// (OIDServiceDiscovery) fails on the same required fields. token_endpoint
// is optional to them but needed for the code flow; userinfo_endpoint and
// end_session_endpoint are what they use for UserInfo and logout.
var appAuthRequired = []string{
	"issuer", "authorization_endpoint", "jwks_uri", "response_types_supported",
	"subject_types_supported", "id_token_signing_alg_values_supported",
	"token_endpoint", "userinfo_endpoint", "end_session_endpoint",
}

// issue12Fields are the fields item 1 of issue 12 lists.
var issue12Fields = []string{
	"issuer", "authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri",
	"end_session_endpoint", "revocation_endpoint", "introspection_endpoint", "scopes_supported",
	"response_types_supported", "response_modes_supported", "grant_types_supported",
	"subject_types_supported", "id_token_signing_alg_values_supported",
	"token_endpoint_auth_methods_supported", "claims_supported", "code_challenge_methods_supported",
	"authorization_response_iss_parameter_supported",
}

// TestDiscoveryForAppAuth: /.well-known/openid-configuration carries every
// field AppAuth-Android and AppAuth-iOS require and every field issue 12
// lists, is cacheable, and agrees with the RFC 8414 document member by
// member (OIDC Discovery 1.0 §4.3: issuer equals the URL it was fetched
// from).
func TestDiscoveryForAppAuth(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	fetch := func(path string) (map[string]any, http.Header) {
		resp, err := http.Get(h.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m, resp.Header
	}
	oidc, hdr := fetch("/.well-known/openid-configuration")
	oauth, _ := fetch("/.well-known/oauth-authorization-server")
	if !strings.Contains(hdr.Get("Cache-Control"), "max-age=") {
		t.Errorf("discovery Cache-Control %q: not cacheable", hdr.Get("Cache-Control"))
	}
	for _, f := range append(appAuthRequired, issue12Fields...) {
		if _, ok := oidc[f]; !ok {
			t.Errorf("discovery lacks %s", f)
		}
	}
	if oidc["issuer"] != h.srv.URL {
		t.Errorf("issuer %v, want %s", oidc["issuer"], h.srv.URL)
	}
	if !reflect.DeepEqual(oidc, oauth) {
		t.Errorf("the OpenID and RFC 8414 documents disagree:\n%v\n%v", oidc, oauth)
	}
	has := func(field, v string) bool {
		l, _ := oidc[field].([]any)
		for _, x := range l {
			if x == v {
				return true
			}
		}
		return false
	}
	for _, c := range []struct{ field, v string }{
		{"subject_types_supported", "public"}, {"id_token_signing_alg_values_supported", "RS256"},
		{"id_token_signing_alg_values_supported", "ES256"}, {"response_types_supported", "code"},
		{"code_challenge_methods_supported", "S256"}, {"scopes_supported", "openid"},
	} {
		if !has(c.field, c.v) {
			t.Errorf("%s lacks %s", c.field, c.v)
		}
	}
	// The JWKS is cacheable, for less than the prepublication of a new key.
	resp, err := http.Get(oidc["jwks_uri"].(string))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "public, max-age=3600" {
		t.Errorf("jwks: %d %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
}

// TestHeadOnDocuments: the documents caches and monitors fetch answer HEAD
// as they answer GET, without a body (RFC 9110 §9.1, §9.3.2), and a 405 on
// them names HEAD in Allow.
func TestHeadOnDocuments(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	do := func(method, path string) *http.Response {
		req, _ := http.NewRequest(method, h.srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var n int
		buf := make([]byte, 512)
		for {
			k, err := resp.Body.Read(buf)
			n += k
			if err != nil {
				break
			}
		}
		resp.ContentLength = int64(n) // bytes actually read
		return resp
	}
	for _, path := range []string{
		"/.well-known/openid-configuration", "/.well-known/oauth-authorization-server", "/oauth2/jwks",
		"/static/authd.css", "/favicon.ico", "/.well-known/apple-app-site-association", "/.well-known/assetlinks.json",
	} {
		get, head := do(http.MethodGet, path), do(http.MethodHead, path)
		if head.StatusCode != get.StatusCode || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") ||
			head.Header.Get("Cache-Control") != get.Header.Get("Cache-Control") {
			t.Errorf("HEAD %s: %d %q %q; GET: %d %q %q", path, head.StatusCode, head.Header.Get("Content-Type"),
				head.Header.Get("Cache-Control"), get.StatusCode, get.Header.Get("Content-Type"), get.Header.Get("Cache-Control"))
		}
		if head.ContentLength != 0 {
			t.Errorf("HEAD %s: a body of %d bytes", path, head.ContentLength)
		}
		if put := do(http.MethodPut, path); put.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(put.Header.Get("Allow"), "HEAD") {
			t.Errorf("PUT %s: %d, Allow %q", path, put.StatusCode, put.Header.Get("Allow"))
		}
	}
}

// TestHeadOnPages: every GET route of the pages answers HEAD with GET's
// status and headers and no body (RFC 9110 §9.1: a general-purpose server
// supports HEAD), and their 405s name HEAD in Allow.
func TestHeadOnPages(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string) (*http.Response, int) {
		req, _ := http.NewRequest(method, h.srv.URL+path, nil)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, len(b)
	}
	authorize := strings.TrimPrefix(h.authURL(publicClient, publicRedirect), h.srv.URL)
	for _, path := range []string{authorize, "/oauth2/authorize", "/account", "/logout", "/oauth2/logout"} {
		get, _ := do(http.MethodGet, path)
		head, n := do(http.MethodHead, path)
		if head.StatusCode != get.StatusCode || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") ||
			head.Header.Get("Content-Security-Policy") != get.Header.Get("Content-Security-Policy") || n != 0 {
			t.Errorf("HEAD %s: %d %q, %d bytes; GET: %d %q", path, head.StatusCode, head.Header.Get("Content-Type"), n,
				get.StatusCode, get.Header.Get("Content-Type"))
		}
		if put, _ := do(http.MethodPut, path); put.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(put.Header.Get("Allow"), "GET, HEAD") {
			t.Errorf("PUT %s: %d, Allow %q", path, put.StatusCode, put.Header.Get("Allow"))
		}
	}
	if head, _ := do(http.MethodHead, "/oauth2/token"); head.StatusCode != http.StatusMethodNotAllowed || head.Header.Get("Allow") != "POST" {
		t.Errorf("HEAD /oauth2/token: %d, Allow %q; want 405, POST", head.StatusCode, head.Header.Get("Allow"))
	}
}
