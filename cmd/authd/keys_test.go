package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/authd/authd/signing"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// TestKeysCLI: authd keys follows the CLI rules (stray arguments exit 2,
// -h prints the usage), and list/rotate work on PostgreSQL.
func TestKeysCLI(t *testing.T) {
	for _, args := range [][]string{{"keys"}, {"keys", "frob"}, {"keys", "list", "extra"}, {"keys", "rotate", "extra"}} {
		var out, errb strings.Builder
		code := exitCode(run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &out, &errb), &errb)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
	for _, args := range [][]string{{"keys", "-h"}, {"help", "keys"}, {"keys", "list", "-h"}} {
		var out, errb strings.Builder
		if code := exitCode(run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &out, &errb), &errb); code != 0 || !strings.Contains(out.String(), "usage: authd keys") {
			t.Errorf("%v: exit %d, out %q", args, code, out.String())
		}
	}
	dsn := pgtest.DSN(t)
	env := map[string]string{"AUTHD_DATABASE_URL": dsn, "AUTHD_SECRET": "keys-cli-test-secret-0123456789-0123456789"}
	getenv := func(k string) string { return env[k] }
	var out, errb strings.Builder
	if err := run(context.Background(), []string{"keys", "rotate"}, getenv, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("keys rotate: %v %s", err, errb.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"keys", "list"}, getenv, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("keys list: %v", err)
	}
	if n := strings.Count(out.String(), "current"); n != 2 || !strings.Contains(out.String(), "RS256") || !strings.Contains(out.String(), "ES256") {
		t.Fatalf("keys list after the first rotate:\n%s", out.String())
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestKeyRotationThreeProcesses runs three "authd serve" processes on one
// database with a short key rotation (issue 12, Done-when): however many
// replicas run the rotation job, one new generation is added; every
// process publishes the same JWKS; a token signed by the old key still
// verifies against every process's JWKS after the new key signs.
func TestKeyRotationThreeProcesses(t *testing.T) {
	dsn := pgtest.DSN(t)
	bin := buildAuthd(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	const secret = "rotation-test-secret-0123456789-0123456789"
	const (
		rotation   = 4 * time.Second
		prepublish = time.Second
	)
	addrs := []string{freePort(t), freePort(t), freePort(t)}
	env := withoutAuthdEnv()
	env = append(env, "AUTHD_DATABASE_URL="+dsn, "AUTHD_SECRET="+secret, "AUTHD_ISSUER=http://"+addrs[0],
		"AUTHD_OPS_ADDR=127.0.0.1:0", "AUTHD_DRAIN_DELAY=0s", "AUTHD_REDIS_URL=memory",
		"AUTHD_KEY_ROTATION="+rotation.String(), "AUTHD_KEY_PREPUBLISH="+prepublish.String(), "AUTHD_ID_TOKEN_TTL=1m",
		"AUTHD_JOB_LEASE=2s")
	dir := t.TempDir()
	var procs []*exec.Cmd
	for i, addr := range addrs {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("authd-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "serve")
		cmd.Env, cmd.Stdout, cmd.Stderr = append(env, "AUTHD_ADDR="+addr), f, f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
			}
			f.Close()
			if t.Failed() {
				b, _ := os.ReadFile(f.Name())
				t.Logf("process %d log:\n%s", i, b)
			}
		})
	}
	jwks := func(addr string) (jose.JSONWebKeySet, error) {
		var set jose.JSONWebKeySet
		resp, err := http.Get("http://" + addr + "/oauth2/jwks")
		if err != nil {
			return set, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return set, fmt.Errorf("status %d", resp.StatusCode)
		}
		return set, json.NewDecoder(resp.Body).Decode(&set)
	}
	kids := func(set jose.JSONWebKeySet) []string {
		var out []string
		for _, k := range set.Keys {
			out = append(out, k.KeyID)
		}
		return out
	}
	// All three up, one first generation between them.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < len(addrs); {
		if _, err := jwks(addrs[i]); err == nil {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d never served the JWKS", i)
		}
		time.Sleep(50 * time.Millisecond)
	}
	store := postgres.New(pool)
	generations := func() map[int64]int {
		keys, err := store.ListSigningKeys(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		g := map[int64]int{}
		for _, k := range keys {
			g[k.Generation]++
		}
		return g
	}
	if g := generations(); len(g) != 1 || g[1] != 2 {
		t.Fatalf("after three first starts: generations %v, want one (RS256 + ES256)", g)
	}
	// An ID-token-like JWT signed by the first generation, with the keys
	// the processes use (same database, same secret).
	m, err := signing.New(store, signing.Config{Secret: []byte(secret), RotateEvery: rotation, Prepublish: prepublish})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	oldJWT, err := m.Sign(context.Background(), signing.RS256, []byte(`{"sub":"old"}`))
	if err != nil {
		t.Fatal(err)
	}

	// Wait for the rotation (4 s after the first generation): exactly one
	// generation is added by the three workers.
	deadline = time.Now().Add(20 * time.Second)
	for len(generations()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no rotation within 20 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if g := generations(); len(g) != 2 || g[2] != 2 {
		t.Fatalf("after the rotation: generations %v, want 1 and 2 with two keys each", g)
	}
	// Past the prepublication: the new key signs, the processes agree.
	time.Sleep(prepublish + 500*time.Millisecond)
	_ = m.Prepare(context.Background())
	newJWT, err := m.Sign(context.Background(), signing.RS256, []byte(`{"sub":"new"}`))
	if err != nil {
		t.Fatal(err)
	}
	var first []string
	for i, addr := range addrs {
		set, err := jwks(addr)
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		if i == 0 {
			first = kids(set)
		} else if !reflect.DeepEqual(kids(set), first) {
			t.Errorf("process %d publishes %v, process 0 %v", i, kids(set), first)
		}
		if len(set.Keys) != 4 {
			t.Errorf("process %d publishes %d keys, want 4 (old and new generation)", i, len(set.Keys))
		}
		for name, tok := range map[string]string{"old": oldJWT, "new": newJWT} {
			jws, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
			if err != nil {
				t.Fatal(err)
			}
			keys := set.Key(jws.Signatures[0].Header.KeyID)
			if len(keys) != 1 {
				t.Errorf("process %d: the %s token's key is not published", i, name)
				continue
			}
			if _, err := jws.Verify(keys[0]); err != nil {
				t.Errorf("process %d: the %s token does not verify: %v", i, name, err)
			}
		}
	}
	if strings.Split(oldJWT, ".")[0] == strings.Split(newJWT, ".")[0] {
		t.Error("the new generation does not sign after the prepublication")
	}
	_ = procs
}
