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

// TestOpenIDClientNode signs in to "authd serve" on PostgreSQL and Redis
// with the npm package openid-client (interop/openid-client/signin.js,
// pinned in its package-lock.json, installed by .ci/run with npm ci):
// discovery, the code flow with PKCE and nonce, a retried exchange that
// openid-client accepts (identical ID token), UserInfo and refresh. It is
// skipped without node or without the installed package, unless
// AUTHD_TEST_REQUIRE_BACKENDS or CI is set.
func TestOpenIDClientNode(t *testing.T) {
	dir, _ := filepath.Abs(filepath.Join("..", "..", "interop", "openid-client"))
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(dir, "node_modules", "openid-client")); err != nil || serr != nil {
		msg := "node or interop/openid-client/node_modules missing (run npm ci in interop/openid-client)"
		if os.Getenv("AUTHD_TEST_REQUIRE_BACKENDS") != "" || os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dsn := pgtest.DSN(t)
	redisAddr, _ := redistest.Start(t)
	bin := janitorTestBinary(t)
	store, closeStore, err := openStore(context.Background(), dsn, true)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	hash, _ := bcrypt.GenerateFromPassword([]byte("node-password"), bcrypt.MinCost)
	ctx := t.Context()
	if err := store.CreateUser(ctx, &storage.User{Username: "nora", PasswordHash: hash, Name: "Nora", CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	const redirect = "com.example.node:/cb"
	if err := store.CreateClient(ctx, &storage.Client{ID: "node-app", RedirectURIs: []string{redirect},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		Scopes: []string{"openid", "offline_access", "profile"}, TokenEndpointAuthMethod: "none", SkipConsent: true}); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AUTHD_") {
			env = append(env, kv)
		}
	}
	env = append(env, "AUTHD_DATABASE_URL="+dsn, "AUTHD_SECRET=node-test-secret-0123456789-0123456789",
		"AUTHD_REDIS_URL=redis://"+redisAddr+"/0", "AUTHD_JANITOR=off")
	p := startAuthd(t, bin, freeAddr(t), env, nil)

	cmd := exec.CommandContext(ctx, node, "signin.js", p.base, "node-app", redirect, "nora", "node-password")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"ok":true`) {
		t.Fatalf("openid-client sign-in: %v\n%s", err, out)
	}
	t.Logf("openid-client: %s", strings.TrimSpace(string(out)))
}
