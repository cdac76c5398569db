package backchannel_test

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

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/authd/authd/backchannel"
	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/oauth/oauthtest"
	"github.com/authd/authd/password"
	"github.com/authd/authd/signing"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// The tests run end to end: authd's server (oauthtest, as serve builds
// it) on PostgreSQL, a browser that signs one user in to N apps, real HTTP
// receivers on loopback that verify each logout token with go-oidc against
// authd's JWKS (fetched over HTTP), and Deliverers on the same store.

const (
	testSecret   = "test-secret-0123456789-0123456789-abcdef"
	testUser     = "alice"
	testPassword = "correct horse battery"
	redirect     = "http://127.0.0.1/cb"
	// testAdminToken mounts the admin API (/admin/users…).
	testAdminToken = "test-admin-token"
)

var testPasswords = password.New(password.Options{Params: password.Params{Memory: 64, Time: 1, Threads: 1}})

type harness struct {
	t     *testing.T
	srv   *httptest.Server
	app   *oauth.Server
	store storage.Store
	pool  *pgxpool.Pool
	sub   string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	pool := pgtest.New(t)
	h := &harness{t: t, store: postgres.New(pool), pool: pool}
	h.srv = httptest.NewUnstartedServer(nil)
	cfg := oauth.Config{Issuer: "http://" + h.srv.Listener.Addr().String(), Secret: []byte(testSecret),
		AdminTokens: []string{testAdminToken}}
	app, err := oauthtest.NewServer(cfg, oauth.Deps{Store: h.store, Cache: exchangecache.NewMemory(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Passwords: testPasswords}, oauthtest.Services{})
	if err != nil {
		t.Fatal(err)
	}
	h.app = app
	h.srv.Config.Handler = app
	h.srv.Start()
	t.Cleanup(h.srv.Close)
	hash, _ := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
	u := &storage.User{Username: testUser, PasswordHash: hash}
	if err := h.store.CreateUser(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	h.sub = u.Subject
	return h
}

// addApp registers a public client whose backchannel_logout_uri is uri;
// alg is its ID token alg ("" for RS256).
func (h *harness) addApp(id, uri string, alg ...string) {
	h.t.Helper()
	c := &storage.Client{ID: id, RedirectURIs: []string{redirect},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		Scopes: []string{"openid", "offline_access"}, TokenEndpointAuthMethod: "none", SkipConsent: true,
		BackchannelLogoutURI: uri, BackchannelLogoutSessionRequired: true}
	if len(alg) > 0 {
		c.IDTokenSignedResponseAlg = alg[0]
	}
	if err := h.store.CreateClient(h.t.Context(), c); err != nil {
		h.t.Fatal(err)
	}
}

// deliverer returns a Deliverer on the harness's store, signing with the
// server's keys (a second signing.Manager over the same stored keys, as
// another replica has), counting into reg.
func (h *harness) deliverer(id string, reg prometheus.Registerer, cfg backchannel.Config) *backchannel.Deliverer {
	h.t.Helper()
	keys, err := signing.New(h.store, signing.Config{Secret: []byte(testSecret)})
	if err != nil {
		h.t.Fatal(err)
	}
	cfg.Issuer, cfg.Store, cfg.Signer, cfg.ID = h.srv.URL, h.store, keys, id
	if cfg.Metrics == nil {
		cfg.Metrics = backchannel.NewMetrics(reg)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	d, err := backchannel.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// standaloneDeliverer returns a Deliverer on store with no server: its
// own signing keys (made if none are stored), issuer http://127.0.0.1, no
// log.
func standaloneDeliverer(tb testing.TB, store storage.Store) *backchannel.Deliverer {
	tb.Helper()
	keys, err := signing.New(store, signing.Config{Secret: []byte(testSecret)})
	if err != nil {
		tb.Fatal(err)
	}
	if err := keys.Ensure(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	d, err := backchannel.New(backchannel.Config{Issuer: "http://127.0.0.1", Store: store, Signer: keys,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

var (
	csrfRe    = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)
	actionRe  = regexp.MustCompile(`<form method="post" action="([^"]+)"`)
	sessionRe = regexp.MustCompile(`name="session" value="([^"]*)"`)
)

type page struct {
	status int
	body   string
	loc    *url.URL
}

func newBrowser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func readPage(t *testing.T, resp *http.Response, err error) page {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	p := page{status: resp.StatusCode, body: string(body)}
	if l := resp.Header.Get("Location"); l != "" {
		p.loc, _ = url.Parse(l)
	}
	return p
}

// submit posts the page's form with fields and its CSRF token.
func (h *harness) submit(b *http.Client, p page, fields url.Values) page {
	h.t.Helper()
	m, a := csrfRe.FindStringSubmatch(p.body), actionRe.FindStringSubmatch(p.body)
	if m == nil || a == nil {
		h.t.Fatalf("no form on page (status %d): %s", p.status, p.body)
	}
	fields.Set("csrf_token", m[1])
	if sm := sessionRe.FindStringSubmatch(p.body); sm != nil {
		fields.Set("session", sm[1])
	}
	action := strings.NewReplacer("&amp;", "&", "&#43;", "+").Replace(a[1])
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+action, strings.NewReader(fields.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", h.srv.URL)
	resp, err := b.Do(req)
	return readPage(h.t, resp, err)
}

// signIn signs the browser in to app (the password the first time, the
// session afterwards) and exchanges the code; it returns the ID token.
func (h *harness) signIn(b *http.Client, app string) string {
	h.t.Helper()
	conf := &oauth2.Config{ClientID: app, RedirectURL: redirect, Scopes: []string{"openid"},
		Endpoint: oauth2.Endpoint{AuthURL: h.srv.URL + "/oauth2/authorize", TokenURL: h.srv.URL + "/oauth2/token",
			AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	resp, err := b.Get(conf.AuthCodeURL("state-of-"+app, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", "n-"+app)))
	p := readPage(h.t, resp, err)
	for range 4 {
		if p.loc != nil {
			break
		}
		switch {
		case strings.Contains(p.body, `name="password"`):
			p = h.submit(b, p, url.Values{"step": {"login"}, "username": {testUser}, "password": {testPassword}})
		case strings.Contains(p.body, `value="continue"`):
			p = h.submit(b, p, url.Values{"step": {"continue"}})
		case strings.Contains(p.body, `value="allow"`):
			p = h.submit(b, p, url.Values{"step": {"consent"}, "decision": {"allow"}})
		default:
			h.t.Fatalf("sign-in to %s: unexpected page %d: %s", app, p.status, p.body)
		}
	}
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		h.t.Fatalf("sign-in to %s: no code: %d %v %s", app, p.status, p.loc, p.body)
	}
	tok, err := conf.Exchange(h.t.Context(), p.loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		h.t.Fatalf("exchange for %s: %v", app, err)
	}
	id, _ := tok.Extra("id_token").(string)
	if id == "" {
		h.t.Fatalf("no ID token for %s", app)
	}
	return id
}

// signOut ends the browser's session on the sign-out page and returns how
// long the page took to answer.
func (h *harness) signOut(b *http.Client) time.Duration {
	h.t.Helper()
	resp, err := b.Get(h.srv.URL + "/logout")
	p := readPage(h.t, resp, err)
	start := time.Now()
	p = h.submit(b, p, url.Values{})
	took := time.Since(start)
	if p.status != http.StatusOK || !strings.Contains(strings.ToLower(p.body), "signed out") {
		h.t.Fatalf("sign-out: %d %s", p.status, p.body)
	}
	return took
}

// claimsOf returns the unverified claims of a JWT (the test's own ID
// tokens, to read their sid).
func claimsOf(t *testing.T, raw string) map[string]any {
	t.Helper()
	jws, err := jose.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// receipt is one logout token a receiver accepted (and acted on).
type receipt struct {
	jti, sid, sub, alg string
	at                 time.Time
}

// receiver is one app's backchannel_logout_uri: it verifies every logout
// token (go-oidc against authd's JWKS, and the §2.4 claims) and then
// answers as behave says for its nth request (from 1).
type receiver struct {
	t        *testing.T
	app      string
	issuer   string
	keys     *oidc.RemoteKeySet
	behave   func(w http.ResponseWriter, r *http.Request, n int)
	srv      *httptest.Server
	mu       sync.Mutex
	requests int
	got      []receipt
	bad      []string
}

func (h *harness) receiver(app string, behave func(w http.ResponseWriter, r *http.Request, n int)) *receiver {
	rc := &receiver{t: h.t, app: app, issuer: h.srv.URL, behave: behave,
		keys: oidc.NewRemoteKeySet(context.Background(), h.srv.URL+"/oauth2/jwks")}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	h.t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	rc.requests++
	n := rc.requests
	rc.mu.Unlock()
	rec, err := rc.verify(r)
	if err != nil {
		rc.mu.Lock()
		rc.bad = append(rc.bad, err.Error())
		rc.mu.Unlock()
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.got = append(rc.got, rec)
	rc.mu.Unlock()
	if rc.behave != nil {
		rc.behave(w, r, n)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// verify checks a logout token as an RP must (Back-Channel Logout 1.0
// §2.6).
func (rc *receiver) verify(r *http.Request) (receipt, error) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return receipt{}, fmt.Errorf("%s %s", r.Method, r.Header.Get("Content-Type"))
	}
	raw := r.PostFormValue("logout_token")
	jws, err := jose.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil {
		return receipt{}, err
	}
	if typ, _ := jws.Signatures[0].Header.ExtraHeaders["typ"].(string); typ != "logout+jwt" {
		return receipt{}, fmt.Errorf("typ %q", typ)
	}
	payload, err := rc.keys.VerifySignature(r.Context(), raw)
	if err != nil {
		return receipt{}, fmt.Errorf("signature: %w", err)
	}
	var c map[string]any
	if err := json.Unmarshal(payload, &c); err != nil {
		return receipt{}, err
	}
	now := float64(time.Now().Unix())
	iat, _ := c["iat"].(float64)
	exp, _ := c["exp"].(float64)
	events, _ := c["events"].(map[string]any)
	ev, isObj := events["http://schemas.openid.net/event/backchannel-logout"].(map[string]any)
	switch {
	case c["iss"] != rc.issuer:
		return receipt{}, fmt.Errorf("iss %v", c["iss"])
	case c["aud"] != rc.app:
		return receipt{}, fmt.Errorf("aud %v", c["aud"])
	case iat < now-10 || iat > now+10 || exp-iat != 120 || exp <= now:
		return receipt{}, fmt.Errorf("iat %v exp %v", iat, exp)
	case !isObj || len(ev) != 0:
		return receipt{}, fmt.Errorf("events %v", c["events"])
	case c["nonce"] != nil:
		return receipt{}, fmt.Errorf("nonce present")
	case c["jti"] == nil || c["sid"] == nil || c["sub"] == nil:
		return receipt{}, fmt.Errorf("jti, sid or sub missing: %v", c)
	}
	return receipt{jti: c["jti"].(string), sid: c["sid"].(string), sub: c["sub"].(string),
		alg: jws.Signatures[0].Header.Algorithm, at: time.Now()}, nil
}

func (rc *receiver) receipts() []receipt {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receipt(nil), rc.got...)
}

func (rc *receiver) rejected() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.bad...)
}

// counter reads a counter of reg by name and label value.
func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// waitSettled waits (bounded) until no delivery is pending.
func (h *harness) waitSettled(within time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		n, err := h.store.CountPendingLogoutDeliveries(h.t.Context())
		if err != nil {
			h.t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	ds, _ := h.store.ListLogoutDeliveries(h.t.Context(), storage.LogoutFilter{Status: storage.LogoutPending})
	for _, d := range ds {
		h.t.Logf("pending: %s attempts %d last error %q", d.ClientID, d.Attempts, d.LastError)
	}
	h.t.Fatalf("deliveries still pending after %v", within)
}
