package oauth_test

import (
	"context"
	"encoding/json"
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
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/authd/authd/dpop"
	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/oauth/oauthtest"
	"github.com/authd/authd/password"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

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
	backend string // "memory" or "postgres"
	cache   exchangecache.Cache
	cfg     func(*oauth.Config)
	pool    *pgxpool.Pool // share a database with another harness
	store   storage.Store // backend "custom": this store
	// dpopReplay is the DPoP jti store (nil: in memory).
	dpopReplay dpop.ReplayStore
	// clientCacheTTL turns the client cache on (storage.CachingStore, as
	// authd serve's AUTHD_CLIENT_CACHE_TTL).
	clientCacheTTL time.Duration
	// dpopNonceOff: DPoP proofs need no server nonce (AUTHD_DPOP_NONCE=off).
	dpopNonceOff bool
	// accessLog receives the request log (nil: the server's default).
	accessLog *slog.Logger
	// logger is the server's log (nil: discarded).
	logger *slog.Logger
	// now is the server's clock (nil: time.Now).
	now func() time.Time
	// methods builds the sign-in methods (nil: the password method).
	methods func(people *identity.Service, password signin.Method) []signin.Method
	// factors builds the second factors (nil: the authenticator app's).
	factors func(otp signin.Factor) []signin.Factor
}

// backends lists the storage backends the end-to-end tests run against,
// PostgreSQL with the client cache off and on (ClientCacheTTL): no protocol
// rule may depend on it. PostgreSQL is skipped (or fails in CI) without
// AUTHD_TEST_POSTGRES_DSN.
var backends = []string{"memory", "postgres", "postgres+clientcache"}

func newHarness(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t}
	clientCache := strings.HasSuffix(o.backend, "+clientcache")
	switch strings.TrimSuffix(o.backend, "+clientcache") {
	case "memory":
		h.store = memory.New()
	case "custom":
		h.store = o.store
	case "postgres":
		h.pool = o.pool
		if h.pool == nil {
			h.pool = pgtest.New(t)
		}
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
	if clientCache {
		o.clientCacheTTL = time.Minute
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	if o.cache == nil && !cfg.DisableReplay {
		o.cache = exchangecache.NewMemory()
	}
	if o.logger == nil {
		o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	app, err := newServerWith(cfg, oauth.Deps{
		Store:     h.store,
		Cache:     o.cache,
		Logger:    o.logger,
		AccessLog: o.accessLog,
		Passwords: testPasswords,
		Now:       o.now,
	}, services{ClientCacheTTL: o.clientCacheTTL, DPoPNonceOff: o.dpopNonceOff, DPoPReplay: o.dpopReplay, Methods: o.methods, Factors: o.factors})
	if err != nil {
		t.Fatal(err)
	}
	h.app = app
	// The test server also answers /metrics, which authd serves on its
	// operations listener (package ops), so tests can read the counters.
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(app.Registry(), promhttp.HandlerOpts{}))
	mux.Handle("/", app)
	h.srv.Config.Handler = mux
	h.srv.Start()
	t.Cleanup(h.srv.Close)
	if o.pool == nil {
		h.seed()
	}
	return h
}

// services are what newServerWith builds around the backend, as authd
// serve does; the zero value is serve's defaults.
type services = oauthtest.Services

// newServer is the tests' oauth.New (package oauthtest): deps.Store is the
// backend, around which it builds the services authd serve builds.
func newServer(cfg oauth.Config, deps oauth.Deps) (*oauth.Server, error) {
	return oauthtest.NewServer(cfg, deps, services{})
}

// newServerWith is newServer with the services' settings.
func newServerWith(cfg oauth.Config, deps oauth.Deps, sv services) (*oauth.Server, error) {
	return oauthtest.NewServer(cfg, deps, sv)
}

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

// code runs a full login for clientID and returns a fresh code and its
// verifier.
func (h *harness) code(t testing.TB, clientID string) (code, verifier string) {
	t.Helper()
	verifier = oauth2.GenerateVerifier()
	conf := h.oauthConfig(clientID)
	loc := h.login(t, newBrowser(t), conf.AuthCodeURL("state-0123", oauth2.S256ChallengeOption(verifier)))
	code = loc.Query().Get("code")
	if code == "" {
		t.Fatalf("no code in %s", loc)
	}
	return code, verifier
}

// codeWithScope is code with the given scope.
func (h *harness) codeWithScope(t testing.TB, clientID, scope string) (code, verifier string) {
	t.Helper()
	verifier = oauth2.GenerateVerifier()
	conf := h.oauthConfig(clientID)
	conf.Scopes = strings.Fields(scope)
	loc := h.login(t, newBrowser(t), conf.AuthCodeURL("state-0123", oauth2.S256ChallengeOption(verifier)))
	if code = loc.Query().Get("code"); code == "" {
		t.Fatalf("no code in %s", loc)
	}
	return code, verifier
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

// raceExchange sends n identical authorization_code exchanges of code by the
// public client at the same moment and returns every answer.
func (h *harness) raceExchange(t testing.TB, n int, code, verifier string) []tokenResult {
	t.Helper()
	results := make([]tokenResult, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = h.exchange(t, publicClient, code, verifier, publicRedirect)
		}()
	}
	close(start)
	wg.Wait()
	return results
}

// countTokens returns how many access and refresh tokens PostgreSQL holds.
func countTokens(t testing.TB, h *harness) (access, refresh int) {
	t.Helper()
	ctx := context.Background()
	if err := h.pool.QueryRow(ctx, "SELECT count(*) FROM access_tokens").Scan(&access); err != nil {
		t.Fatal(err)
	}
	if err := h.pool.QueryRow(ctx, "SELECT count(*) FROM refresh_tokens").Scan(&refresh); err != nil {
		t.Fatal(err)
	}
	return access, refresh
}
