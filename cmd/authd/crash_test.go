package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/authd/authd/exchangecache/redistest"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// freeAddr returns a loopback address with a port free at the moment.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// authdProcess is one "authd serve" process of a test.
type authdProcess struct {
	cmd  *exec.Cmd
	base string
	ops  string // the operations listener's address
	log  string // the file holding its stdout and stderr
	done chan error
}

// startAuthd starts bin serve on addr (and a free operations address) with
// env plus extra, and waits until it answers /healthz.
func startAuthd(t *testing.T, bin, addr string, env, extra []string) *authdProcess {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "authd.log"))
	if err != nil {
		t.Fatal(err)
	}
	p := &authdProcess{base: "http://" + addr, log: f.Name(), done: make(chan error, 1)}
	opsAddr := freeAddr(t)
	p.ops = opsAddr
	p.cmd = exec.Command(bin, "serve")
	p.cmd.Env = append(append(append([]string(nil), env...), "AUTHD_ADDR="+addr, "AUTHD_OPS_ADDR="+opsAddr), extra...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait(); f.Close() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + opsAddr + "/healthz"); err == nil {
			resp.Body.Close()
			return p
		}
		select {
		case err := <-p.done:
			// It ended before answering: a fault the test injected may
			// have fired first. The caller reads p.done.
			p.done <- err
			return p
		default:
		}
	}
	log, _ := os.ReadFile(f.Name())
	t.Fatalf("authd on %s did not come up:\n%s", addr, log)
	return nil
}

// waitKilled waits up to wait for the process to end by SIGKILL (a fault
// of the fault-injection build fired), and fails t with timeout if it has
// not ended by then. The result goes back to p.done for the cleanup.
func (p *authdProcess) waitKilled(t *testing.T, wait time.Duration, timeout string) {
	t.Helper()
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("process A ended with %v, want SIGKILL", err)
		}
		p.done <- err
	case <-time.After(wait):
		t.Fatal(timeout)
	}
}

// buildAuthd builds authd with the build tags given (authd_faults: fault
// injection, faults.go), once per set of tags for the whole test binary:
// a dozen tests run authd processes, and each link of the binary costs
// seconds of CPU. The binaries live in a directory TestMain removes.
func buildAuthd(t *testing.T, tags ...string) string {
	t.Helper()
	key := strings.Join(tags, ",")
	builds.mu.Lock()
	b, ok := builds.byTags[key]
	if !ok {
		b = &build{}
		builds.byTags[key] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() { b.path, b.err = goBuildAuthd(key) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

type build struct {
	once sync.Once
	path string
	err  error
}

var builds = struct {
	mu     sync.Mutex
	dir    string // set by TestMain
	byTags map[string]*build
}{byTags: map[string]*build{}}

func goBuildAuthd(tags string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is needed to build authd: %v", err)
	}
	if builds.dir == "" {
		return "", errors.New("buildAuthd: no build directory (TestMain sets it)")
	}
	bin := filepath.Join(builds.dir, "authd-"+strings.ReplaceAll(tags, ",", "-"))
	args := []string{"build"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	if out, err := exec.Command(goBin, append(args, "-o", bin, ".")...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "authd-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	builds.dir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestRetryAfterProcessKilledAfterCommit: two authd processes share one
// PostgreSQL and one Redis. The first is killed with SIGKILL right after
// its exchange commits (before it writes Redis or answers); the client's
// retry, sent to the second, gets the tokens the first committed, which
// are active (docs/architecture.md, "The exchange").
func TestRetryAfterProcessKilledAfterCommit(t *testing.T) {
	dsn := pgtest.DSN(t)
	redisAddr, _ := redistest.Start(t)
	bin := buildAuthd(t, "authd_faults")
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := postgres.New(pool)
	ctx := t.Context()
	hash, _ := bcrypt.GenerateFromPassword([]byte("crash-password"), bcrypt.MinCost)
	if err := store.CreateUser(ctx, &storage.User{Username: "carol", PasswordHash: hash, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	const redirect = "com.example.app:/cb"
	if err := store.CreateClient(ctx, &storage.Client{ID: "app", RedirectURIs: []string{redirect},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		Scopes: []string{"openid", "offline_access"}, TokenEndpointAuthMethod: "none", SkipConsent: true}); err != nil {
		t.Fatal(err)
	}

	env := withoutAuthdEnv()
	env = append(env, "AUTHD_DATABASE_URL="+dsn, "AUTHD_SECRET=crash-test-secret-0123456789-0123456789",
		"AUTHD_REDIS_URL=redis://"+redisAddr+"/0", "AUTHD_ADMIN_TOKEN=adm", "AUTHD_JANITOR=off")
	a := startAuthd(t, bin, freeAddr(t), env, []string{"AUTHD_FAULT=kill-after-commit"})
	b := startAuthd(t, bin, freeAddr(t), env, nil)

	verifier := oauth2.GenerateVerifier()
	conf := &oauth2.Config{ClientID: "app", RedirectURL: redirect, Scopes: []string{"openid", "offline_access"},
		Endpoint: oauth2.Endpoint{AuthURL: a.base + "/oauth2/authorize"}}
	loc := followLogin(t, conf.AuthCodeURL("state-crash-1", oauth2.S256ChallengeOption(verifier)), "carol", "crash-password")
	form := url.Values{"grant_type": {"authorization_code"}, "client_id": {"app"}, "code": {loc.Query().Get("code")},
		"code_verifier": {verifier}, "redirect_uri": {redirect}}

	// The first attempt: A commits, then dies; the client sees a network error.
	if resp, err := http.PostForm(a.base+"/oauth2/token", form); err == nil {
		resp.Body.Close()
		t.Fatalf("the first exchange was answered (%d); the fault did not fire", resp.StatusCode)
	}
	a.waitKilled(t, 10*time.Second, "process A did not die")
	var committed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM access_tokens`).Scan(&committed); err != nil || committed != 1 {
		t.Fatalf("%d access tokens committed by the first attempt (%v), want 1", committed, err)
	}

	// The retry goes to B: the tokens A committed, twice.
	status, first := postToken(t, b.base+"/oauth2/token", form)
	if status != 200 || first["access_token"] == nil {
		t.Fatalf("retry on B: %d %v", status, first)
	}
	status, second := postToken(t, b.base+"/oauth2/token", form)
	if status != 200 || second["access_token"] != first["access_token"] || second["refresh_token"] != first["refresh_token"] {
		t.Fatalf("second retry on B: %d %v, want %v", status, second, first)
	}
	// The ID token A signed before its commit is part of the record: B
	// answers it byte for byte (issue 12 item 4).
	if first["id_token"] == nil || second["id_token"] != first["id_token"] {
		t.Fatalf("retries on B: ID tokens %v and %v, want the one A signed", first["id_token"], second["id_token"])
	}
	var tokens int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM access_tokens`).Scan(&tokens); err != nil || tokens != 1 {
		t.Fatalf("%d access tokens after the retries (%v), want the 1 the first attempt issued", tokens, err)
	}
	req, _ := http.NewRequest(http.MethodPost, b.base+"/oauth2/introspect",
		strings.NewReader(url.Values{"token": {fmt.Sprint(first["access_token"])}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer adm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Active bool `json:"active"`
	}
	_ = json.Unmarshal([]byte(readAll(t, resp)), &in)
	if !in.Active {
		t.Fatal("the token the first attempt issued is not active after the retry")
	}
}
