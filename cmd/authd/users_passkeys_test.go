package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/authd/authd/passkey"
	"github.com/authd/authd/passkey/passkeytest"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// TestUsersPasskeyCommands: add -no-password, passkey-link, passkeys (ids
// in base64url), remove-passkey (refused for the last way in) and
// set-password -no-password, on PostgreSQL.
func TestUsersPasskeyCommands(t *testing.T) {
	dsn := pgtest.DSN(t)
	const issuer = "http://localhost:8080"
	e := env(map[string]string{"AUTHD_DATABASE_URL": dsn, "AUTHD_ISSUER": issuer})
	users := func(t *testing.T, stdin string, args ...string) (map[string]any, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(t.Context(), append([]string{"users"}, args...), e, strings.NewReader(stdin), &out, &errOut)
		m := map[string]any{}
		if err == nil {
			if jerr := json.Unmarshal(out.Bytes(), &m); jerr != nil {
				t.Fatalf("users %v: not JSON: %v\n%s", args, jerr, out.String())
			}
		}
		return m, err
	}
	must := func(t *testing.T, stdin string, args ...string) map[string]any {
		t.Helper()
		m, err := users(t, stdin, args...)
		if err != nil {
			t.Fatalf("users %v: %v", args, err)
		}
		return m
	}
	bob := must(t, "", "add", "bob", "-no-password")
	link := must(t, "", "passkey-link", "bob")
	url, _ := link["url"].(string)
	if !strings.HasPrefix(url, issuer+"/account/passkey-link#") || link["expires_at"] == "" {
		t.Fatalf("passkey-link: %v", link)
	}
	if got := must(t, "", "passkeys", "bob"); got["sub"] != bob["sub"] || len(got["passkeys"].([]any)) != 0 {
		t.Fatalf("passkeys: %v", got)
	}

	// Enrol with the link, as the link's page would.
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := postgres.New(pool)
	rp, _ := passkey.Configure(passkey.Settings{Issuer: issuer})
	svc, err := passkey.New(rp, struct {
		storage.PasskeyStore
		storage.Store
	}{store, store}, passkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	token := url[strings.Index(url, "#")+1:]
	opts, err := svc.BeginLinkEnrol(t.Context(), token)
	if err != nil {
		t.Fatal(err)
	}
	_, answer, _ := (&passkeytest.Authenticator{Origin: issuer}).Create(opts)
	if _, err := svc.FinishLinkEnrol(t.Context(), token, "Phone", answer); err != nil {
		t.Fatal(err)
	}

	listed := must(t, "", "passkeys", "BOB")
	ps, _ := listed["passkeys"].([]any)
	if len(ps) != 1 {
		t.Fatalf("passkeys: %v", listed)
	}
	id, _ := ps[0].(map[string]any)["id"].(string)
	if id == "" || strings.ContainsAny(id, "+/=") || ps[0].(map[string]any)["name"] != "Phone" {
		t.Fatalf("passkey %v: want a base64url id and its name", ps[0])
	}
	if _, err := users(t, "", "remove-passkey", "bob", id); err == nil || !strings.Contains(err.Error(), "last way to sign in") {
		t.Fatalf("remove the last passkey: %v", err)
	}
	if _, err := users(t, "", "remove-passkey", "bob", "AAAA"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("remove an unknown passkey: %v", err)
	}
	// bob keeps his passkey: "removing" his (absent) password is fine.
	if got := must(t, "", "set-password", "bob", "-no-password"); got["tokens_revoked"] != true {
		t.Fatalf("set-password -no-password: %v", got)
	}
	// carol has a password and no passkey: hers cannot go.
	must(t, "carol-password-1\n", "add", "carol")
	if _, err := users(t, "", "set-password", "carol", "-no-password"); err == nil || !strings.Contains(err.Error(), "last way to sign in") {
		t.Fatalf("remove carol's only way in: %v", err)
	}
}
