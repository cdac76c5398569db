package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/oauth/oauthtest"
	"github.com/authd/authd/password"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/postgres/pgtest"
)

const (
	testPassword = "bench-password-123"
	testSecret   = "authbench-test-secret-0123456789-abcdefgh"
)

// newTarget starts authd (memory storage and replay cache) with the
// benchmark's user, a public skip_consent client and a confidential
// client_credentials client, and returns its URL and the client ids.
func newTarget(t *testing.T) (url, public, service, serviceSecret string) {
	t.Helper()
	tg := newTargetWith(t, nil)
	return tg.url, tg.public, tg.service, tg.serviceSecret
}

// newServer builds authd's server on store as authd serve does
// (cmd/authd's newServer), with an in-memory replay cache and cheap
// password hashing.
func newServer(cfg oauth.Config, store *memory.Store) (*oauth.Server, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	passwords := password.New(password.Options{Params: password.Params{Memory: 64, Time: 1, Threads: 1}})
	return oauthtest.NewServer(cfg, oauth.Deps{Store: store, Cache: exchangecache.NewMemory(), Logger: log, Passwords: passwords}, oauthtest.Services{})
}

// target is an in-process authd and its clients.
type target struct {
	url, public, service, serviceSecret string
	// thirdParty is a public client without skip_consent, with an https
	// and a private-use redirect, and ES256 ID tokens.
	thirdParty string
}

const httpsRedirect = "https://authbench.example/callback"

// newTargetWith is newTarget with wrap (if not nil) around authd's handler.
func newTargetWith(t *testing.T, wrap func(http.Handler) http.Handler) target {
	t.Helper()
	store := memory.New()
	srv := httptest.NewUnstartedServer(nil)
	app, err := newServer(oauth.Config{Issuer: "http://" + srv.Listener.Addr().String(), Secret: []byte(testSecret)}, store)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = app
	if wrap != nil {
		srv.Config.Handler = wrap(app)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	ctx := t.Context()
	hash, _ := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
	if err := store.CreateUser(ctx, &storage.User{Username: "bench", PasswordHash: hash}); err != nil {
		t.Fatal(err)
	}
	pub, err := oauth.RegisterClient(ctx, store, app.Hasher(), oauth.ClientMetadata{
		ClientName: "authbench", RedirectURIs: []string{"dev.authd.authbench:/callback"}, TokenEndpointAuthMethod: "none",
		GrantTypes: []string{"authorization_code", "refresh_token"}, Scope: "openid offline_access", SkipConsent: true,
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	svc, err := oauth.RegisterClient(ctx, store, app.Hasher(), oauth.ClientMetadata{
		ClientName: "authbench service", TokenEndpointAuthMethod: "client_secret_basic",
		GrantTypes: []string{"client_credentials"}, Scope: "api",
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	third, err := oauth.RegisterClient(ctx, store, app.Hasher(), oauth.ClientMetadata{
		ClientName: "authbench third party", RedirectURIs: []string{httpsRedirect, "dev.authd.authbench:/callback"},
		TokenEndpointAuthMethod: "none", GrantTypes: []string{"authorization_code", "refresh_token"},
		Scope: "openid offline_access", IDTokenSignedResponseAlg: "ES256",
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return target{url: srv.URL, public: pub.ClientID, service: svc.ClientID, serviceSecret: svc.ClientSecret, thirdParty: third.ClientID}
}

func runJSON(t *testing.T, args ...string) *result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), append(args, "-json", "-q"), &stdout, &stderr); err != nil {
		t.Fatalf("authbench %v: %v\n%s", args, err, stderr.String())
	}
	var res result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("authbench %v: bad JSON: %v\n%s", args, err, stdout.String())
	}
	if !strings.Contains(stderr.String(), "p99 ms") {
		t.Errorf("authbench %v: no table on stderr:\n%s", args, stderr.String())
	}
	return &res
}

// TestModes runs every mode briefly against an in-process authd and
// checks that every request succeeded.
func TestModes(t *testing.T) {
	url, public, service, secret := newTarget(t)
	dir := t.TempDir()
	for _, c := range []struct {
		mode  string
		args  []string
		steps []string
	}{
		{"login", []string{"-client-id", public, "-password", testPassword}, []string{"authorize", "login", "token", "flow"}},
		{"sso", []string{"-client-id", public, "-password", testPassword}, []string{"authorize", "token", "flow"}},
		{"exchange", []string{"-client-id", public, "-password", testPassword}, []string{"token"}},
		{"replay", []string{"-client-id", public, "-password", testPassword}, []string{"token"}},
		{"refresh", []string{"-client-id", public, "-password", testPassword}, []string{"refresh"}},
		{"introspect", []string{"-client-id", service, "-client-secret", secret}, []string{"introspect"}},
		{"client-credentials", []string{"-client-id", service, "-client-secret", secret}, []string{"token"}},
	} {
		t.Run(c.mode, func(t *testing.T) {
			res := runJSON(t, append([]string{"-mode", c.mode, "-target", url, "-c", "4", "-n", "40"}, c.args...)...)
			if res.Failed != 0 || len(res.Errors) != 0 {
				t.Errorf("failed %d: %v", res.Failed, res.Errors)
			}
			if res.Iterations != 40 || res.Rate <= 0 {
				t.Errorf("iterations %d, rate %.1f", res.Iterations, res.Rate)
			}
			var got []string
			for _, s := range res.Steps {
				got = append(got, s.Step)
				if s.OK != 40 || s.P50 <= 0 || s.P99 < s.P50 || s.Max < s.P99 {
					t.Errorf("step %+v", s)
				}
			}
			if strings.Join(got, ",") != strings.Join(c.steps, ",") {
				t.Errorf("steps %v, want %v", got, c.steps)
			}
			b, _ := json.Marshal(res)
			if err := os.WriteFile(filepath.Join(dir, c.mode+".json"), b, 0o600); err != nil {
				t.Fatal(err)
			}
		})
	}

	// Errors are counted by step, status and OAuth error code.
	res := runJSON(t, "-mode", "client-credentials", "-target", url, "-c", "2", "-n", "6", "-client-id", service, "-client-secret", "wrong")
	if res.Failed != 6 || res.Errors["token: 401 invalid_client"] != 6 {
		t.Errorf("wrong secret: failed %d, errors %v", res.Failed, res.Errors)
	}

	res = runJSON(t, "ceiling-http", "-c", "4", "-n", "50")
	if res.Failed != 0 || res.Iterations != 50 {
		t.Errorf("ceiling-http: %+v", res)
	}
	b, _ := json.Marshal(res)
	if err := os.WriteFile(filepath.Join(dir, "ceiling-http.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}

	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var out bytes.Buffer
	if err := run(t.Context(), append([]string{"report"}, files...), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| sso | 4 |", "| ceiling-http | 4 |", "100%", "÷ HTTP ceiling", "SQL stmts/iter", "Redis round trips/iter", "server CPU µs/iter"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestCeilingDB runs the database ceiling on a scratch schema and checks
// that the schema is gone afterwards.
func TestCeilingDB(t *testing.T) {
	dsn := pgtest.BaseDSN(t)
	res := runJSON(t, "ceiling-db", "-database-url", dsn, "-c", "4", "-n", "30")
	if res.Failed != 0 || res.Iterations != 30 || res.Steps[0].OK != 30 {
		t.Fatalf("ceiling-db: %+v", res)
	}
	// One exchange's statements (BEGIN, the code's read; four writes,
	// COMMIT) in its two round trips (batches).
	if res.DBStatements == nil || *res.DBStatements != 7 || res.DBRoundTrips == nil || *res.DBRoundTrips < 2 {
		t.Errorf("ceiling-db per iteration: %s statements, %s round trips; want 7 and at least 2", perIter(res.DBStatements), perIter(res.DBRoundTrips))
	}
	schema := strings.TrimSuffix(strings.TrimPrefix(res.Target, "postgresql (scratch schema "), ")")
	pool := pgtest.New(t)
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("scratch schema %s was not dropped", schema)
	}
}

func TestRefusesRemoteTarget(t *testing.T) {
	err := run(t.Context(), []string{"-mode", "client-credentials", "-target", "http://192.0.2.1:8080", "-client-id", "a", "-client-secret", "b"}, io.Discard, io.Discard)
	if _, ok := err.(usageError); !ok {
		t.Errorf("non-loopback target: err = %v, want a usage error", err)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{50: 50 * time.Millisecond, 90: 90 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond} {
		if got := percentile(d, p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if percentile(d[:1], 99) != time.Millisecond {
		t.Error("one sample")
	}
}

// TestSSOConsent runs the returning third-party user: consent allowed once
// per browser, then codes without the consent page (silent with the https
// redirect, one tap with the private-use one), each ID token checked.
func TestSSOConsent(t *testing.T) {
	tg := newTargetWith(t, nil)
	base := []string{"-mode", "sso-consent", "-target", tg.url, "-c", "4", "-n", "40", "-client-id", tg.thirdParty, "-password", testPassword}
	res := runJSON(t, append(base, "-redirect-uri", httpsRedirect)...)
	if res.Failed != 0 || len(res.Errors) != 0 || res.Iterations != 40 {
		t.Fatalf("iterations %d, failed %d: %v", res.Iterations, res.Failed, res.Errors)
	}
	var got []string
	for _, s := range res.Steps {
		got = append(got, s.Step)
		if s.OK != 40 {
			t.Errorf("step %+v", s)
		}
	}
	if strings.Join(got, ",") != "authorize,token,flow" {
		t.Errorf("steps %v", got)
	}
	if !strings.Contains(res.Prepared, "showed the consent page by itself") {
		t.Errorf("prepared: %q (the first sign-in should have shown the consent page)", res.Prepared)
	}
	if !strings.Contains(res.Note, "no return visit showed the consent page") || strings.Contains(res.Note, "one-tap") {
		t.Errorf("note: %q", res.Note)
	}

	// The private-use redirect: the one-tap page, never the consent page.
	res = runJSON(t, append(base, "-n", "8")...)
	if res.Failed != 0 || !strings.Contains(res.Note, "8 showed the one-tap page") {
		t.Errorf("private-use redirect: failed %d %v, note %q", res.Failed, res.Errors, res.Note)
	}
	// The consent is remembered from the first run now.
	if !strings.Contains(res.Prepared, "showed no consent page") {
		t.Errorf("second run prepared: %q", res.Prepared)
	}

	// Without openid there is no ID token to check.
	err := run(t.Context(), append(base, "-scope", "offline_access"), io.Discard, io.Discard)
	if _, ok := err.(usageError); !ok {
		t.Errorf("scope without openid: err = %v, want a usage error", err)
	}
}

// TestBurst runs exchanges, then a burst of sign-ins alongside them.
func TestBurst(t *testing.T) {
	tg := newTargetWith(t, nil)
	res := runJSON(t, "-mode", "burst", "-target", tg.url, "-c", "4", "-d", "1s", "-mint-time", "300ms", "-burst", "5",
		"-client-id", tg.public, "-password", testPassword)
	if res.Failed != 0 || len(res.Errors) != 0 {
		t.Fatalf("failed %d: %v", res.Failed, res.Errors)
	}
	b := res.Burst
	if b == nil {
		t.Fatalf("no burst result: %+v", res)
	}
	if b.SignIns != 5 || b.SignInsOK != 5 || b.IdleN == 0 || b.BurstN == 0 || b.IdleP99 <= 0 || b.BurstP99 <= 0 || b.Ratio <= 0 {
		t.Errorf("burst %+v", b)
	}
	if b.IdleS < 0.45 || b.IdleS > 2 {
		t.Errorf("before the burst: %.2fs, want about half of -d", b.IdleS)
	}
	var got []string
	for _, s := range res.Steps {
		got = append(got, s.Step)
	}
	if strings.Join(got, ",") != "token,token-burst,signin" || res.Steps[2].OK != 5 || res.Steps[0].OK != b.IdleN {
		t.Errorf("steps %+v", res.Steps)
	}
	if res.Steps[0].OK+res.Steps[1].OK != int(res.Iterations) {
		t.Errorf("iterations %d, exchanges %d + %d", res.Iterations, res.Steps[0].OK, res.Steps[1].OK)
	}
	if !strings.Contains(res.Note, "ratio") {
		t.Errorf("note %q", res.Note)
	}
	t.Log(res.Note)
	f := filepath.Join(t.TempDir(), "burst.json")
	data, _ := json.Marshal(res)
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"report", f}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| burst | 4 |", "### Exchanges during a burst of password sign-ins", "| 4 | 5 | 5 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}

	err := run(t.Context(), []string{"-mode", "burst", "-target", tg.url, "-n", "5", "-client-id", tg.public, "-password", testPassword}, io.Discard, io.Discard)
	if _, ok := err.(usageError); !ok {
		t.Errorf("burst with -n: err = %v, want a usage error", err)
	}
}

// TestCheckIDToken checks that what sso-consent verifies is verified.
func TestCheckIDToken(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{o: &options{ClientID: "client-1"}, oidc: &oidcState{issuer: "http://issuer", keys: map[string]any{"k1": &key.PublicKey}, fetched: time.Now()}}
	sign := func(header, claims map[string]any) string {
		enc := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
		in := enc(header) + "." + enc(claims)
		sum := sha256.Sum256([]byte(in))
		rr, ss, err := ecdsa.Sign(rand.Reader, key, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		sig := make([]byte, 64)
		rr.FillBytes(sig[:32])
		ss.FillBytes(sig[32:])
		return in + "." + base64.RawURLEncoding.EncodeToString(sig)
	}
	good := func() (map[string]any, map[string]any) {
		return map[string]any{"alg": "ES256", "kid": "k1"},
			map[string]any{"iss": "http://issuer", "sub": "s", "aud": []string{"client-1"}, "exp": time.Now().Add(time.Hour).Unix(), "nonce": "n1"}
	}
	h, c := good()
	if err := r.checkIDToken(t.Context(), sign(h, c), "n1", true); err != nil {
		t.Fatalf("good token: %v", err)
	}
	c["aud"] = "client-1" // a single string is an audience too
	if err := r.checkIDToken(t.Context(), sign(h, c), "n1", true); err != nil {
		t.Fatalf("aud as a string: %v", err)
	}
	for name, c := range map[string]func(h, c map[string]any){
		"nonce mismatch": func(_, c map[string]any) { c["nonce"] = "other" },
		"aud lacks":      func(_, c map[string]any) { c["aud"] = []string{"someone-else"} },
		"iss is not":     func(_, c map[string]any) { c["iss"] = "http://evil" },
		"expired":        func(_, c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() },
		"no sub":         func(_, c map[string]any) { delete(c, "sub") },
		"bad ES256":      func(h, _ map[string]any) { h["alg"] = "RS256" },
	} {
		h, cl := good()
		c(h, cl)
		err := r.checkIDToken(t.Context(), sign(h, cl), "n1", true)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	// A payload changed after signing.
	h, c = good()
	tok := sign(h, c)
	parts := strings.Split(tok, ".")
	c["sub"] = "mallory"
	b, _ := json.Marshal(c)
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	if err := r.checkIDToken(t.Context(), strings.Join(parts, "."), "n1", true); err == nil || !strings.Contains(err.Error(), "bad ES256 signature") {
		t.Errorf("tampered payload: err = %v", err)
	}
	if err := r.checkIDToken(t.Context(), "", "n1", true); err == nil {
		t.Error("no id_token accepted")
	}
	// Without sig, the claims are still checked, the signature not.
	if err := r.checkIDToken(t.Context(), strings.Join(parts, "."), "n1", false); err != nil {
		t.Errorf("claims only: %v", err)
	}
	h, c = good()
	c["nonce"] = "other"
	if err := r.checkIDToken(t.Context(), sign(h, c), "n1", false); err == nil {
		t.Error("claims only: nonce mismatch accepted")
	}
}

func TestErrorKeyEOF(t *testing.T) {
	err := &url.Error{Op: "Post", URL: "http://127.0.0.1/x", Err: io.EOF}
	if got := errorKey(err); got != "connection closed by the server (EOF)" {
		t.Errorf("errorKey(EOF) = %q", got)
	}
}

// TestBurstVerdict: failed exchanges are not in the p99s, so they fail the
// target whatever the ratio.
func TestBurstVerdict(t *testing.T) {
	b := &burstResult{SignIns: 200, IdleP99: 10, BurstP99: 15, Ratio: 1.5}
	if v := b.verdict(); v != "met" {
		t.Errorf("verdict %q", v)
	}
	b.BurstFailed = 3
	if v := b.verdict(); v != "missed: exchanges failed" || !strings.Contains(b.note(), "3 during it") {
		t.Errorf("verdict %q, note %q", v, b.note())
	}
	b.BurstFailed, b.Ratio = 0, 2.5
	if v := b.verdict(); v != "missed" {
		t.Errorf("verdict %q", v)
	}
}

// TestReportCeilingMean: a ceiling measured twice at one concurrency (before
// and after the replay modes) counts as the mean of both runs.
func TestReportCeilingMean(t *testing.T) {
	var out bytes.Buffer
	writeReport(&out, []*result{
		{Mode: "ceiling-http", Label: "ceiling-http (before)", Concurrency: 16, Rate: 9000},
		{Mode: "replay", Concurrency: 16, Rate: 5000},
		{Mode: "ceiling-http", Label: "ceiling-http (after)", Concurrency: 16, Rate: 11000},
		{Mode: "replay", Concurrency: 64, Rate: 5000},
		{Mode: "ceiling-http", Concurrency: 64, Rate: 8000},
	})
	for _, want := range []string{"| replay | 16 | 5000 |", "| 50% |", "| ceiling-http (before) | 16 | 9000 |", "| 90% |", "| 110% |", "| replay | 64 | 5000 |", "| 62% |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
