package oauth_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authd/authd/exchangecache/redistest"
	"github.com/authd/authd/federation"
	"github.com/authd/authd/federation/federationtest"
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/storage"
)

const (
	nativeClient   = "native-app"
	nativeAudience = "com.example.ios"
	grantTE        = "urn:ietf:params:oauth:grant-type:token-exchange"
	idTokenType    = "urn:ietf:params:oauth:token-type:id_token"
)

// nativeSetup adds a native client and a provider of kind for up.
func nativeSetup(t *testing.T, h *harness, up *federationtest.Upstream, kind string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	if err := h.store.CreateClient(ctx, &storage.Client{ID: nativeClient, Name: "Native", RedirectURIs: []string{publicRedirect},
		GrantTypes: []string{"authorization_code", "refresh_token", grantTE}, ResponseTypes: []string{"code"},
		Scopes: []string{"openid", "offline_access", "profile", "email"}, TokenEndpointAuthMethod: "none", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	p := &storage.Provider{ID: "up", Kind: kind, Issuer: up.Issuer, ClientID: "authd-web", DisplayName: "Upstream",
		Scopes: []string{"openid"}, NativeAudiences: []string{nativeAudience}}
	if kind == federation.KindApple {
		p.TeamID, p.KeyID = "TEAM", "KEY"
	}
	if err := h.store.CreateProvider(ctx, p); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) tokenExchange(t testing.TB, clientID, subjectToken string, extra url.Values) tokenResult {
	form := url.Values{"grant_type": {grantTE}, "client_id": {clientID}, "subject_token": {subjectToken},
		"subject_token_type": {idTokenType}, "scope": {"openid offline_access"}}
	for k, v := range extra {
		form[k] = v
	}
	return h.postForm(t, "/oauth2/token", form, "", "")
}

func TestTokenExchangeNative(t *testing.T) {
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			h := newHarness(t, harnessOpts{backend: backend})
			up := federationtest.New(t)
			nativeSetup(t, h, up, federation.KindOIDC)
			tok := up.Mint(t, federationtest.Claims{Subject: "u1", Audience: nativeAudience, Email: "a@example.com", EmailVerified: true})
			res := h.tokenExchange(t, nativeClient, tok, nil)
			if res.status != 200 {
				t.Fatalf("exchange: %d %v", res.status, res.body)
			}
			if res.str("issued_token_type") != "urn:ietf:params:oauth:token-type:access_token" || res.str("refresh_token") == "" || res.str("id_token") == "" {
				t.Fatalf("response: %v", res.body)
			}
			if res.header.Get("Cache-Control") != "no-store" {
				t.Fatalf("Cache-Control %q", res.header.Get("Cache-Control"))
			}
			// A retry gets the same answer.
			again := h.tokenExchange(t, nativeClient, tok, nil)
			if again.status != 200 || again.str("access_token") != res.str("access_token") || again.str("id_token") != res.str("id_token") {
				t.Fatalf("retry: %d %v", again.status, again.body)
			}
			// Another client presenting the same token: invalid_request.
			other := h.tokenExchange(t, "other-app", tok, nil)
			if other.status != 400 || other.str("error") != "unauthorized_client" {
				t.Fatalf("client without the grant: %d %v", other.status, other.body)
			}
			// A second sign-in reuses the same user.
			tok2 := up.Mint(t, federationtest.Claims{Subject: "u1", Audience: nativeAudience})
			res2 := h.tokenExchange(t, nativeClient, tok2, nil)
			if res2.status != 200 {
				t.Fatalf("second: %d %v", res2.status, res2.body)
			}
			link, err := h.store.GetFederatedIdentity(context.Background(), up.Issuer, "u1")
			if err != nil {
				t.Fatal(err)
			}
			if !h.introspect(t, res2.str("access_token")) {
				t.Fatal("token inactive")
			}
			if amr := idTokenAMR(t, res2.str("id_token")); amr != `["fed"]` {
				t.Fatalf("amr %s", amr)
			}
			// A disabled user gets no tokens from the native exchange.
			ctx := context.Background()
			if err := h.store.SetUserDisabled(ctx, link.Subject, true); err != nil {
				t.Fatal(err)
			}
			res3 := h.tokenExchange(t, nativeClient, up.Mint(t, federationtest.Claims{Subject: "u1", Audience: nativeAudience}), nil)
			if res3.status != 400 || res3.str("error") != "invalid_request" {
				t.Fatalf("disabled user: %d %v", res3.status, res3.body)
			}
		})
	}
}

func TestTokenExchangeRefusals(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	up := federationtest.New(t)
	nativeSetup(t, h, up, federation.KindOIDC)
	c := func(mod func(*federationtest.Claims)) federationtest.Claims {
		cl := federationtest.Claims{Subject: "u2", Audience: nativeAudience}
		if mod != nil {
			mod(&cl)
		}
		return cl
	}
	forged := up.Mint(t, c(nil))
	forged = forged[:len(forged)-4] + "AAAA"
	for _, tc := range []struct {
		name, tok, want string
		extra           url.Values
	}{
		{"wrong aud", up.Mint(t, c(func(cl *federationtest.Claims) { cl.Audience = "com.other" })), "invalid_request", nil},
		{"expired", up.Mint(t, c(func(cl *federationtest.Claims) {
			cl.IssuedAt, cl.Expiry = time.Now().Add(-time.Hour), time.Now().Add(-10*time.Minute)
		})), "invalid_request", nil},
		{"wrong issuer", up.Mint(t, c(func(cl *federationtest.Claims) { cl.Issuer = "https://evil.example" })), "invalid_request", nil},
		{"bad signature", forged, "invalid_request", nil},
		{"unknown audience param", up.Mint(t, c(nil)), "invalid_target", url.Values{"audience": {"https://api.other"}}},
		{"wrong token type", up.Mint(t, c(nil)), "invalid_request", url.Values{"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := h.tokenExchange(t, nativeClient, tc.tok, tc.extra)
			if res.status != 400 || res.str("error") != tc.want {
				t.Fatalf("%d %v, want %s", res.status, res.body, tc.want)
			}
		})
	}
}

// A kid the provider rotated to is fetched (then accepted); a kid it never
// published is refused, and refetches are floored.
func TestTokenExchangeKeyRotation(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	up := federationtest.New(t)
	nativeSetup(t, h, up, federation.KindOIDC)
	if res := h.tokenExchange(t, nativeClient, up.Mint(t, federationtest.Claims{Subject: "r", Audience: nativeAudience}), nil); res.status != 200 {
		t.Fatalf("first: %d %v", res.status, res.body)
	}
	bad := h.tokenExchange(t, nativeClient, up.MintUnpublished(t, federationtest.Claims{Subject: "r", Audience: nativeAudience}), nil)
	if bad.status != 400 || !strings.Contains(bad.str("error_description"), "key") {
		t.Fatalf("unpublished kid: %d %v", bad.status, bad.body)
	}
	up.Rotate(false)
	// Within the floor the new kid is not fetched yet.
	tok := up.Mint(t, federationtest.Claims{Subject: "r", Audience: nativeAudience})
	if res := h.tokenExchange(t, nativeClient, tok, nil); res.status != 400 {
		t.Fatalf("within the floor: %d %v", res.status, res.body)
	}
	deadline := time.Now().Add(federation.RefetchFloor + 5*time.Second)
	for {
		tok := up.Mint(t, federationtest.Claims{Subject: "r", Audience: nativeAudience})
		res := h.tokenExchange(t, nativeClient, tok, nil)
		if res.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rotated key never accepted: %d %v", res.status, res.body)
		}
		time.Sleep(time.Second)
	}
	if up.JWKSHits > 4 {
		t.Fatalf("%d JWKS fetches; the floor should bound them", up.JWKSHits)
	}
}

func TestTokenExchangeAppleNonce(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	up := federationtest.New(t)
	nativeSetup(t, h, up, federation.KindApple)
	raw := "raw-nonce-0123456789"
	mint := func(nonce string) string {
		return up.Mint(t, federationtest.Claims{Subject: "apple-1", Audience: nativeAudience, Nonce: nonce, Email: "x@privaterelay.appleid.com", EmailVerified: "true"})
	}
	if res := h.tokenExchange(t, nativeClient, mint(federation.HashNonce(raw)), nil); res.status != 400 || res.str("error") != "invalid_request" {
		t.Fatalf("missing nonce: %d %v", res.status, res.body)
	}
	if res := h.tokenExchange(t, nativeClient, mint(federation.HashNonce(raw)), url.Values{"nonce": {"other"}}); res.status != 400 || res.str("error") != "invalid_request" {
		t.Fatalf("wrong nonce: %d %v", res.status, res.body)
	}
	if res := h.tokenExchange(t, nativeClient, mint(federation.HashNonce(raw)), url.Values{"nonce": {raw}}); res.status != 200 {
		t.Fatalf("right nonce: %d %v", res.status, res.body)
	}
	u, err := h.store.GetFederatedIdentity(context.Background(), up.Issuer, "apple-1")
	if err != nil {
		t.Fatal(err)
	}
	user, _ := h.store.GetUserBySubject(context.Background(), u.Subject)
	if !user.EmailVerified {
		t.Fatal(`Apple's "true" email_verified not read`)
	}
}

// 16 identical exchanges at once mint one token pair; all get it. After
// the window the token is refused.
func TestTokenExchangeConcurrent16(t *testing.T) {
	if testing.Short() {
		t.Skip("postgres and redis")
	}
	cache, _, _ := redisCache(t, redistest.Addr(t))
	h := newHarness(t, harnessOpts{backend: "postgres", cache: cache, cfg: func(c *oauth.Config) { c.ReplayWindow = 3 * time.Second }})
	up := federationtest.New(t)
	nativeSetup(t, h, up, federation.KindOIDC)
	tok := up.Mint(t, federationtest.Claims{Subject: "c16", Audience: nativeAudience})
	a0, r0 := countTokens(t, h)
	results := make([]tokenResult, 16)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = h.tokenExchange(t, nativeClient, tok, nil)
		}()
	}
	close(start)
	wg.Wait()
	for i, r := range results {
		if r.status != 200 || r.str("access_token") != results[0].str("access_token") || r.str("refresh_token") != results[0].str("refresh_token") {
			t.Fatalf("result %d: %d %v", i, r.status, r.body)
		}
	}
	a1, r1 := countTokens(t, h)
	if a1-a0 != 1 || r1-r0 != 1 {
		t.Fatalf("minted %d access and %d refresh tokens, want 1 and 1", a1-a0, r1-r0)
	}
	time.Sleep(3500 * time.Millisecond)
	late := h.tokenExchange(t, nativeClient, tok, nil)
	if late.status != 400 || late.str("error") != "invalid_request" {
		t.Fatalf("after the window: %d %v", late.status, late.body)
	}
}

// With a DPoP proof (a Secure Enclave key, ES256) the native exchange's
// tokens are DPoP-bound; a retry with a fresh proof from the same key gets
// the same answer, one from another key does not.
func TestTokenExchangeDPoP(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	up := federationtest.New(t)
	nativeSetup(t, h, up, federation.KindOIDC)
	tok := up.Mint(t, federationtest.Claims{Subject: "dpop-1", Audience: nativeAudience})
	form := url.Values{"grant_type": {grantTE}, "client_id": {nativeClient}, "subject_token": {tok},
		"subject_token_type": {idTokenType}, "scope": {"openid offline_access"}}
	c := &dpopClient{h: h, key: newDPoPKey(t, "ES256")}
	first := c.token(t, form)
	if first.status != 200 || first.str("token_type") != "DPoP" {
		t.Fatalf("exchange: %d %v", first.status, first.body)
	}
	if retry := c.token(t, form); retry.status != 200 || retry.str("access_token") != first.str("access_token") {
		t.Fatalf("retry: %d %v", retry.status, retry.body)
	}
	other := &dpopClient{h: h, key: newDPoPKey(t, "ES256"), nonce: c.nonce}
	wantError(t, other.token(t, form), 400, "invalid_request")
}
