package main

// The harness of the self-service tests (selfservice_test.go): authd serve
// built with fault injection, a real SMTP server, and a browser that fills
// the pages' forms.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/oauth2"

	"github.com/authd/authd/mail/mailtest"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// browser is a person's browser: a cookie jar, redirects not followed
// (each step checks where it leads), and forms filled from the page.
type browser struct {
	t    *testing.T
	c    *http.Client
	base string
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status   int
	body     string
	location string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, body: string(body), location: resp.Header.Get("Location")}
}

func (b *browser) get(path string) page {
	b.t.Helper()
	if !strings.HasPrefix(path, "http") {
		path = b.base + path
	}
	req, _ := http.NewRequest(http.MethodGet, path, nil)
	return b.do(req)
}

var (
	hiddenRe = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
	hrefRe   = regexp.MustCompile(`<a href="([^"]+)">([^<]+)</a>`)
)

// link returns the href of the link with this text on p.
func (b *browser) link(p page, text string) string {
	b.t.Helper()
	for _, m := range hrefRe.FindAllStringSubmatch(p.body, -1) {
		if m[2] == text {
			return html.UnescapeString(m[1])
		}
	}
	b.t.Fatalf("no link %q on the page (%d): %s", text, p.status, p.body)
	return ""
}

// form returns the request of p's form with its hidden fields and fields.
func (b *browser) form(p page, fields url.Values) *http.Request {
	b.t.Helper()
	action := actionRe.FindStringSubmatch(p.body)
	if action == nil {
		b.t.Fatalf("no form on the page (%d): %s", p.status, p.body)
	}
	v := url.Values{}
	for _, m := range hiddenRe.FindAllStringSubmatch(p.body, -1) {
		v.Set(m[1], html.UnescapeString(m[2]))
	}
	for k, vs := range fields {
		v[k] = vs
	}
	req, _ := http.NewRequest(http.MethodPost, b.base+html.UnescapeString(action[1]), strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return req
}

func (b *browser) submit(p page, fields url.Values) page {
	b.t.Helper()
	return b.do(b.form(p, fields))
}

// selfService is one authd serve with sign-up on, a real SMTP server and
// an app registered.
type selfService struct {
	t      *testing.T
	bin    string
	env    []string
	smtp   *mailtest.Server
	authd  *authdProcess
	store  *postgres.Store
	conf   *oauth2.Config
	secret string
}

const ssRedirect = "https://app.example.test/cb"

func newSelfService(t *testing.T, extra ...string) *selfService {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs authd serve (skipped with -short)")
	}
	dsn := pgtest.DSN(t)
	s := &selfService{t: t, bin: buildAuthd(t, "authd_faults"), smtp: mailtest.Start(t, nil)}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s.store = postgres.New(pool)
	if err := s.store.CreateClient(t.Context(), &storage.Client{ID: "app", Name: "Example App", RedirectURIs: []string{ssRedirect},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		Scopes: []string{"openid", "offline_access", "email", "profile"}, TokenEndpointAuthMethod: "none", SkipConsent: true}); err != nil {
		t.Fatal(err)
	}
	s.env = append(withoutAuthdEnv(), "AUTHD_DATABASE_URL="+dsn, "AUTHD_SECRET=self-service-test-secret-0123456789-0123",
		"AUTHD_ADMIN_TOKEN=adm", "AUTHD_JANITOR=off", "AUTHD_SIGNUP=on",
		"AUTHD_SMTP_URL=smtp://"+s.smtp.Addr, "AUTHD_MAIL_FROM=Example <no-reply@example.test>")
	s.env = append(s.env, extra...)
	s.authd = startAuthd(t, s.bin, freeAddr(t), s.env, nil)
	s.conf = &oauth2.Config{ClientID: "app", RedirectURL: ssRedirect, Scopes: []string{"openid", "offline_access", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: s.authd.base + "/oauth2/authorize", TokenURL: s.authd.base + "/oauth2/token"}}
	return s
}

// authorize starts an authorization request in b and returns its first
// page and the verifier.
func (s *selfService) authorize(b *browser, state string) (page, string) {
	verifier := oauth2.GenerateVerifier()
	return b.get(s.conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))), verifier
}

// exchange redeems the code in the app's redirect.
func (s *selfService) exchange(p page, verifier string) *oauth2.Token {
	s.t.Helper()
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, ssRedirect) {
		s.t.Fatalf("not redirected to the app: %d %s %s", p.status, p.location, p.body)
	}
	u, _ := url.Parse(p.location)
	tok, err := s.conf.Exchange(s.t.Context(), u.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		s.t.Fatalf("exchange: %v", err)
	}
	return tok
}

// active reports whether token is active (introspection).
func (s *selfService) active(token string) bool {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.authd.base+"/oauth2/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer adm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Active bool `json:"active"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		s.t.Fatal(err)
	}
	return v.Active
}

// claims are an ID token's payload (authd signed it; the test reads it).
func claims(t *testing.T, tok *oauth2.Token) map[string]any {
	t.Helper()
	raw, _ := tok.Extra("id_token").(string)
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		t.Fatalf("no ID token: %q", raw)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// signUp goes from the login page of an authorization request to the code
// page, and returns it.
func (s *selfService) signUp(b *browser, login page, email, password string) page {
	s.t.Helper()
	form := b.get(b.link(login, "Create account"))
	if form.status != http.StatusOK {
		s.t.Fatalf("sign-up page: %d %s", form.status, form.body)
	}
	p := b.submit(form, url.Values{"email": {email}, "password": {password}})
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/signup/verify?flow=") {
		s.t.Fatalf("sign-up: %d %s %s", p.status, p.location, p.body)
	}
	return b.get(p.location)
}

// flowRe finds a flow ID in a page or URL.
var flowRe = regexp.MustCompile(`flow=[0-9a-f]+|value="[0-9a-f]{40}"`)

func countTo(s *mailtest.Server, to string) int {
	n := 0
	for _, m := range s.Received() {
		if strings.EqualFold(m.To, to) {
			n++
		}
	}
	return n
}

func userinfo(t *testing.T, base, access string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/oauth2/userinfo", nil)
	req.Header.Set("Authorization", "Bearer "+access)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return m
}
