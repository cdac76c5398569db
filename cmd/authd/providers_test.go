package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/authd/authd/storage/postgres/pgtest"
)

// TestProvidersCommands: add (with its redirect_uri; a retry with the
// same Idempotency-Key answers the same), list, show, update (keeping the
// sealed key), delete; no secret in output or in the database in clear.
func TestProvidersCommands(t *testing.T) {
	dsn := pgtest.DSN(t)
	e := map[string]string{"AUTHD_SECRET": strings.Repeat("c", 40), "AUTHD_DATABASE_URL": dsn, "AUTHD_ISSUER": "https://id.example.com"}
	providers := func(stdin string, args ...string) (string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(t.Context(), append([]string{"providers"}, args...), env(e), strings.NewReader(stdin), &out, &errOut)
		return out.String() + errOut.String(), err
	}
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	in, _ := json.Marshal(map[string]any{"id": "apple", "kind": "apple", "client_id": "com.example.web",
		"team_id": "TEAM123", "key_id": "KEY123", "private_key": keyPEM, "native_audiences": []string{"com.example.ios"}})
	out, err := providers(string(in), "add", "-idempotency-key", "k1")
	if err != nil {
		t.Fatalf("add: %v %s", err, out)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatal(out)
	}
	if info["redirect_uri"] != "https://id.example.com/signin/fed/apple/callback" || info["issuer"] != "https://appleid.apple.com" ||
		info["display_name"] != "Apple" || info["has_private_key"] != true {
		t.Fatalf("add printed %s", out)
	}
	if strings.Contains(out, "PRIVATE KEY") {
		t.Fatal("the key was printed")
	}
	again, err := providers(string(in), "add", "-idempotency-key", "k1")
	if err != nil || again != out {
		t.Fatalf("retry: %v\n%s\nvs\n%s", err, again, out)
	}
	if out, err := providers(string(in), "add"); err == nil {
		t.Fatalf("a second add of the same id: %s", out)
	}
	if out, err := providers("", "list"); err != nil || !strings.Contains(out, `"id": "apple"`) {
		t.Fatalf("list: %v %s", err, out)
	}
	upd := `{"kind":"apple","client_id":"com.example.web2","team_id":"TEAM123","key_id":"KEY2","link_by_verified_email":true}`
	if out, err := providers(upd, "update", "apple"); err != nil || !strings.Contains(out, `"has_private_key": true`) || !strings.Contains(out, "KEY2") {
		t.Fatalf("update: %v %s", err, out)
	}
	if out, err := providers("", "show", "apple"); err != nil || !strings.Contains(out, `"link_by_verified_email": true`) {
		t.Fatalf("show: %v %s", err, out)
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var sealed []byte
	if err := pool.QueryRow(context.Background(), "SELECT sealed FROM providers WHERE id = 'apple'").Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("PRIVATE")) || bytes.Contains(sealed, der[:16]) {
		t.Fatal("the key is stored in clear")
	}
	if out, err := providers(`{"id":"Bad!","kind":"oidc","issuer":"https://x.example","client_id":"c"}`, "add"); err == nil {
		t.Fatalf("bad id accepted: %s", out)
	}
	if out, err := providers("", "delete", "apple"); err != nil {
		t.Fatalf("delete: %v %s", err, out)
	}
	if out, err := providers("", "show", "apple"); err == nil {
		t.Fatalf("show after delete: %s", out)
	}
}
