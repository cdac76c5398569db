package adminapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/oauth/oauthtest"
	"github.com/authd/authd/password"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// The admin API's tests run end to end: authd's server (package oauth)
// with the API mounted as cmd/authd mounts it, so that what an admin
// request changes is checked where it matters, at sign-in, the token
// endpoint and introspection. This file is the harness, a subset of
// oauth's.

const (
	testSecret     = "test-secret-0123456789-0123456789-abcdef"
	testAdminToken = "test-admin-token"
	testUser       = "alice"
	testPassword   = "correct horse battery"
	publicClient   = "mobile-app"
	publicRedirect = "com.example.app:/oauth2redirect"
	confClient     = "web-app"
	confSecret     = "web-app-secret-with-enough-entropy-000000"
	confRedirect   = "https://app.example.com/callback"
)

// harness is one authd server on httptest with a seeded user and clients.
type harness struct {
	t     testing.TB
	srv   *httptest.Server
	app   *oauth.Server
	store storage.Store
	pool  *pgxpool.Pool // nil for the memory backend
}

// testPasswords is the harness's password hasher: argon2id with cheap
// parameters (64 KiB, one pass), so that sign-ins cost microseconds; the
// users the harness seeds have bcrypt hashes, as before argon2id, and are
// upgraded at their first sign-in.
var testPasswords = password.New(password.Options{Params: password.Params{Memory: 64, Time: 1, Threads: 1}})

type harnessOpts struct {
	backend string // "memory", "postgres" or "postgres+clientcache"
	cfg     func(*oauth.Config)
}

// backends lists the storage backends the end-to-end tests run against,
// PostgreSQL with the client cache off and on (ClientCacheTTL): no rule of
// the admin API may depend on it. PostgreSQL is skipped (or fails in CI)
// without AUTHD_TEST_POSTGRES_DSN.
var backends = []string{"memory", "postgres", "postgres+clientcache"}

// newHarness starts authd's server with the admin API mounted as
// cmd/authd mounts it, on a seeded store.
func newHarness(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t}
	clientCache := strings.HasSuffix(o.backend, "+clientcache")
	switch strings.TrimSuffix(o.backend, "+clientcache") {
	case "memory":
		h.store = memory.New()
	case "postgres":
		h.pool = pgtest.New(t)
		h.store = postgres.New(h.pool)
	default:
		t.Fatalf("unknown backend %q", o.backend)
	}
	h.srv = httptest.NewUnstartedServer(nil)
	cfg := oauth.Config{
		Issuer:      "http://" + h.srv.Listener.Addr().String(),
		Secret:      []byte(testSecret),
		AdminTokens: []string{testAdminToken},
	}
	var sv oauthtest.Services
	if clientCache {
		sv.ClientCacheTTL = time.Minute
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	app, err := oauthtest.NewServer(cfg, oauth.Deps{Store: h.store, Cache: exchangecache.NewMemory(), Logger: logger, Passwords: testPasswords}, sv)
	if err != nil {
		t.Fatal(err)
	}
	h.app = app
	h.srv.Config.Handler = app
	h.srv.Start()
	t.Cleanup(h.srv.Close)
	h.seed()
	return h
}

// seed creates the test user and the clients the tests sign in to.
func (h *harness) seed() {
	t := h.t
	ctx := context.Background()
	hash, err := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.CreateUser(ctx, &storage.User{Username: testUser, PasswordHash: hash, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	secretHash, _ := h.app.Hasher().Hash(ctx, []byte(confSecret))
	for _, c := range []*storage.Client{
		{ID: publicClient, Name: "Example Mobile", RedirectURIs: []string{publicRedirect, "http://127.0.0.1/callback"},
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
			Scopes: []string{"openid", "offline_access", "profile"}, TokenEndpointAuthMethod: "none", SkipConsent: true},
		{ID: confClient, Name: "Example Web", SecretHash: secretHash, RedirectURIs: []string{confRedirect},
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
			Scopes: []string{"openid", "offline_access", "profile"}, TokenEndpointAuthMethod: "client_secret_basic"},
		{ID: "other-app", Name: "Other", RedirectURIs: []string{publicRedirect},
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
			Scopes: []string{"openid", "offline_access"}, TokenEndpointAuthMethod: "none", SkipConsent: true},
	} {
		c.CreatedAt, c.UpdatedAt = time.Now().UTC(), time.Now().UTC()
		if err := h.store.CreateClient(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
}

// oauthConfig returns an x/oauth2 config for a seeded client.
func (h *harness) oauthConfig(clientID string) *oauth2.Config {
	c := &oauth2.Config{
		ClientID: clientID,
		Endpoint: oauth2.Endpoint{
			AuthURL:   h.srv.URL + "/oauth2/authorize",
			TokenURL:  h.srv.URL + "/oauth2/token",
			AuthStyle: oauth2.AuthStyleInParams,
		},
		RedirectURL: publicRedirect,
		Scopes:      []string{"openid", "offline_access"},
	}
	if clientID == confClient {
		c.ClientSecret = confSecret
		c.RedirectURL = confRedirect
		c.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	}
	return c
}

// newBrowser returns a user agent with a cookie jar that does not follow
// redirects (the final redirect goes to the app's redirect_uri).
func newBrowser(testing.TB) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{
		Jar:           jar,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

var (
	csrfRe   = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)
	actionRe = regexp.MustCompile(`<form method="post" action="([^"]+)"`)
)

type page struct {
	status int
	body   string
	loc    *url.URL
}

func get(t testing.TB, b *http.Client, u string) page {
	t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	return readPage(t, resp)
}

func readPage(t testing.TB, resp *http.Response) page {
	t.Helper()
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	p := page{status: resp.StatusCode, body: string(body)}
	if l := resp.Header.Get("Location"); l != "" {
		u, err := url.Parse(l)
		if err != nil {
			t.Fatalf("bad Location %q: %v", l, err)
		}
		p.loc = u
	}
	return p
}

// submit posts the page's form with the given fields plus its CSRF token,
// as a browser would (same-origin).
func submit(t testing.TB, b *http.Client, base string, p page, fields url.Values) page {
	t.Helper()
	m := csrfRe.FindStringSubmatch(p.body)
	a := actionRe.FindStringSubmatch(p.body)
	if m == nil || a == nil {
		t.Fatalf("no form on page (status %d): %s", p.status, p.body)
	}
	fields.Set("csrf_token", m[1])
	if sm := sessionFieldRe.FindStringSubmatch(p.body); sm != nil && !fields.Has("session") {
		fields.Set("session", sm[1]) // the hidden field binding the form to the session shown
	}
	action := strings.ReplaceAll(a[1], "&amp;", "&")
	action = strings.ReplaceAll(action, "&#43;", "+")
	req, _ := http.NewRequest(http.MethodPost, base+action, strings.NewReader(fields.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return readPage(t, resp)
}

// sessionFieldRe finds the hidden session field of the consent and one-tap
// forms.
var sessionFieldRe = regexp.MustCompile(`name="session" value="([^"]*)"`)

// login walks authorize → login → (consent) and returns the redirect to
// the app.
func (h *harness) login(t testing.TB, b *http.Client, authURL string) *url.URL {
	t.Helper()
	p := get(t, b, authURL)
	if p.loc == nil {
		if !strings.Contains(p.body, `name="password"`) {
			t.Fatalf("expected login form, got %d: %s", p.status, p.body)
		}
		p = submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "username": {testUser}, "password": {testPassword}})
	}
	if p.loc == nil && strings.Contains(p.body, `value="continue"`) {
		p = submit(t, b, h.srv.URL, p, url.Values{"step": {"continue"}}) // the one-tap page (RFC 8252 §8.6)
	}
	if p.loc == nil && strings.Contains(p.body, `value="allow"`) {
		p = submit(t, b, h.srv.URL, p, url.Values{"step": {"consent"}, "decision": {"allow"}})
	}
	if p.loc == nil || p.status != http.StatusSeeOther {
		t.Fatalf("expected redirect to the app, got %d: %s", p.status, p.body)
	}
	return p.loc
}

// tokenResult is a raw token endpoint answer.
type tokenResult struct {
	status int
	header http.Header
	body   map[string]any
}

func (r tokenResult) str(k string) string { s, _ := r.body[k].(string); return s }

// postForm posts form to path, optionally with Basic client credentials.
func (h *harness) postForm(t testing.TB, path string, form url.Values, basicUser, basicPass string) tokenResult {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basicUser != "" {
		req.SetBasicAuth(url.QueryEscape(basicUser), url.QueryEscape(basicPass))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	res := tokenResult{status: resp.StatusCode, header: resp.Header, body: map[string]any{}}
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &res.body); err != nil {
			t.Fatalf("%s: non-JSON answer %d: %s", path, resp.StatusCode, raw)
		}
	}
	return res
}

// exchange posts an authorization_code token request for a public client.
func (h *harness) exchange(t testing.TB, clientID, code, verifier, redirectURI string) tokenResult {
	return h.postForm(t, "/oauth2/token", url.Values{
		"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {code},
		"code_verifier": {verifier}, "redirect_uri": {redirectURI},
	}, "", "")
}

// redeem exchanges code for tokens as the public client and stops the
// test unless that succeeds.
func (h *harness) redeem(t testing.TB, code, verifier string) tokenResult {
	t.Helper()
	res := h.exchange(t, publicClient, code, verifier, publicRedirect)
	if res.status != 200 {
		t.Fatalf("exchange: %d %v", res.status, res.body)
	}
	return res
}

// introspect asks, as admin, whether token is active.
func (h *harness) introspect(t testing.TB, token string) bool {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Active bool `json:"active"`
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("introspect: %d %s", resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Active
}

// introspectSub asks, as admin, about token: active, and its sub.
func (h *harness) introspectSub(t testing.TB, token string) (bool, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Active bool   `json:"active"`
		Sub    string `json:"sub"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Active, out.Sub
}

// authURL is an authorization URL for client at redirect with scopes.
func (h *harness) authURL(clientID, redirect string, scopes ...string) string {
	conf := h.oauthConfig(clientID)
	conf.RedirectURL = redirect
	if len(scopes) > 0 {
		conf.Scopes = scopes
	}
	return conf.AuthCodeURL("state-people", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
}

// signInAs completes a login form on p as user/password.
func (h *harness) signInAs(t testing.TB, b *http.Client, p page, user, password string) page {
	t.Helper()
	if !strings.Contains(p.body, `name="password"`) {
		t.Fatalf("expected the login form, got %d: %s", p.status, p.body)
	}
	return submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "username": {user}, "password": {password}})
}

// tokensFor runs a full login for the public client with browser b (which
// may already be signed in) and returns the token response.
func (h *harness) tokensFor(t testing.TB, b *http.Client, user, password string) tokenResult {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	conf := h.oauthConfig(publicClient)
	p := get(t, b, conf.AuthCodeURL("state-people", oauth2.S256ChallengeOption(verifier)))
	if strings.Contains(p.body, `name="password"`) {
		p = h.signInAs(t, b, p, user, password)
	}
	if strings.Contains(p.body, `value="continue"`) {
		p = submit(t, b, h.srv.URL, p, url.Values{"step": {"continue"}})
	}
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		t.Fatalf("no code: %d %s", p.status, p.body)
	}
	return h.redeem(t, p.loc.Query().Get("code"), verifier)
}

// confTokens gets tokens for the confidential client with signed-in b
// (consent already given).
func (h *harness) confTokens(t testing.TB, b *http.Client) tokenResult {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	conf := h.oauthConfig(confClient)
	p := get(t, b, conf.AuthCodeURL("state-conf", oauth2.S256ChallengeOption(verifier)))
	if p.loc == nil {
		t.Fatalf("confidential client: no silent code: %d %s", p.status, p.body)
	}
	res := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"authorization_code"}, "code": {p.loc.Query().Get("code")},
		"code_verifier": {verifier}, "redirect_uri": {confRedirect}}, confClient, confSecret)
	if res.status != 200 {
		t.Fatalf("confidential exchange: %d %v", res.status, res.body)
	}
	return res
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

func ptr[T any](v T) *T { return &v }

// lockedWriter serializes writes to w.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
