package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authd/authd/storage/postgres/pgtest"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// TestConfigErrors: invalid configuration is one clear line naming the
// setting, and a usage error (exit status 2).
func TestConfigErrors(t *testing.T) {
	secret := strings.Repeat("s", 32)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no command", nil, nil, "no command"},
		{"unknown command", []string{"frobnicate"}, nil, "unknown command"},
		{"missing database url", []string{"serve"}, map[string]string{"AUTHD_SECRET": secret}, "AUTHD_DATABASE_URL"},
		{"missing secret", []string{"serve"}, nil, "AUTHD_SECRET"},
		{"short secret", []string{"serve"}, map[string]string{"AUTHD_SECRET": "short"}, "AUTHD_SECRET"},
		{"bad database url", []string{"serve"}, map[string]string{"AUTHD_SECRET": secret, "AUTHD_DATABASE_URL": "mysql://x"}, "AUTHD_DATABASE_URL"},
		{"bad redis url", []string{"serve"}, map[string]string{"AUTHD_SECRET": secret, "AUTHD_REDIS_URL": "http://x"}, "AUTHD_REDIS_URL"},
		{"bad duration in env", []string{"serve"}, map[string]string{"AUTHD_SECRET": secret, "AUTHD_CODE_TTL": "soon"}, "AUTHD_CODE_TTL"},
		{"duration without unit", []string{"serve"}, map[string]string{"AUTHD_SECRET": secret, "AUTHD_CODE_TTL": "60"}, "60s"},
		{"issuer not a URL", []string{"serve", "-issuer", "login.example.com"}, map[string]string{"AUTHD_SECRET": secret}, "AUTHD_ISSUER"},
		{"too short ttl", []string{"serve", "-access-token-ttl", "10ms"}, map[string]string{"AUTHD_SECRET": secret}, "AUTHD_ACCESS_TOKEN_TTL"},
		{"negative window", []string{"serve"}, map[string]string{"AUTHD_SECRET": secret, "AUTHD_REPLAY_WINDOW": "-1s"}, "AUTHD_REPLAY_WINDOW"},
		{"unknown flag", []string{"serve", "-nope"}, nil, "nope"},
		{"flag wins over env", []string{"serve", "-secret", "short"}, map[string]string{"AUTHD_SECRET": secret}, "AUTHD_SECRET"},
		{"bad addr", []string{"serve", "-addr", "256.1.1.1:99999"}, map[string]string{"AUTHD_SECRET": secret}, "AUTHD_ADDR"},
		{"migrate needs postgres", []string{"migrate", "up"}, nil, "AUTHD_DATABASE_URL"},
		{"users add -h is not a username", []string{"users", "add", "-x"}, nil, "usage"},
		{"bad log level", []string{"serve", "-log-level", "loud"}, map[string]string{"AUTHD_SECRET": secret}, "AUTHD_LOG_LEVEL"},
		{"retired pprof address", []string{"serve"}, map[string]string{"AUTHD_SECRET": secret, "AUTHD_PPROF_ADDR": "127.0.0.1:6060"}, "AUTHD_PPROF=on"},
		{"bad pprof switch", []string{"serve", "-pprof", "yes"}, map[string]string{"AUTHD_SECRET": secret}, "AUTHD_PPROF"},
		{"bad ops addr", []string{"serve", "-ops-addr", "9090"}, map[string]string{"AUTHD_SECRET": secret}, "AUTHD_OPS_ADDR"},
		{"ops addr in use", []string{"serve", "-addr", "127.0.0.1:0", "-ops-addr", "256.0.0.1:1"}, map[string]string{"AUTHD_SECRET": secret}, "AUTHD_OPS_ADDR"},
		{"bad drain delay", []string{"serve", "-drain-delay", "-1s"}, map[string]string{"AUTHD_SECRET": secret}, "AUTHD_DRAIN_DELAY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			e := map[string]string{}
			for k, v := range tt.env {
				e[k] = v
			}
			if _, ok := e["AUTHD_DATABASE_URL"]; !ok && tt.want != "AUTHD_DATABASE_URL" && len(tt.args) > 0 && tt.args[0] == "serve" {
				e["AUTHD_DATABASE_URL"] = "memory"
			}
			err := run(t.Context(), tt.args, env(e), strings.NewReader(""), &out, &errOut)
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a usage error", err)
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %q, want one line mentioning %q", err, tt.want)
			}
		})
	}
}

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	authURLRe  = regexp.MustCompile(`(http://127\.0\.0\.1:\d+/oauth2/authorize\?\S+)`)
	verifierRe = regexp.MustCompile(`code_verifier\s+(\S+)`)
	csrfRe     = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)
	actionRe   = regexp.MustCompile(`<form method="post" action="([^"]+)"`)
)

// startCommand runs args in the background until the test ends and waits
// for pattern to appear on stdout or stderr.
//
// serve and dev get an ephemeral operations port and no drain delay unless
// args name them, so tests run in parallel and stop at once.
func startCommand(t *testing.T, args []string, e map[string]string, pattern *regexp.Regexp) (*syncBuffer, *syncBuffer) {
	t.Helper()
	if args[0] == "serve" || args[0] == "dev" {
		if !slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "ops-addr") }) {
			args = append(slices.Clone(args), "-ops-addr", "127.0.0.1:0")
		}
		if !slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "drain-delay") }) {
			args = append(slices.Clone(args), "-drain-delay", "0")
		}
	}
	return runUntil(t, args, e, pattern)
}

// runUntil is startCommand without the test defaults: it runs args in the
// background, with e as the environment (its names too, as main passes
// them), until the test ends, and waits for pattern on stdout or stderr.
func runUntil(t *testing.T, args []string, e map[string]string, pattern *regexp.Regexp) (*syncBuffer, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(withEnvNames(context.Background(), slices.Collect(maps.Keys(e))))
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, env(e), strings.NewReader(""), &stdout, &stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%v: graceful shutdown returned %v", args, err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("%v did not shut down", args)
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for !pattern.MatchString(stdout.String()) && !pattern.MatchString(stderr.String()) {
		select {
		case err := <-done:
			t.Fatalf("%v exited early: %v\n%s\n%s", args, err, stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v: no %s in output:\n%s\n%s", args, pattern, stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &stdout, &stderr
}

// followLogin completes the printed authorization URL as a browser would:
// login form, consent, redirect to the callback.
func followLogin(t *testing.T, authURL, user, password string) *url.URL {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	u, _ := url.Parse(authURL)
	base := u.Scheme + "://" + u.Host
	resp, err := c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	for _, step := range []url.Values{
		{"step": {"login"}, "username": {user}, "password": {password}},
		{"step": {"consent"}, "decision": {"allow"}},
	} {
		if resp.StatusCode == http.StatusSeeOther {
			break
		}
		csrf, action := csrfRe.FindStringSubmatch(body), actionRe.FindStringSubmatch(body)
		if csrf == nil || action == nil {
			t.Fatalf("no form: %d %s", resp.StatusCode, body)
		}
		step.Set("csrf_token", csrf[1])
		if m := regexp.MustCompile(`name="session" value="([^"]*)"`).FindStringSubmatch(body); m != nil {
			step.Set("session", m[1]) // binds the consent form to the session shown
		}
		a := strings.NewReplacer("&amp;", "&", "&#43;", "+").Replace(action[1])
		req, _ := http.NewRequest(http.MethodPost, base+a, strings.NewReader(step.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if resp, err = c.Do(req); err != nil {
			t.Fatal(err)
		}
		body = readAll(t, resp)
	}
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("no redirect after login: %d %s", resp.StatusCode, body)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func postToken(t *testing.T, tokenURL string, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(tokenURL, form)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	_ = json.Unmarshal([]byte(readAll(t, resp)), &out)
	return resp.StatusCode, out
}

// TestDevPrintedURLCompletesLogin: "authd dev" prints an authorization URL
// that completes a login, and the code it yields redeems (twice: the
// replay cache answers the duplicate with the same tokens).
func TestDevPrintedURLCompletesLogin(t *testing.T) {
	stdout, _ := startCommand(t, []string{"dev", "-addr", "127.0.0.1:0"}, nil, regexp.MustCompile(`Ctrl-C`))
	out := stdout.String()
	authURL := authURLRe.FindStringSubmatch(out)[1]
	verifier := verifierRe.FindStringSubmatch(out)[1]
	loc := followLogin(t, authURL, demoUser, demoPassword)
	if !strings.HasSuffix(loc.Path, "/demo/callback") || loc.Query().Get("code") == "" {
		t.Fatalf("redirect %s", loc)
	}
	// The callback page renders.
	resp, err := http.Get(loc.String())
	if err != nil {
		t.Fatal(err)
	}
	if page := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(page, "code_verifier="+verifier) {
		t.Fatalf("callback page: %d %s", resp.StatusCode, page)
	}
	form := url.Values{
		"grant_type": {"authorization_code"}, "client_id": {demoClientID}, "code": {loc.Query().Get("code")},
		"code_verifier": {verifier}, "redirect_uri": {loc.Scheme + "://" + loc.Host + loc.Path},
	}
	tokenURL := loc.Scheme + "://" + loc.Host + "/oauth2/token"
	s1, b1 := postToken(t, tokenURL, form)
	s2, b2 := postToken(t, tokenURL, form)
	if s1 != 200 || s2 != 200 || b1["access_token"] != b2["access_token"] || b1["access_token"] == nil {
		t.Fatalf("exchange: %d %v / %d %v", s1, b1, s2, b2)
	}
}

// TestPostgresCommands: migrate, users add, clients add and serve on
// PostgreSQL; serve refuses a schema that is behind.
func TestPostgresCommands(t *testing.T) {
	secret := strings.Repeat("k", 40)
	empty := pgtest.EmptyDSN(t)
	var out, errOut bytes.Buffer
	err := run(t.Context(), []string{"serve", "-addr", "127.0.0.1:0"}, env(map[string]string{"AUTHD_SECRET": secret, "AUTHD_DATABASE_URL": empty}), nil, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "authd migrate up") {
		t.Fatalf("serve on an unmigrated database: %v", err)
	}

	dsn := empty
	e := map[string]string{"AUTHD_SECRET": secret, "AUTHD_DATABASE_URL": dsn, "AUTHD_ADMIN_TOKEN": "adm"}
	out.Reset()
	if err := run(t.Context(), []string{"migrate", "up"}, env(e), nil, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "up to date") {
		t.Fatalf("migrate up: %s", out.String())
	}
	if err := run(t.Context(), []string{"users", "add", "bob"}, env(e), strings.NewReader("bob-password-1\n"), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), []string{"users", "add", "bob"}, env(e), strings.NewReader("bob-password-1\n"), &out, &errOut); err == nil {
		t.Fatal("adding a user twice succeeded")
	}
	out.Reset()
	meta := `{"client_name":"CLI app","redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none","scope":"openid offline_access","skip_consent":true}`
	if err := run(t.Context(), []string{"clients", "add"}, env(e), strings.NewReader(meta), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var info struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := json.Unmarshal(out.Bytes(), &info); err != nil || info.ClientID == "" || info.ClientSecret != "" {
		t.Fatalf("clients add output %q (%v)", out.String(), err)
	}
	if err := run(t.Context(), []string{"clients", "add"}, env(e), strings.NewReader(`{"redirect_uris":["http://localhost/cb"]}`), &out, &errOut); err == nil || !strings.Contains(err.Error(), "invalid_redirect_uri") {
		t.Fatalf("localhost redirect accepted: %v", err)
	}

	_, stderr := startCommand(t, []string{"serve", "-addr", "127.0.0.1:0", "-redis-url", "memory"}, e, regexp.MustCompile(`"msg":"authd listening","addr":"127\.0\.0\.1:\d+"`))
	addr := regexp.MustCompile(`"msg":"authd listening","addr":"(127\.0\.0\.1:\d+)"`).FindStringSubmatch(stderr.String())[1]
	base := "http://" + addr
	verifier := "v-" + strings.Repeat("x", 50)
	q := url.Values{
		"response_type": {"code"}, "client_id": {info.ClientID}, "redirect_uri": {"http://127.0.0.1:43210/cb"},
		"scope": {"openid offline_access"}, "state": {"state-1234"},
		"code_challenge": {s256(verifier)}, "code_challenge_method": {"S256"},
	}
	loc := followLogin(t, base+"/oauth2/authorize?"+q.Encode(), "bob", "bob-password-1")
	if loc.Host != "127.0.0.1:43210" || loc.Query().Get("code") == "" {
		t.Fatalf("redirect %s (a port-less loopback registration matches any port, RFC 8252 §7.3)", loc)
	}
	status, body := postToken(t, base+"/oauth2/token", url.Values{
		"grant_type": {"authorization_code"}, "client_id": {info.ClientID}, "code": {loc.Query().Get("code")},
		"code_verifier": {verifier}, "redirect_uri": {"http://127.0.0.1:43210/cb"},
	})
	if status != 200 || body["refresh_token"] == nil {
		t.Fatalf("exchange on PostgreSQL: %d %v", status, body)
	}
	if strings.Contains(stderr.String(), verifier) || strings.Contains(stderr.String(), loc.Query().Get("code")) || strings.Contains(stderr.String(), body["access_token"].(string)) {
		t.Fatal("a secret value appears in the server log")
	}
}

func s256(v string) string {
	h := sha256.Sum256([]byte(v))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// TestParseRedisURL: AUTHD_REDIS_URL selects a single node, a Redis Cluster
// or Sentinel.
func TestParseRedisURL(t *testing.T) {
	tests := []struct {
		raw     string
		addrs   []string
		master  string
		db      int
		tls     bool
		wantErr bool
	}{
		{raw: "redis://127.0.0.1:6379/2", addrs: []string{"127.0.0.1:6379"}, db: 2},
		{raw: "redis://cache.internal", addrs: []string{"cache.internal:6379"}},
		{raw: "redis://u:p@a:7000,b:7001,c:7002", addrs: []string{"a:7000", "b:7001", "c:7002"}},
		{raw: "redis://s1:26379,s2:26379/1?master_name=mymaster", addrs: []string{"s1:26379", "s2:26379"}, master: "mymaster", db: 1},
		{raw: "rediss://cache.example.com:6380/0", addrs: []string{"cache.example.com:6380"}, tls: true},
		{raw: "http://x", wantErr: true},
		{raw: "redis://", wantErr: true},
		{raw: "redis://a:1/x", wantErr: true},
		{raw: "redis://a:1,b:2/3", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			o, err := parseRedisURL(tt.raw)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("accepted %q", tt.raw)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(o.Addrs, " ") != strings.Join(tt.addrs, " ") || o.MasterName != tt.master || o.DB != tt.db || (o.TLSConfig != nil) != tt.tls {
				t.Fatalf("got addrs=%v master=%q db=%d tls=%v", o.Addrs, o.MasterName, o.DB, o.TLSConfig != nil)
			}
			if !o.ContextTimeoutEnabled || o.MaxRetries != -1 {
				t.Fatal("calls must be bounded by their context and never retried")
			}
			if o.ReadTimeout != 150*time.Millisecond || o.WriteTimeout != 150*time.Millisecond {
				t.Fatalf("read/write timeouts %v/%v, want 150ms (the automatic pipeliner ignores contexts)", o.ReadTimeout, o.WriteTimeout)
			}
		})
	}
}
