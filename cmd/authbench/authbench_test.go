package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/oauth"
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
	return newTargetWith(t, nil)
}

// newTargetWith is newTarget with wrap (if not nil) around authd's handler.
func newTargetWith(t *testing.T, wrap func(http.Handler) http.Handler) (url, public, service, serviceSecret string) {
	t.Helper()
	store := memory.New()
	srv := httptest.NewUnstartedServer(nil)
	app, err := oauth.New(oauth.Config{Issuer: "http://" + srv.Listener.Addr().String(), Secret: []byte(testSecret)},
		oauth.Deps{Store: store, Cache: exchangecache.NewMemory(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Passwords: password.New(password.Options{Params: password.Params{Memory: 64, Time: 1, Threads: 1}})})
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
	return srv.URL, pub.ClientID, svc.ClientID, svc.ClientSecret
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
	// One exchange's statements (BEGIN, two reads; five writes, COMMIT)
	// in its two round trips (batches).
	if res.DBStatements == nil || *res.DBStatements != 9 || res.DBRoundTrips == nil || *res.DBRoundTrips < 2 {
		t.Errorf("ceiling-db per iteration: %s statements, %s round trips; want 9 and at least 2", perIter(res.DBStatements), perIter(res.DBRoundTrips))
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
