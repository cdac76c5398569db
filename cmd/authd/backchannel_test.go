package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// logoutCounter is the receivers of a test: the jtis each app received.
type logoutCounter struct {
	mu  sync.Mutex
	got map[string][]string // app → jtis, in arrival order
}

// receiver returns a loopback backchannel_logout_uri for app that records
// each logout token's jti and answers 200.
func (lc *logoutCounter) receiver(t *testing.T, app string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		jws, err := jose.ParseSigned(r.PostFormValue("logout_token"), []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
		var c struct {
			JTI string `json:"jti"`
			Aud string `json:"aud"`
		}
		if err != nil || json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &c) != nil || c.Aud != app {
			http.Error(w, "bad token", http.StatusBadRequest)
			return
		}
		lc.mu.Lock()
		lc.got[app] = append(lc.got[app], c.JTI)
		lc.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/bc"
}

func (lc *logoutCounter) snapshot() map[string][]string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	out := map[string][]string{}
	for k, v := range lc.got {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// TestBackchannelKilledMidFanOut (issue 29): authd is SIGKILLed right
// after the third delivery of a 12-app fan-out is recorded (the
// fault-injection build); a second process finishes the fan-out: every
// remaining app receives its logout token once, and no delivered app
// receives a second. `authd logout-deliveries list` shows the state.
func TestBackchannelKilledMidFanOut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds authd and runs two processes")
	}
	dsn := pgtest.DSN(t)
	bin := buildAuthd(t, "authd_faults")
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := postgres.New(pool)
	ctx := t.Context()
	u := &storage.User{Username: "dora", PasswordHash: []byte("x")}
	if err := store.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	lc := &logoutCounter{got: map[string][]string{}}
	const apps = 12
	now := time.Now().UTC()
	if err := store.CreateSession(ctx, &storage.Session{ID: "sess-1", Subject: u.Subject, AuthTime: now, AMR: []string{"pwd"},
		IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for i := range apps {
		id := fmt.Sprintf("app-%02d", i)
		if err := store.CreateClient(ctx, &storage.Client{ID: id, RedirectURIs: []string{"http://127.0.0.1/cb"},
			GrantTypes: []string{"authorization_code"}, ResponseTypes: []string{"code"}, Scopes: []string{"openid"},
			TokenEndpointAuthMethod: "none", BackchannelLogoutURI: lc.receiver(t, id)}); err != nil {
			t.Fatal(err)
		}
		if err := store.NoteSessionClient(ctx, "sess-1", id); err != nil {
			t.Fatal(err)
		}
	}
	// The sign-out: twelve rows, written by the statement that ends the
	// session, before any process runs.
	if err := store.DeleteSession(ctx, "sess-1"); err != nil {
		t.Fatal(err)
	}

	procEnv := append(withoutAuthdEnv(), "AUTHD_DATABASE_URL="+dsn, "AUTHD_SECRET=backchannel-crash-secret-0123456789-0123",
		"AUTHD_JANITOR=off", "AUTHD_BACKCHANNEL_TIMEOUT=1s", "AUTHD_JOB_LEASE=3s")
	a := startAuthd(t, bin, freeAddr(t), procEnv, []string{"AUTHD_FAULT=kill-after-delivered:3", "AUTHD_BACKCHANNEL_CONCURRENCY=1"})
	a.waitKilled(t, 20*time.Second, "process A was not killed by the fault")
	before := lc.snapshot()
	deliveredByA := 0
	for _, jtis := range before {
		deliveredByA += len(jtis)
	}
	var delivered int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM logout_deliveries WHERE status = 'delivered'`).Scan(&delivered); err != nil {
		t.Fatal(err)
	}
	if delivered != 3 || deliveredByA != 3 {
		t.Fatalf("before the kill: %d rows delivered, %d tokens received; want 3 and 3", delivered, deliveredByA)
	}
	var out, errOut syncBuffer
	cli := map[string]string{"AUTHD_DATABASE_URL": dsn}
	if err := run(ctx, []string{"logout-deliveries", "list", "-status", "pending"}, env(cli), strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("logout-deliveries list: %v %s", err, errOut.String())
	}
	var pending []deliveryView
	if err := json.Unmarshal([]byte(out.String()), &pending); err != nil || len(pending) != apps-3 || pending[0].ClientID == "" || pending[0].URI == "" {
		t.Fatalf("logout-deliveries list -status pending: %v %s", err, out.String())
	}

	// Another process (or the restarted one) finishes the fan-out.
	b := startAuthd(t, bin, freeAddr(t), procEnv, nil)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM logout_deliveries WHERE status = 'pending'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries still pending", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get("http://" + b.ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if m := readAll(t, resp); !strings.Contains(m, `authd_backchannel_deliveries_total{result="delivered"} 9`) ||
		!strings.Contains(m, "authd_backchannel_pending ") {
		t.Errorf("process B's metrics lack its 9 deliveries or the pending gauge:\n%s", grepLines(m, "authd_backchannel"))
	}
	after := lc.snapshot()
	for i := range apps {
		id := fmt.Sprintf("app-%02d", i)
		if len(after[id]) != 1 {
			t.Errorf("%s received %d logout tokens (%v), want exactly 1 (delivered by A: %v)", id, len(after[id]), after[id], before[id] != nil)
		}
	}
}

// TestBackchannelSettings: the AUTHD_BACKCHANNEL_* settings are checked
// with the others, each error naming its setting.
func TestBackchannelSettings(t *testing.T) {
	var out, errOut syncBuffer
	e := map[string]string{"AUTHD_SECRET": strings.Repeat("s", 40), "AUTHD_DATABASE_URL": "memory",
		"AUTHD_BACKCHANNEL_TIMEOUT": "0s", "AUTHD_BACKCHANNEL_GIVE_UP": "-1h", "AUTHD_BACKCHANNEL_CONCURRENCY": "5000"}
	code := exitCode(run(t.Context(), []string{"serve", "-addr", "127.0.0.1:0"}, env(e), strings.NewReader(""), &out, &errOut), &errOut)
	if code != 2 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, s := range []string{"AUTHD_BACKCHANNEL_TIMEOUT", "AUTHD_BACKCHANNEL_GIVE_UP", "AUTHD_BACKCHANNEL_CONCURRENCY"} {
		if !strings.Contains(errOut.String(), "authd: "+s) {
			t.Errorf("no error names %s:\n%s", s, errOut.String())
		}
	}
	err := run(t.Context(), []string{"logout-deliveries", "list", "-status", "lost"}, env(map[string]string{"AUTHD_DATABASE_URL": "memory"}), strings.NewReader(""), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "-status") || !strings.Contains(err.Error(), "AUTHD_DATABASE_URL") {
		t.Errorf("logout-deliveries list -status lost on memory: %v", err)
	}
}

// TestUsersSignOutQueuesLogouts (the CLI sign-out trigger): "authd users
// sign-out" ends the sessions through the code the admin API runs, and
// queues one delivery per app that received an ID token for them.
func TestUsersSignOutQueuesLogouts(t *testing.T) {
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := postgres.New(pool)
	ctx := t.Context()
	u := &storage.User{Username: "erin", PasswordHash: []byte("x")}
	if err := store.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, id := range []string{"phone", "laptop"} {
		if err := store.CreateSession(ctx, &storage.Session{ID: id, Subject: u.Subject, AuthTime: now,
			IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.CreateClient(ctx, &storage.Client{ID: "rp", RedirectURIs: []string{"http://127.0.0.1/cb"},
		TokenEndpointAuthMethod: "none", BackchannelLogoutURI: "https://rp.example/bc"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"phone", "laptop"} {
		if err := store.NoteSessionClient(ctx, id, "rp"); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut syncBuffer
	e := env(map[string]string{"AUTHD_DATABASE_URL": dsn, "AUTHD_SECRET": strings.Repeat("c", 40)})
	if err := run(ctx, []string{"users", "sign-out", "erin"}, e, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("users sign-out: %v %s", err, errOut.String())
	}
	var listed syncBuffer
	if err := run(ctx, []string{"logout-deliveries", "list"}, e, strings.NewReader(""), &listed, &errOut); err != nil {
		t.Fatal(err)
	}
	var list []deliveryView
	if err := json.Unmarshal([]byte(listed.String()), &list); err != nil || len(list) != 2 || list[0].ClientID != "rp" ||
		list[0].EventID != list[1].EventID || list[0].SID == list[1].SID || list[0].Status != "pending" {
		t.Fatalf("after users sign-out: %v %s", err, listed.String())
	}
}

// grepLines returns the lines of s containing sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
