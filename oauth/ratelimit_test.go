package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/storage"
)

// TestLoginBackoff: 20 wrong passwords for one user are refused with 429
// and Retry-After; after the back-off the right password works again; and
// another user is unaffected meanwhile.
func TestLoginBackoff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) {
		c.LoginLimits = oauth.LoginLimits{FreeFailures: 5, Backoff: 100 * time.Millisecond, MaxBackoff: 800 * time.Millisecond}
	}})
	hash, _ := bcrypt.GenerateFromPassword([]byte("bob-password"), bcrypt.MinCost)
	if err := h.store.CreateUser(context.Background(), &storage.User{Username: "bob", PasswordHash: hash, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	conf := h.oauthConfig(publicClient)
	authURL := conf.AuthCodeURL("state-backoff", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
	b := newBrowser(t)
	p := get(t, b, authURL)
	limited, lastWait := 0, time.Duration(0)
	for range 20 {
		resp := submitRaw(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "username": {testUser}, "password": {"guess"}})
		p = readPage(t, resp)
		switch p.status {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			limited++
			secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			if err != nil || secs < 1 {
				t.Fatalf("429 without a valid Retry-After: %q", resp.Header.Get("Retry-After"))
			}
			lastWait = time.Duration(secs) * time.Second
			if !strings.Contains(p.body, "Too many failed sign-in attempts") {
				t.Fatalf("429 page: %s", p.body)
			}
		default:
			t.Fatalf("wrong password: %d %s", p.status, p.body)
		}
	}
	if limited == 0 {
		t.Fatal("20 wrong passwords were never slowed down")
	}
	// Another user signs in meanwhile, from the same address.
	other := newBrowser(t)
	po := get(t, other, authURL)
	if po = submit(t, other, h.srv.URL, po, url.Values{"step": {"login"}, "username": {"bob"}, "password": {"bob-password"}}); po.status != http.StatusSeeOther {
		t.Fatalf("another user was affected: %d %s", po.status, po.body)
	}
	// After the back-off (capped at 800ms here) the right password works.
	time.Sleep(min(lastWait, 900*time.Millisecond))
	p = submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "username": {testUser}, "password": {testPassword}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("right password after the back-off: %d %s", p.status, p.body)
	}
}

// submitRaw is submit that returns the raw response (for headers).
func submitRaw(t *testing.T, b *http.Client, base string, p page, fields url.Values) *http.Response {
	t.Helper()
	fields.Set("csrf_token", csrfRe.FindStringSubmatch(p.body)[1])
	action := strings.NewReplacer("&amp;", "&", "&#43;", "+").Replace(actionRe.FindStringSubmatch(p.body)[1])
	req, _ := http.NewRequest(http.MethodPost, base+action, strings.NewReader(fields.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestSuccessfulLoginsNotLimited: many successful sign-ins from one address
// are never slowed (limits count failures only).
func TestSuccessfulLoginsNotLimited(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) {
		c.LoginLimits = oauth.LoginLimits{FreeFailures: 1, IPFailuresPerMinute: 1, IPBurst: 1}
	}})
	for range 30 {
		h.code(t, publicClient) // full password login each time
	}
}

// TestTokenRateLimit: the per-client token endpoint limit answers 429 with
// Retry-After once the client's bucket is empty. A public client is charged
// only for requests whose code or refresh token this server issued, so
// requests with made-up ones (anyone can send the client_id) never push it
// into 429.
func TestTokenRateLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "memory", cfg: func(c *oauth.Config) {
		c.TokenLimits = oauth.TokenLimits{PerSecond: 0.01, Burst: 3}
	}})
	code, v := h.code(t, publicClient)
	bogus := url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient}, "refresh_token": {"x"}}
	for range 10 {
		if r := h.postForm(t, "/oauth2/token", bogus, "", ""); r.status != http.StatusBadRequest {
			t.Fatalf("made-up refresh token: %d %v, want 400 (not charged)", r.status, r.body)
		}
	}
	rt := h.redeem(t, code, v).str("refresh_token") // charge 1
	form := url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient}, "refresh_token": {rt}}
	var last tokenResult
	for range 3 { // charges 2, 3, then 429
		last = h.postForm(t, "/oauth2/token", form, "", "")
	}
	if last.status != http.StatusTooManyRequests || last.header.Get("Retry-After") == "" {
		t.Fatalf("fourth charged request: %d %v", last.status, last.body)
	}
	// Another client has its own bucket.
	bogus.Set("client_id", "other-app")
	if r := h.postForm(t, "/oauth2/token", bogus, "", ""); r.status != http.StatusBadRequest {
		t.Fatalf("other client: %d %v", r.status, r.body)
	}
}
