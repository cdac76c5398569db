package oauth_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/authd/authd/federation"
	"github.com/authd/authd/storage"
)

// nodeUpstream is oidc-provider (interop/oidc-provider) on loopback.
type nodeUpstream struct {
	issuer string
	stdin  io.WriteCloser
	lines  *bufio.Scanner
}

// startOIDCProvider runs interop/oidc-provider/upstream.mjs; it skips
// without Node or the installed package, except in CI (CI=true), where
// .ci/run installs both.
func startOIDCProvider(t *testing.T, callbacks ...string) *nodeUpstream {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join("..", "interop", "oidc-provider"))
	ci := os.Getenv("CI") == "true"
	if _, err := exec.LookPath("node"); err != nil {
		if ci {
			t.Fatal("node is required in CI")
		}
		t.Skip("node not installed")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "oidc-provider")); err != nil {
		if ci {
			t.Fatal("interop/oidc-provider is not installed (npm ci)")
		}
		t.Skip("run npm ci in interop/oidc-provider")
	}
	cmd := exec.Command("node", append([]string{"upstream.mjs"}, callbacks...)...)
	cmd.Dir = dir
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	u := &nodeUpstream{stdin: stdin, lines: bufio.NewScanner(stdout)}
	var first struct{ Issuer string }
	u.read(t, &first)
	u.issuer = first.Issuer
	return u
}

func (u *nodeUpstream) read(t *testing.T, v any) {
	t.Helper()
	done := make(chan bool, 1)
	go func() {
		for u.lines.Scan() {
			if strings.HasPrefix(u.lines.Text(), "{") { // not its notices
				done <- true
				return
			}
		}
		done <- false
	}()
	select {
	case ok := <-done:
		if !ok || json.Unmarshal(u.lines.Bytes(), v) != nil {
			t.Fatalf("oidc-provider: unexpected output %q", u.lines.Text())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("oidc-provider did not answer")
	}
}

// rotate replaces the upstream's signing key.
func (u *nodeUpstream) rotate(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(u.stdin, "rotate\n"); err != nil {
		t.Fatal(err)
	}
	var r struct{ Rotated string }
	u.read(t, &r)
}

var (
	upFormActionRe = regexp.MustCompile(`<form[^>]*action="([^"]+)"`)
	upHiddenRe     = regexp.MustCompile(`<input type="hidden" name="(\w+)" value="([^"]*)"`)
)

// signInUpstream drives oidc-provider's own pages (its development login
// form) from authorize until it redirects to a URL starting with stop.
func signInUpstream(t *testing.T, b *http.Client, authorize, login, stop string) *url.URL {
	t.Helper()
	next := authorize
	for range 12 {
		p := get(t, b, next)
		switch {
		case p.loc != nil:
			loc := p.loc
			if !loc.IsAbs() {
				base, _ := url.Parse(next)
				loc = base.ResolveReference(loc)
			}
			if strings.HasPrefix(loc.String(), stop) {
				return loc
			}
			next = loc.String()
		case p.status == http.StatusOK && upFormActionRe.MatchString(p.body):
			// Its login form, or its consent form (which it shows native
			// clients every time).
			action := upFormActionRe.FindStringSubmatch(p.body)
			if action == nil {
				t.Fatalf("upstream login page without a form: %s", p.body)
			}
			form := url.Values{}
			if strings.Contains(p.body, `name="login"`) {
				form = url.Values{"login": {login}, "password": {"any"}}
			}
			for _, h := range upHiddenRe.FindAllStringSubmatch(p.body, -1) {
				form.Set(h[1], html.UnescapeString(h[2]))
			}
			base, _ := url.Parse(next)
			au, err := url.Parse(html.UnescapeString(action[1]))
			if err != nil {
				t.Fatal(err)
			}
			target := base.ResolveReference(au)
			resp, err := b.PostForm(target.String(), form)
			if err != nil {
				t.Fatal(err)
			}
			rp := readPage(t, resp)
			if rp.loc == nil {
				t.Fatalf("upstream login: %d %s", rp.status, rp.body)
			}
			next = base.ResolveReference(rp.loc).String()
		default:
			t.Fatalf("upstream page %s: %d %s", next, p.status, p.body)
		}
	}
	t.Fatal("upstream sign-in did not finish")
	return nil
}

// nativeIDToken is what an app's native sign-in gets: an ID token of
// oidc-provider for clientID (the app), with nonce.
func nativeIDToken(t *testing.T, up *nodeUpstream, clientID, login, nonce string) string {
	t.Helper()
	b := newBrowser(t)
	verifier := oauth2.GenerateVerifier()
	conf := &oauth2.Config{ClientID: clientID, RedirectURL: "http://127.0.0.1/cb", Scopes: []string{"openid", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: up.issuer + "/auth", TokenURL: up.issuer + "/token", AuthStyle: oauth2.AuthStyleInParams}}
	loc := signInUpstream(t, b, conf.AuthCodeURL("native-state-1", oauth2.S256ChallengeOption(verifier),
		oauth2.SetAuthURLParam("nonce", nonce)), login, "http://127.0.0.1/cb")
	tok, err := conf.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		t.Fatal("no id_token from oidc-provider")
	}
	return raw
}

// TestOIDCProviderUpstream runs authd against oidc-provider, an OpenID
// provider nobody here wrote: through the pages (a new user; the same user
// again; linking by verified email only when allowed; a replayed state
// refused) and natively (RFC 8693: a valid ID token, a retry, 16 at once,
// wrong aud, bad signature, a key rotation, Apple's nonce rule).
func TestOIDCProviderUpstream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Node")
	}
	// authd's clock, moved forward for the expiry case.
	var ahead atomic.Int64
	h := newHarness(t, harnessOpts{backend: "memory", now: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }})
	up := startOIDCProvider(t, h.srv.URL+"/signin/fed/op/callback", h.srv.URL+"/signin/fed/op-link/callback")
	ctx := context.Background()
	nativeSetupClient(t, h)
	addProvider(t, h, map[string]any{"id": "op", "kind": "oidc", "issuer": up.issuer, "client_id": "authd-web",
		"client_secret": "authd-web-secret", "display_name": "Node OP", "native_audiences": []string{nativeAudienceOP}})
	addProvider(t, h, map[string]any{"id": "op-link", "kind": "oidc", "issuer": up.issuer, "client_id": "authd-web",
		"client_secret": "authd-web-secret", "display_name": "Node OP (linking)", "link_by_verified_email": true})
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	addProvider(t, h, map[string]any{"id": "op-apple", "kind": "apple", "issuer": up.issuer, "client_id": "com.example.web",
		"team_id": "T", "key_id": "K", "private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"native_audiences": []string{"com.other.app"}})

	browserSignIn := func(t *testing.T, provider, login string) page {
		b := newBrowser(t)
		cb := signInUpstream(t, b, fedStart(t, h, b, provider).String(), login, h.srv.URL+"/signin/fed/")
		return get(t, b, cb.String())
	}
	t.Run("browser", func(t *testing.T) {
		tokens := h.redeem(t, codeOf(t, browserSignIn(t, "op", "node-1~n1@example.com~true")), fedVerifier)
		if tokens.str("access_token") == "" || idTokenAMR(t, tokens.str("id_token")) != `["fed"]` {
			t.Fatalf("tokens: %v", tokens.body)
		}
		first, err := h.store.GetFederatedIdentity(ctx, up.issuer, "node-1~n1@example.com~true")
		if err != nil {
			t.Fatal(err)
		}
		codeOf(t, browserSignIn(t, "op", "node-1~n1@example.com~true"))
		if again, _ := h.store.GetFederatedIdentity(ctx, up.issuer, "node-1~n1@example.com~true"); again.Subject != first.Subject {
			t.Fatal("a second sign-in made another user")
		}
		if err := h.store.CreateUser(ctx, &storage.User{Username: "existing", PasswordHash: []byte("x"), Email: "e@example.com", EmailVerified: true}); err != nil {
			t.Fatal(err)
		}
		existing, _ := h.store.GetUser(ctx, "existing")
		for _, tc := range []struct {
			provider, login string
			linked          bool
		}{
			{"op-link", "node-3~e@example.com~false", false}, // unverified
			{"op-link", "node-4~e@example.com~true", true},
			// Last: it makes a second user with that verified email, after
			// which the email names no one user and links nobody.
			{"op", "node-2~e@example.com~true", false}, // not allowed by the provider
		} {
			codeOf(t, browserSignIn(t, tc.provider, tc.login))
			l, err := h.store.GetFederatedIdentity(ctx, up.issuer, tc.login)
			if err != nil || (l.Subject == existing.Subject) != tc.linked {
				t.Fatalf("%s via %s: linked to the existing user = %v, want %v", tc.login, tc.provider, l != nil && l.Subject == existing.Subject, tc.linked)
			}
		}
		// A state used once is refused the second time.
		b := newBrowser(t)
		cb := signInUpstream(t, b, fedStart(t, h, b, "op").String(), "node-5", h.srv.URL+"/signin/fed/")
		codeOf(t, get(t, b, cb.String()))
		if p := get(t, b, cb.String()); p.status != http.StatusBadRequest || p.loc != nil {
			t.Fatalf("replayed state: %d %v", p.status, p.loc)
		}
	})
	t.Run("native", func(t *testing.T) {
		start := time.Now() // the first verification fetches the JWKS
		tok := nativeIDToken(t, up, nativeAudienceOP, "native-1", "n-0123456789")
		res := h.tokenExchange(t, nativeClient, tok, nil)
		if res.status != 200 || res.str("issued_token_type") != "urn:ietf:params:oauth:token-type:access_token" {
			t.Fatalf("exchange: %d %v", res.status, res.body)
		}
		if again := h.tokenExchange(t, nativeClient, tok, nil); again.status != 200 || again.str("access_token") != res.str("access_token") {
			t.Fatalf("retry: %d %v", again.status, again.body)
		}
		// 16 identical exchanges at once: one answer for all.
		tok16 := nativeIDToken(t, up, nativeAudienceOP, "native-16", "n-16-0123456789")
		results := make([]tokenResult, 16)
		var wg sync.WaitGroup
		for i := range results {
			wg.Add(1)
			go func() { defer wg.Done(); results[i] = h.tokenExchange(t, nativeClient, tok16, nil) }()
		}
		wg.Wait()
		for i, r := range results {
			if r.status != 200 || r.str("access_token") != results[0].str("access_token") {
				t.Fatalf("concurrent %d: %d %v", i, r.status, r.body)
			}
		}
		refused := func(what, tok string, extra url.Values) {
			t.Helper()
			if r := h.tokenExchange(t, nativeClient, tok, extra); r.status != 400 || r.str("error") != "invalid_request" {
				t.Fatalf("%s: %d %v", what, r.status, r.body)
			}
		}
		refused("wrong aud", nativeIDToken(t, up, "com.nobody", "native-2", "n-0123456789"), nil)
		good := nativeIDToken(t, up, nativeAudienceOP, "native-3", "n-0123456789")
		refused("bad signature", good[:len(good)-6]+"AAAAAA", nil)
		// oidc-provider's ID tokens live an hour: two hours on, expired.
		ahead.Store(int64(2 * time.Hour))
		if r := h.tokenExchange(t, nativeClient, good, nil); r.status != 400 || !strings.Contains(r.str("error_description"), "expired") {
			t.Fatalf("expired: %d %v", r.status, r.body)
		}
		ahead.Store(0)
		if r := h.tokenExchange(t, nativeClient, good, nil); r.status != 200 {
			t.Fatalf("the same token in time: %d %v", r.status, r.body)
		}
		// Another oidc-provider, not registered here: its issuer is refused.
		stranger := startOIDCProvider(t, "http://127.0.0.1/unused")
		refused("wrong issuer", nativeIDToken(t, stranger, nativeAudienceOP, "native-4", "n-0123456789"), nil)
		// Apple's rule: the token's nonce is the SHA-256 of the raw nonce.
		raw := "raw-nonce-from-the-app-0123"
		apple := nativeIDToken(t, up, "com.other.app", "native-apple", federation.HashNonce(raw))
		refused("missing nonce", apple, nil)
		refused("wrong nonce", apple, url.Values{"nonce": {"not-the-raw-nonce"}})
		if r := h.tokenExchange(t, nativeClient, apple, url.Values{"nonce": {raw}}); r.status != 200 {
			t.Fatalf("apple nonce: %d %v", r.status, r.body)
		}
		// A key rotation at the upstream: the new kid is refused until the
		// refetch floor allows one fetch, then accepted.
		up.rotate(t)
		deadline := time.Now().Add(federation.RefetchFloor + 10*time.Second)
		sawRefusal := false
		for {
			r := h.tokenExchange(t, nativeClient, nativeIDToken(t, up, nativeAudienceOP, "native-rot", "n-0123456789"), nil)
			if r.status == 200 {
				break
			}
			sawRefusal = true
			if r.status != 400 || r.str("error") != "invalid_request" || time.Now().After(deadline) {
				t.Fatalf("after rotation: %d %v", r.status, r.body)
			}
			time.Sleep(time.Second)
		}
		if !sawRefusal && time.Since(start) < federation.RefetchFloor-2*time.Second {
			t.Fatal("a kid unknown within the refetch floor was accepted at once")
		}
	})
}

const nativeAudienceOP = "com.example.ios"

// nativeSetupClient registers the native client allowed the grant.
func nativeSetupClient(t *testing.T, h *harness) {
	t.Helper()
	now := time.Now().UTC()
	if err := h.store.CreateClient(context.Background(), &storage.Client{ID: nativeClient, Name: "Native", RedirectURIs: []string{publicRedirect},
		GrantTypes: []string{"authorization_code", "refresh_token", grantTE}, ResponseTypes: []string{"code"},
		Scopes: []string{"openid", "offline_access", "profile", "email"}, TokenEndpointAuthMethod: "none", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
}
