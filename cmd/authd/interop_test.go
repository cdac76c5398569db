package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/authd/authd/exchangecache/redistest"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// nodeInterop is one sign-in by a JavaScript client library against
// "authd serve" on PostgreSQL and Redis: interop/<pkg>/<script>, with the
// npm package pinned in its package-lock.json and installed by .ci/run
// with npm ci. The script gets the issuer, client_id, redirect_uri,
// username and password, and prints a JSON line with "ok":true.
type nodeInterop struct {
	pkg, script string
	client      storage.Client
	env         []string // extra AUTHD_* settings
}

// run seeds a user and the client, starts authd and runs the script. It
// skips without node or the installed package, unless
// AUTHD_TEST_REQUIRE_BACKENDS or CI is set.
func (n nodeInterop) run(t *testing.T) {
	dir, _ := filepath.Abs(filepath.Join("..", "..", "interop", n.pkg))
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(dir, "node_modules", n.pkg)); err != nil || serr != nil {
		msg := "node or interop/" + n.pkg + "/node_modules missing (run npm ci in interop/" + n.pkg + ")"
		if os.Getenv("AUTHD_TEST_REQUIRE_BACKENDS") != "" || os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dsn := pgtest.DSN(t)
	redisAddr, _ := redistest.Start(t)
	bin := buildAuthd(t)
	store, closeStore, err := openStore(context.Background(), dsn, true)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	ctx := t.Context()
	hash, _ := bcrypt.GenerateFromPassword([]byte("node-password"), bcrypt.MinCost)
	if err := store.CreateUser(ctx, &storage.User{Username: "nora", PasswordHash: hash, Name: "Nora", CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	c := n.client
	c.GrantTypes, c.ResponseTypes = []string{"authorization_code", "refresh_token"}, []string{"code"}
	c.Scopes, c.TokenEndpointAuthMethod, c.SkipConsent = []string{"openid", "offline_access", "profile"}, "none", true
	if err := store.CreateClient(ctx, &c); err != nil {
		t.Fatal(err)
	}
	env := append(withoutAuthdEnv(), "AUTHD_DATABASE_URL="+dsn, "AUTHD_SECRET=node-test-secret-0123456789-0123456789",
		"AUTHD_REDIS_URL=redis://"+redisAddr+"/0", "AUTHD_JANITOR=off")
	p := startAuthd(t, bin, freeAddr(t), append(env, n.env...), nil)

	cmd := exec.CommandContext(ctx, node, n.script, p.base, c.ID, c.RedirectURIs[0], "nora", "node-password")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"ok":true`) {
		t.Fatalf("%s sign-in: %v\n%s", n.pkg, err, out)
	}
	t.Logf("%s: %s", n.pkg, strings.TrimSpace(string(out)))
}

// withoutAuthdEnv is the test process's environment without AUTHD_*
// settings, for the authd processes a test starts.
func withoutAuthdEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AUTHD_") {
			env = append(env, kv)
		}
	}
	return env
}

// TestOpenIDClientNode: the npm package openid-client
// (interop/openid-client/signin.js): discovery, the code flow with PKCE and
// nonce, a retried exchange that openid-client accepts (identical ID
// token), UserInfo and refresh.
func TestOpenIDClientNode(t *testing.T) {
	nodeInterop{pkg: "openid-client", script: "signin.js",
		client: storage.Client{ID: "node-app", RedirectURIs: []string{"com.example.node:/cb"}}}.run(t)
}

// TestOAuth4WebAPINode: the npm package oauth4webapi
// (interop/oauth4webapi/signin.mjs) as a mobile public client that requires
// DPoP and PAR: PAR + DPoP + PKCE (with the use_dpop_nonce round trips
// AUTHD_DPOP_NONCE=on asks for), a retried exchange with a fresh proof from
// the same key that returns the same tokens, DPoP UserInfo and a DPoP
// refresh.
func TestOAuth4WebAPINode(t *testing.T) {
	nodeInterop{pkg: "oauth4webapi", script: "signin.mjs", env: []string{"AUTHD_DPOP_NONCE=on"},
		client: storage.Client{ID: "dpop-node-app", RedirectURIs: []string{"com.example.dpop:/cb"},
			DPoPBoundAccessTokens: true, RequirePushedAuthorizationRequests: true}}.run(t)
}
