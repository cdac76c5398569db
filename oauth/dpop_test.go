package oauth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/authd/authd/dpop"
	"github.com/authd/authd/dpop/rsverify"
	"github.com/authd/authd/exchangecache/redistest"
)

// dpopKey is a client's DPoP key, as a mobile app holds it in the Secure
// Enclave or Android Keystore.
type dpopKey struct {
	alg string
	key crypto.Signer
	jkt string
}

func newDPoPKey(t testing.TB, alg string) dpopKey {
	t.Helper()
	var k crypto.Signer
	switch alg {
	case "ES256":
		k, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default: // EdDSA, Ed25519
		_, k, _ = ed25519.GenerateKey(rand.Reader)
	}
	jkt, err := dpop.Thumbprint(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return dpopKey{alg: alg, key: k, jkt: jkt}
}

// proof signs a fresh proof (new jti) for method and URL.
func (k dpopKey) proof(t testing.TB, method, u, nonce, accessToken string) string {
	t.Helper()
	p, err := dpop.NewProof(k.key, k.alg, dpop.ProofClaims{Method: method, URL: u, Nonce: nonce, AccessToken: accessToken})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dpopPost posts a token request with the given DPoP header values.
func (h *harness) dpopPost(t testing.TB, form url.Values, proofs ...string) tokenResult {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, p := range proofs {
		req.Header.Add("DPoP", p)
	}
	return h.do(t, req)
}

// readTokenResult reads a JSON answer.
func readTokenResult(t testing.TB, resp *http.Response) tokenResult {
	t.Helper()
	defer resp.Body.Close()
	res := tokenResult{status: resp.StatusCode, header: resp.Header, body: map[string]any{}}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &res.body); err != nil {
		t.Fatalf("non-JSON answer %d: %s", resp.StatusCode, raw)
	}
	return res
}

// dpopClient is a public client signing its token requests with key, and
// keeping the server's last nonce as oauth4webapi and AppAuth do.
type dpopClient struct {
	h     *harness
	key   dpopKey
	nonce string
}

// token sends form with a fresh proof, answering one use_dpop_nonce.
func (c *dpopClient) token(t testing.TB, form url.Values) tokenResult {
	t.Helper()
	for range 2 {
		res := c.h.dpopPost(t, form, c.key.proof(t, "POST", c.h.srv.URL+"/oauth2/token", c.nonce, ""))
		if n := res.header.Get("DPoP-Nonce"); n != "" {
			c.nonce = n
		}
		if res.str("error") != "use_dpop_nonce" {
			return res
		}
	}
	t.Fatal("use_dpop_nonce twice")
	return tokenResult{}
}

func codeForm(code, verifier string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "client_id": {publicClient}, "code": {code},
		"code_verifier": {verifier}, "redirect_uri": {publicRedirect}}
}

func refreshForm(rt string) url.Values {
	return url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient}, "refresh_token": {rt}}
}

// introspectBody returns the admin's introspection answer for token.
func (h *harness) introspectBody(t testing.TB, token string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/oauth2/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out
}

// userinfo calls UserInfo with the Authorization header auth and the DPoP
// proofs.
func (h *harness) userinfo(t testing.TB, auth string, proofs ...string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/oauth2/userinfo", nil)
	req.Header.Set("Authorization", auth)
	for _, p := range proofs {
		req.Header.Add("DPoP", p)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header, out
}

func wantError(t testing.TB, res tokenResult, status int, code string) {
	t.Helper()
	if res.status != status || res.str("error") != code {
		t.Fatalf("got %d %v, want %d %s", res.status, res.body, status, code)
	}
}

// TestDPoPSignIn: a DPoP-bound sign-in over HTTP with ES256 and EdDSA
// (under both its names) keys: the nonce round trip consumes nothing, the
// tokens are of type DPoP and bound (introspection's cnf.jkt), UserInfo
// wants the proof with ath, and the refresh token is bound to the key.
func TestDPoPSignIn(t *testing.T) {
	for _, backend := range []string{"memory", "postgres"} {
		for _, alg := range []string{"ES256", "EdDSA", "Ed25519"} {
			t.Run(backend+"/"+alg, func(t *testing.T) {
				h := newHarness(t, harnessOpts{backend: backend})
				key := newDPoPKey(t, alg)
				tokenURL := h.srv.URL + "/oauth2/token"
				code, verifier := h.code(t, publicClient)

				// RFC 9449 §8: without a nonce, use_dpop_nonce and a fresh
				// DPoP-Nonce; the code is not consumed.
				res := h.dpopPost(t, codeForm(code, verifier), key.proof(t, "POST", tokenURL, "", ""))
				wantError(t, res, 400, "use_dpop_nonce")
				nonce := res.header.Get("DPoP-Nonce")
				if nonce == "" {
					t.Fatal("no DPoP-Nonce on use_dpop_nonce")
				}
				// htm and htu mismatches, two proofs: invalid_dpop_proof,
				// and still nothing consumed.
				wantError(t, h.dpopPost(t, codeForm(code, verifier), key.proof(t, "GET", tokenURL, nonce, "")), 400, "invalid_dpop_proof")
				wantError(t, h.dpopPost(t, codeForm(code, verifier), key.proof(t, "POST", h.srv.URL+"/oauth2/userinfo", nonce, "")), 400, "invalid_dpop_proof")
				wantError(t, h.dpopPost(t, codeForm(code, verifier), key.proof(t, "POST", "https://evil.example/oauth2/token", nonce, "")), 400, "invalid_dpop_proof")
				wantError(t, h.dpopPost(t, codeForm(code, verifier), key.proof(t, "POST", tokenURL, nonce, ""), key.proof(t, "POST", tokenURL, nonce, "")), 400, "invalid_dpop_proof")

				// The same request with the nonce redeems the code, once.
				res = h.dpopPost(t, codeForm(code, verifier), key.proof(t, "POST", tokenURL+"?q=1", nonce, ""))
				if res.status != 200 || res.str("token_type") != "DPoP" || res.str("refresh_token") == "" {
					t.Fatalf("exchange: %d %v", res.status, res.body)
				}
				if res.header.Get("DPoP-Nonce") == "" {
					t.Fatal("no DPoP-Nonce on the token response")
				}
				at, rt := res.str("access_token"), res.str("refresh_token")

				// RFC 9449 §6.2: introspection shows cnf.jkt.
				in := h.introspectBody(t, at)
				if cnf, _ := in["cnf"].(map[string]any); in["active"] != true || cnf["jkt"] != key.jkt || in["token_type"] != "DPoP" {
					t.Fatalf("introspection: %v, want cnf.jkt %s", in, key.jkt)
				}

				// UserInfo (RFC 9449 §7): DPoP + proof with ath.
				ui := h.srv.URL + "/oauth2/userinfo"
				if st, _, body := h.userinfo(t, "DPoP "+at, key.proof(t, "GET", ui, "", at)); st != 200 || body["sub"] == nil {
					t.Fatalf("userinfo: %d %v", st, body)
				}
				st, hdr, body := h.userinfo(t, "DPoP "+at, key.proof(t, "GET", ui, "", "another-token"))
				if st != 401 || body["error"] != "invalid_dpop_proof" || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "DPoP ") {
					t.Fatalf("ath of another token: %d %v %q", st, body, hdr.Get("WWW-Authenticate"))
				}
				if st, _, body := h.userinfo(t, "DPoP "+at, key.proof(t, "GET", ui, "", "")); st != 401 || body["error"] != "invalid_dpop_proof" {
					t.Fatalf("no ath: %d %v", st, body)
				}
				other := newDPoPKey(t, "ES256")
				if st, _, body := h.userinfo(t, "DPoP "+at, other.proof(t, "GET", ui, "", at)); st != 401 || body["error"] != "invalid_token" {
					t.Fatalf("another key: %d %v", st, body)
				}
				st, hdr, body = h.userinfo(t, "Bearer "+at)
				if st != 401 || body["error"] != "invalid_token" || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "DPoP ") {
					t.Fatalf("DPoP-bound token as Bearer: %d %v %q", st, body, hdr.Get("WWW-Authenticate"))
				}
				if st, _, _ := h.userinfo(t, "DPoP "+at); st != 401 {
					t.Fatalf("DPoP without proof: %d", st)
				}

				// The refresh token is bound to the key (RFC 9449 §5):
				// refused without a proof and with another key's, and
				// neither rotates it.
				wantError(t, h.postForm(t, "/oauth2/token", refreshForm(rt), "", ""), 400, "invalid_grant")
				wantError(t, h.dpopPost(t, refreshForm(rt), other.proof(t, "POST", tokenURL, nonce, "")), 400, "invalid_grant")
				// A reused jti is refused without revoking anything.
				p := key.proof(t, "POST", tokenURL, nonce, "")
				res = h.dpopPost(t, refreshForm(rt), p)
				if res.status != 200 || res.str("token_type") != "DPoP" {
					t.Fatalf("refresh: %d %v", res.status, res.body)
				}
				at2 := res.str("access_token")
				wantError(t, h.dpopPost(t, refreshForm(res.str("refresh_token")), p), 400, "invalid_dpop_proof")
				if !h.introspect(t, at2) || !h.introspect(t, res.str("refresh_token")) {
					t.Fatal("a reused jti revoked the tokens")
				}
				if cnf, _ := h.introspectBody(t, at2)["cnf"].(map[string]any); cnf["jkt"] != key.jkt {
					t.Fatal("the refreshed access token is not bound")
				}
			})
		}
	}
}

// TestDPoPReplay: a retried DPoP exchange with a fresh proof from the same
// key gets the original tokens (the fingerprint holds the key, not the
// jti); with another key's proof, or none, it is code reuse: invalid_grant
// and the first tokens revoked. On PostgreSQL + Redis, as in production.
func TestDPoPReplay(t *testing.T) {
	for _, second := range []string{"other key", "no proof"} {
		t.Run(second, func(t *testing.T) {
			h, _, _ := newReplayHarness(t, nil)
			c := &dpopClient{h: h, key: newDPoPKey(t, "ES256")}
			code, verifier := h.code(t, publicClient)
			first := c.token(t, codeForm(code, verifier))
			if first.status != 200 {
				t.Fatalf("exchange: %d %v", first.status, first.body)
			}
			n1 := first.header.Get("DPoP-Nonce")
			retry := c.token(t, codeForm(code, verifier))
			for _, k := range []string{"access_token", "refresh_token", "id_token", "token_type"} {
				if retry.str(k) != first.str(k) {
					t.Fatalf("retry %s differs: %v vs %v", k, retry.body, first.body)
				}
			}
			if retry.header.Get("DPoP-Nonce") == "" || n1 == "" {
				t.Fatal("a replayed response without a fresh DPoP-Nonce")
			}
			var res tokenResult
			if second == "other key" {
				o := &dpopClient{h: h, key: newDPoPKey(t, "EdDSA"), nonce: c.nonce}
				res = o.token(t, codeForm(code, verifier))
			} else {
				res = h.exchange(t, publicClient, code, verifier, publicRedirect)
			}
			wantError(t, res, 400, "invalid_grant")
			if h.introspect(t, first.str("access_token")) || h.introspect(t, first.str("refresh_token")) {
				t.Fatal("code reuse did not revoke the first tokens")
			}
		})
	}
}

// TestDPoPConcurrentRetries: 16 concurrent retries of one exchange, each
// with a fresh proof from the same key, all get the same tokens.
func TestDPoPConcurrentRetries(t *testing.T) {
	h, _, _ := newReplayHarness(t, nil)
	key := newDPoPKey(t, "ES256")
	code, verifier := h.code(t, publicClient)
	tokenURL := h.srv.URL + "/oauth2/token"
	// Learn the nonce first (it consumes nothing).
	res := h.dpopPost(t, codeForm(code, verifier), key.proof(t, "POST", tokenURL, "", ""))
	wantError(t, res, 400, "use_dpop_nonce")
	nonce := res.header.Get("DPoP-Nonce")
	proofs := make([]string, 16)
	for i := range proofs {
		proofs[i] = key.proof(t, "POST", tokenURL, nonce, "")
	}
	results := make([]tokenResult, len(proofs))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range proofs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = h.dpopPost(t, codeForm(code, verifier), proofs[i])
		}()
	}
	close(start)
	wg.Wait()
	for i, r := range results {
		if r.status != 200 || r.str("access_token") != results[0].str("access_token") || r.str("refresh_token") != results[0].str("refresh_token") || r.str("token_type") != "DPoP" {
			t.Fatalf("retry %d: %d %v (first %v)", i, r.status, r.body, results[0].body)
		}
	}
	if access, refresh := countTokens(t, h); access != 1 || refresh != 1 {
		t.Fatalf("%d access and %d refresh tokens issued, want 1 and 1", access, refresh)
	}
}

// TestDPoPRefreshReplay: a retried DPoP refresh with a fresh proof from
// the same key gets the same rotated tokens.
func TestDPoPRefreshReplay(t *testing.T) {
	h, _, _ := newReplayHarness(t, nil)
	c := &dpopClient{h: h, key: newDPoPKey(t, "Ed25519")}
	code, verifier := h.code(t, publicClient)
	first := c.token(t, codeForm(code, verifier))
	r1 := c.token(t, refreshForm(first.str("refresh_token")))
	r2 := c.token(t, refreshForm(first.str("refresh_token")))
	if r1.status != 200 || r1.str("access_token") != r2.str("access_token") || r1.str("refresh_token") != r2.str("refresh_token") {
		t.Fatalf("refresh retry: %v vs %v", r1.body, r2.body)
	}
}

// TestDPoPJKTBindsCode: dpop_jkt at the authorization endpoint (RFC 9449
// §10) binds the code: a proof from another key, or none, is refused and
// consumes nothing; the bound key's proof redeems it.
func TestDPoPJKTBindsCode(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory", dpopNonceOff: true})
	key, other := newDPoPKey(t, "ES256"), newDPoPKey(t, "ES256")
	verifier := oauth2.GenerateVerifier()
	loc := h.login(t, newBrowser(t), h.oauthConfig(publicClient).AuthCodeURL("state-0123",
		oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("dpop_jkt", key.jkt)))
	code := loc.Query().Get("code")
	tokenURL := h.srv.URL + "/oauth2/token"
	wantError(t, h.dpopPost(t, codeForm(code, verifier), other.proof(t, "POST", tokenURL, "", "")), 400, "invalid_grant")
	wantError(t, h.exchange(t, publicClient, code, verifier, publicRedirect), 400, "invalid_grant")
	res := h.dpopPost(t, codeForm(code, verifier), key.proof(t, "POST", tokenURL, "", ""))
	if res.status != 200 || res.str("token_type") != "DPoP" {
		t.Fatalf("bound key: %d %v", res.status, res.body)
	}
	// A malformed dpop_jkt is invalid_request at the authorization endpoint.
	loc = h.login(t, newBrowser(t), h.oauthConfig(publicClient).AuthCodeURL("state-0123",
		oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("dpop_jkt", "short")))
	if loc.Query().Get("error") != "invalid_request" {
		t.Fatalf("malformed dpop_jkt: %s", loc)
	}
}

// TestDPoPJTIStoreRedis: the jti store on Redis refuses a proof used twice
// across two replicas sharing it.
func TestDPoPJTIStoreRedis(t *testing.T) {
	store := dpop.NewRedis(redistest.NewClient(t, redistest.Addr(t)), time.Second)
	h := newHarness(t, harnessOpts{backend: "memory", dpopReplay: store, dpopNonceOff: true})
	key := newDPoPKey(t, "ES256")
	code, verifier := h.code(t, publicClient)
	p := key.proof(t, "POST", h.srv.URL+"/oauth2/token", "", "")
	if res := h.dpopPost(t, codeForm(code, verifier), p); res.status != 200 {
		t.Fatalf("exchange: %d %v", res.status, res.body)
	}
	wantError(t, h.dpopPost(t, codeForm(code, verifier), p), 400, "invalid_dpop_proof")
}

// TestWithoutDPoP: without a proof everything is as before: bearer tokens,
// no cnf, Bearer at UserInfo.
func TestWithoutDPoP(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	code, verifier := h.code(t, publicClient)
	res := h.redeem(t, code, verifier)
	if !strings.EqualFold(res.str("token_type"), "bearer") || res.header.Get("DPoP-Nonce") != "" {
		t.Fatalf("bearer exchange: %v %v", res.body, res.header)
	}
	if in := h.introspectBody(t, res.str("access_token")); in["cnf"] != nil {
		t.Fatalf("cnf without DPoP: %v", in)
	}
	if st, _, _ := h.userinfo(t, "Bearer "+res.str("access_token")); st != 200 {
		t.Fatalf("bearer userinfo: %d", st)
	}
	if st, _, _ := h.userinfo(t, "DPoP "+res.str("access_token"), newDPoPKey(t, "ES256").proof(t, "GET", h.srv.URL+"/oauth2/userinfo", "", res.str("access_token"))); st != 401 {
		t.Fatalf("a bearer token as DPoP: %d", st)
	}
}

// TestDPoPResourceServer: package rsverify, as a resource server uses it,
// accepts authd's DPoP-bound token with a proof from its key through
// authd's introspection, and refuses it as Bearer or with another key.
func TestDPoPResourceServer(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	c := &dpopClient{h: h, key: newDPoPKey(t, "ES256")}
	code, verifier := h.code(t, publicClient)
	at := c.token(t, codeForm(code, verifier)).str("access_token")
	v := &rsverify.Verifier{IntrospectionURL: h.srv.URL + "/oauth2/introspect", ClientID: confClient, ClientSecret: confSecret}
	const resource = "https://api.example.com/orders"
	call := func(auth string, k dpopKey) error {
		r := httptest.NewRequest(http.MethodGet, resource, nil)
		r.Header.Set("Authorization", auth)
		r.Header.Set("DPoP", k.proof(t, "GET", resource, "", at))
		_, err := v.Verify(context.Background(), r, resource)
		return err
	}
	if err := call("DPoP "+at, c.key); err != nil {
		t.Fatal(err)
	}
	if err := call("Bearer "+at, c.key); !errors.Is(err, rsverify.ErrInvalidToken) {
		t.Fatalf("as Bearer: %v", err)
	}
	if err := call("DPoP "+at, newDPoPKey(t, "EdDSA")); !errors.Is(err, rsverify.ErrInvalidToken) {
		t.Fatalf("another key: %v", err)
	}
}

// TestDPoPBoundClient: a client registered through the admin API with
// dpop_bound_access_tokens (RFC 9449 §5.2) is refused without a proof,
// which consumes nothing, and gets DPoP tokens with one; the metadata is
// stored (PostgreSQL and memory).
func TestDPoPBoundClient(t *testing.T) {
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			h := newHarness(t, harnessOpts{backend: backend, dpopNonceOff: true})
			res := h.admin(t, adminReq{method: "POST", path: "/admin/clients", body: `{"client_name":"DPoP app","redirect_uris":["` + publicRedirect + `"],` +
				`"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"token_endpoint_auth_method":"none",` +
				`"scope":"openid offline_access","skip_consent":true,"dpop_bound_access_tokens":true}`})
			id := res.str("client_id")
			if res.status != 201 || res.body["dpop_bound_access_tokens"] != true {
				t.Fatalf("register: %s", res)
			}
			if got := h.admin(t, adminReq{method: "GET", path: "/admin/clients/" + id}); got.body["dpop_bound_access_tokens"] != true {
				t.Fatalf("stored metadata: %s", got)
			}
			conf := h.oauthConfig(publicClient)
			conf.ClientID = id
			verifier := oauth2.GenerateVerifier()
			code := h.login(t, newBrowser(t), conf.AuthCodeURL("state-0123", oauth2.S256ChallengeOption(verifier))).Query().Get("code")
			form := codeForm(code, verifier)
			form.Set("client_id", id)
			wantError(t, h.postForm(t, "/oauth2/token", form, "", ""), 400, "invalid_dpop_proof")
			key := newDPoPKey(t, "ES256")
			tok := h.dpopPost(t, form, key.proof(t, "POST", h.srv.URL+"/oauth2/token", "", ""))
			if tok.status != 200 || tok.str("token_type") != "DPoP" {
				t.Fatalf("with a proof: %d %v", tok.status, tok.body)
			}
		})
	}
}

// TestDPoPGarbage: malformed DPoP headers and Authorization: DPoP values
// are 4xx, never a 5xx, at the token endpoint and UserInfo; the metadata
// lists the proof algorithms (RFC 9449 §5.1).
func TestDPoPGarbage(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	code, verifier := h.code(t, publicClient)
	key := newDPoPKey(t, "ES256")
	good := key.proof(t, "POST", h.srv.URL+"/oauth2/token", "", "")
	parts := strings.Split(good, ".")
	for _, p := range []string{"", " ", "x", "a.b.c", "..", parts[0] + ".." + parts[2], parts[0] + "." + parts[1] + ".",
		"eyJhbGciOiJub25lIiwidHlwIjoiZHBvcCtqd3QifQ.e30.", strings.Repeat("A", 9000), `{"payload":"e30"}`,
		parts[0] + ".bm90IGpzb24." + parts[2], "\xff\xfe"} {
		res := h.dpopPost(t, codeForm(code, verifier), p)
		if res.status != 400 || (res.str("error") != "invalid_dpop_proof" && res.str("error") != "use_dpop_nonce") {
			t.Fatalf("token endpoint, DPoP %q: %d %v", truncateForLog(p), res.status, res.body)
		}
		if st, _, _ := h.userinfo(t, "DPoP x", p); st != 401 && st != 400 {
			t.Fatalf("userinfo, DPoP %q: %d", truncateForLog(p), st)
		}
	}
	for _, auth := range []string{"DPoP ", "DPoP", "dpop  x", "DPoP \xff"} {
		if st, _, _ := h.userinfo(t, auth, good); st >= 500 {
			t.Fatalf("userinfo, Authorization %q: %d", auth, st)
		}
	}
	// The code is still unused.
	if res := h.redeem(t, code, verifier); res.status != 200 {
		t.Fatal("garbage consumed the code")
	}
	resp, err := http.Get(h.srv.URL + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md struct {
		Algs []string `json:"dpop_signing_alg_values_supported"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&md)
	if strings.Join(md.Algs, " ") != "ES256 RS256 EdDSA Ed25519" {
		t.Fatalf("dpop_signing_alg_values_supported: %v", md.Algs)
	}
}

func truncateForLog(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
