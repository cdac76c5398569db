package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/oauth2"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// TestDeletionWithoutMail: authd serve without AUTHD_SMTP_URL (the
// default) still offers "Delete account" to a signed-in user (issue 26:
// deletion stays available; App Store Guideline 5.1.1(v)); deleting
// within 5 minutes of the sign-in asks no password, removes the user and
// ends their tokens. The steps that prove an address by mail (email
// change, recovery, sign-up) are not offered and answer 404.
func TestDeletionWithoutMail(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs authd serve (skipped with -short)")
	}
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := &selfService{t: t, bin: buildAuthd(t), store: postgres.New(pool)}
	if err := s.store.CreateClient(t.Context(), &storage.Client{ID: "app", Name: "Example App", RedirectURIs: []string{ssRedirect},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		Scopes: []string{"openid", "offline_access", "email"}, TokenEndpointAuthMethod: "none", SkipConsent: true}); err != nil {
		t.Fatal(err)
	}
	const name, pw = "leaver@example.test", "leaving passphrase"
	if _, err := identity.New(s.store, identity.Options{}).Add(t.Context(), identity.NewUser{Username: name, Password: pw,
		Email: name, EmailVerified: true}); err != nil {
		t.Fatal(err)
	}
	s.env = append(withoutAuthdEnv(), "AUTHD_DATABASE_URL="+dsn, "AUTHD_SECRET=self-service-test-secret-0123456789-0123",
		"AUTHD_ADMIN_TOKEN=adm", "AUTHD_JANITOR=off")
	s.authd = startAuthd(t, s.bin, freeAddr(t), s.env, nil)
	s.conf = &oauth2.Config{ClientID: "app", RedirectURL: ssRedirect, Scopes: []string{"openid", "offline_access", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: s.authd.base + "/oauth2/authorize", TokenURL: s.authd.base + "/oauth2/token"}}

	b := newBrowser(t, s.authd.base)
	login, verifier := s.authorize(b, "state-nomail-1")
	if login.status != http.StatusOK || strings.Contains(login.body, "Forgot password?") || strings.Contains(login.body, "Create account") {
		t.Fatalf("login page without mail: %d %s", login.status, login.body)
	}
	tok := s.exchange(b.submit(login, url.Values{"username": {name}, "password": {pw}}), verifier)
	if !s.active(tok.AccessToken) {
		t.Fatal("the new access token is inactive")
	}
	acct := b.get("/account")
	if strings.Contains(acct.body, "Change email address") {
		t.Fatalf("the account page offers an email change without mail: %s", acct.body)
	}
	for _, path := range []string{"/account/email", "/account/email/verify?flow=x", "/recover", "/recover/verify?flow=x", "/signup", "/signup/verify?flow=x"} {
		if p := b.get(path); p.status != http.StatusNotFound {
			t.Errorf("GET %s without mail: %d, want 404", path, p.status)
		}
	}
	del := b.get(b.link(acct, "Delete account"))
	if del.status != http.StatusOK || strings.Contains(del.body, `name="password"`) {
		t.Fatalf("delete page within 5 minutes of the sign-in: %d %s", del.status, del.body)
	}
	p := b.submit(del, nil)
	if p.status != http.StatusOK || !strings.Contains(p.body, "Your account was deleted") || strings.Contains(p.body, "confirmation") {
		t.Fatalf("delete without mail: %d %s", p.status, p.body)
	}
	if s.active(tok.AccessToken) {
		t.Fatal("the access token survived the deletion")
	}
	if _, err := s.conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
		t.Fatal("the refresh token survived the deletion")
	}
	if _, err := s.store.GetUser(t.Context(), name); err == nil {
		t.Fatal("the user survived the deletion")
	}
}
