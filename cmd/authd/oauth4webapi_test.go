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

// TestOAuth4WebAPINode signs in to "authd serve" on PostgreSQL and Redis
// with the npm package oauth4webapi (interop/oauth4webapi/signin.mjs,
// pinned in its package-lock.json, installed by .ci/run with npm ci), as a
// mobile public client: PAR + DPoP + PKCE (with the use_dpop_nonce round
// trips AUTHD_DPOP_NONCE=on asks for), a retried exchange with a fresh
// proof from the same key that returns the same tokens, DPoP UserInfo and
// a DPoP refresh. Skipped without node or the installed package, unless
// AUTHD_TEST_REQUIRE_BACKENDS or CI is set.
func TestOAuth4WebAPINode(t *testing.T) {
	dir, _ := filepath.Abs(filepath.Join("..", "..", "interop", "oauth4webapi"))
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(dir, "node_modules", "oauth4webapi")); err != nil || serr != nil {
		msg := "node or interop/oauth4webapi/node_modules missing (run npm ci in interop/oauth4webapi)"
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
	if err := store.CreateUser(ctx, &storage.User{Username: "otto", PasswordHash: hash, Name: "Otto", CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	const redirect = "com.example.dpop:/cb"
	if err := store.CreateClient(ctx, &storage.Client{ID: "dpop-node-app", RedirectURIs: []string{redirect},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		Scopes: []string{"openid", "offline_access", "profile"}, TokenEndpointAuthMethod: "none", SkipConsent: true,
		DPoPBoundAccessTokens: true, RequirePushedAuthorizationRequests: true}); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AUTHD_") {
			env = append(env, kv)
		}
	}
	env = append(env, "AUTHD_DATABASE_URL="+dsn, "AUTHD_SECRET=node-test-secret-0123456789-0123456789",
		"AUTHD_REDIS_URL=redis://"+redisAddr+"/0", "AUTHD_JANITOR=off", "AUTHD_DPOP_NONCE=on")
	p := startAuthd(t, bin, freeAddr(t), env, nil)

	cmd := exec.CommandContext(ctx, node, "signin.mjs", p.base, "dpop-node-app", redirect, "otto", "node-password")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"ok":true`) {
		t.Fatalf("oauth4webapi sign-in: %v\n%s", err, out)
	}
	t.Logf("oauth4webapi: %s", strings.TrimSpace(string(out)))
}
