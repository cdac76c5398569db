package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/authd/authd/exchangecache/redistest"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres/pgtest"
)

var (
	publicAddrRe = regexp.MustCompile(`"msg":"authd listening","addr":"(127\.0\.0\.1:\d+)"`)
	opsAddrRe    = regexp.MustCompile(`"msg":"operations listening","addr":"(127\.0\.0\.1:\d+)"`)
)

// readyz probes the operations listener: status code and body.
func readyz(t *testing.T, opsAddr string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get("http://" + opsAddr + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	body := map[string]string{}
	_ = json.Unmarshal([]byte(readAll(t, resp)), &body)
	return resp.StatusCode, body
}

// seedSignIn adds a user and a public client to the database at dsn.
func seedSignIn(t *testing.T, dsn string) {
	t.Helper()
	store, closeStore, err := openStore(t.Context(), dsn, true)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	hash, _ := bcrypt.GenerateFromPassword([]byte("ops-password-1"), bcrypt.MinCost)
	if err := store.CreateUser(t.Context(), &storage.User{Username: "ops", PasswordHash: hash, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := store.CreateClient(t.Context(), &storage.Client{
		ID: "ops-app", RedirectURIs: []string{"http://127.0.0.1/cb"}, TokenEndpointAuthMethod: "none",
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		Scopes: []string{"openid", "offline_access"}, SkipConsent: true, CreatedAt: time.Now(), UpdatedAt: time.Now(),
	}); err != nil {
		t.Fatal(err)
	}
}

// signIn completes a sign-in and a token exchange against base.
func signIn(t *testing.T, base string) {
	t.Helper()
	verifier := "ops-" + strings.Repeat("v", 50)
	q := url.Values{
		"response_type": {"code"}, "client_id": {"ops-app"}, "redirect_uri": {"http://127.0.0.1:43211/cb"},
		"scope": {"openid offline_access"}, "state": {"state-ops-1"},
		"code_challenge": {s256(verifier)}, "code_challenge_method": {"S256"},
	}
	loc := followLogin(t, base+"/oauth2/authorize?"+q.Encode(), "ops", "ops-password-1")
	status, body := postToken(t, base+"/oauth2/token", url.Values{
		"grant_type": {"authorization_code"}, "client_id": {"ops-app"}, "code": {loc.Query().Get("code")},
		"code_verifier": {verifier}, "redirect_uri": {"http://127.0.0.1:43211/cb"},
	})
	if status != 200 || body["access_token"] == nil {
		t.Fatalf("exchange: %d %v", status, body)
	}
}

// countLines counts the log lines matching all of the substrings.
func countLines(log string, subs ...string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		all := l != ""
		for _, s := range subs {
			all = all && strings.Contains(l, s)
		}
		if all {
			n++
		}
	}
	return n
}

// TestServeRedisDown: with its Redis killed, authd serve stays ready
// (/readyz 200, "cache":"degraded", authd_dependency_up{replay_cache} 0),
// sign-ins work, and a probe storm writes one Redis warning, not one per
// probe (go-redis's own logger included). /metrics is on the operations
// listener only.
func TestServeRedisDown(t *testing.T) {
	dsn := pgtest.DSN(t)
	seedSignIn(t, dsn)
	redisAddr, stopRedis := redistest.Start(t)
	e := map[string]string{"AUTHD_SECRET": strings.Repeat("r", 40), "AUTHD_DATABASE_URL": dsn, "AUTHD_JANITOR": "off"}
	_, stderr := startCommand(t, []string{"serve", "-addr", "127.0.0.1:0", "-redis-url", "redis://" + redisAddr}, e, publicAddrRe)
	base := "http://" + publicAddrRe.FindStringSubmatch(stderr.String())[1]
	opsAddr := opsAddrRe.FindStringSubmatch(stderr.String())[1]

	if code, body := readyz(t, opsAddr); code != 200 || body["cache"] != "ok" || body["database"] != "ok" {
		t.Fatalf("/readyz with Redis up: %d %v", code, body)
	}
	signIn(t, base)

	stopRedis()
	// A probe storm: 16 probers for 2 s (a probe waits for Redis's 150 ms
	// call timeout at most).
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		probes int
		bad    []string
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := time.Now(); time.Since(start) < 2*time.Second; {
				resp, err := http.Get("http://" + opsAddr + "/readyz")
				if err != nil {
					mu.Lock()
					bad = append(bad, err.Error())
					mu.Unlock()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				probes++
				if resp.StatusCode != 200 || !strings.Contains(string(b), `"cache":"degraded"`) || !strings.Contains(string(b), `"database":"ok"`) {
					bad = append(bad, fmt.Sprintf("%d %s", resp.StatusCode, b))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("/readyz with Redis down: %d bad answers of %d, e.g. %s", len(bad), probes, bad[0])
	}
	log := stderr.String()
	t.Logf("%d probes in 2 s with Redis down", probes)
	if n := otherWarnings(log); n != 1 || countLines(log, `"level":"WARN"`, "replay cache (Redis) unreachable") != 1 {
		t.Errorf("%d warnings for %d probes in 2 s, want 1 (the readiness probe's):\n%s", n, probes, log)
	}
	if n := countLines(log, `"source":"go-redis"`); n > 1 {
		t.Errorf("%d go-redis lines, want at most 1 per 10 s", n)
	}

	signIn(t, base) // fails open: retries are answered from PostgreSQL
	signIn(t, base)
	log = stderr.String()
	limitWarnings := countLines(log, `"level":"WARN"`, "limits: Redis did not answer")
	if n := otherWarnings(log) - limitWarnings; n != 1 {
		t.Errorf("after 2 sign-ins: %d warnings, want still the 1 per 10 s (the cache reports its health once, for readiness and exchanges alike):\n%s", n, log)
	}
	if limitWarnings > 1 {
		t.Errorf("after 2 sign-ins: %d warnings of the abuse limits' fallback, want at most 1 per 10 s:\n%s", limitWarnings, log)
	}

	resp, err := http.Get("http://" + opsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if m := readAll(t, resp); !strings.Contains(m, `authd_dependency_up{dependency="replay_cache"} 0`) || !strings.Contains(m, `authd_ready 1`) {
		t.Errorf("/metrics on the operations listener lacks the readiness gauges")
	} else {
		// The sign-ins went to PostgreSQL and (before the kill) Redis.
		for _, name := range []string{"authd_db_statements_total", "authd_db_round_trips_total", "authd_redis_commands_total", "authd_redis_round_trips_total"} {
			if !regexp.MustCompile(`(?m)^` + name + ` [1-9]`).MatchString(m) {
				t.Errorf("/metrics: no positive %s", name)
			}
		}
	}
	for _, path := range []string{"/metrics", "/readyz", "/healthz", "/debug/pprof/"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s on the public listener: %d, want 404", path, resp.StatusCode)
		}
	}
}

// tcpProxy forwards connections to target until cut: then it refuses new
// ones and drops the open ones, as a database outage would.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			cut := p.cut
			p.mu.Unlock()
			if cut {
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *tcpProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// TestServeDatabaseDown: when PostgreSQL stops answering, /readyz is 503
// ("database":"unavailable"); when it answers again, 200.
func TestServeDatabaseDown(t *testing.T) {
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	q := u.Query()
	q.Set("connect_timeout", "1")
	u.RawQuery = q.Encode()
	e := map[string]string{"AUTHD_SECRET": strings.Repeat("d", 40), "AUTHD_DATABASE_URL": u.String(), "AUTHD_JANITOR": "off"}
	_, stderr := startCommand(t, []string{"serve", "-addr", "127.0.0.1:0"}, e, publicAddrRe)
	opsAddr := opsAddrRe.FindStringSubmatch(stderr.String())[1]
	if code, body := readyz(t, opsAddr); code != 200 || body["cache"] != "ok" {
		t.Fatalf("/readyz: %d %v", code, body)
	}
	proxy.setCut(true)
	for range 3 {
		if code, body := readyz(t, opsAddr); code != 503 || body["database"] != "unavailable" || body["status"] != "not_ready" {
			t.Fatalf("/readyz with the database down: %d %v", code, body)
		}
	}
	proxy.setCut(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := readyz(t, opsAddr)
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the database came back: %d %v", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := countLines(stderr.String(), `"level":"WARN"`, "database unreachable"); n != 1 {
		t.Errorf("%d database warnings, want 1", n)
	}
}

// TestServeSIGTERMDrains: on SIGTERM, /readyz turns 503 while the public
// listener still serves; then the process exits 0 and the listener is
// closed.
func TestServeSIGTERMDrains(t *testing.T) {
	bin := buildAuthd(t)
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "AUTHD_DATABASE_URL=memory", "AUTHD_SECRET="+strings.Repeat("t", 40),
		"AUTHD_ADDR=127.0.0.1:0", "AUTHD_OPS_ADDR=127.0.0.1:0", "AUTHD_DRAIN_DELAY=1s", "AUTHD_REDIS_URL=memory")
	var log syncBuffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.Now().Add(15 * time.Second)
	for !publicAddrRe.MatchString(log.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	base := "http://" + publicAddrRe.FindStringSubmatch(log.String())[1]
	opsAddr := opsAddrRe.FindStringSubmatch(log.String())[1]
	if code, _ := readyz(t, opsAddr); code != 200 {
		t.Fatalf("/readyz before SIGTERM: %d", code)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var sawDraining bool
	for time.Now().Before(deadline) {
		code, body := readyz(t, opsAddr)
		if code == 503 && body["status"] == "draining" {
			sawDraining = true
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !sawDraining {
		t.Fatal("/readyz never turned 503 after SIGTERM")
	}
	// Readiness is 503 and the public listener still answers.
	resp, err := http.Get(base + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatalf("public listener closed while readiness was already 503? %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("metadata while draining: %d", resp.StatusCode)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM:\n%s", err, log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/.well-known/oauth-authorization-server", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the public listener still answers after exit")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Logf("after exit: %v", err)
	}
	if !strings.Contains(log.String(), `"msg":"draining: readiness is 503`) {
		t.Errorf("no draining line in the log:\n%s", log.String())
	}
}
