package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/authd/authd/clientadmin"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// TestClientsCommands: authd clients create|list|get|update|rotate-secret|
// delete on PostgreSQL, printing the admin API's JSON; -idempotency-key
// makes create safe to retry; errors are RFC 7591 codes.
func TestClientsCommands(t *testing.T) {
	e := map[string]string{"AUTHD_SECRET": strings.Repeat("c", 40), "AUTHD_DATABASE_URL": pgtest.DSN(t)}
	clients := func(stdin string, args ...string) (map[string]any, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(t.Context(), append([]string{"clients"}, args...), env(e), strings.NewReader(stdin), &out, &errOut)
		res := map[string]any{}
		if out.Len() > 0 {
			if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
				t.Fatalf("clients %v printed non-JSON %q", args, out.String())
			}
		}
		if strings.Contains(errOut.String(), "client_secret\":\"") {
			t.Fatalf("a secret on stderr: %s", errOut.String())
		}
		// Audit events are for the server log: on a CLI user's terminal only
		// with -v.
		if verbose := slices.Contains(args, "-v"); verbose != strings.Contains(errOut.String(), "admin audit") {
			t.Fatalf("clients %v: stderr %q (audit lines only with -v)", args, errOut.String())
		}
		return res, err
	}
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }

	meta := `{"client_name":"CLI","redirect_uris":["https://cli.example/cb"]}`
	first, err := clients(meta, "create", "-idempotency-key", "cli-key-1")
	if err != nil || str(first, "client_id") == "" || str(first, "client_secret") == "" {
		t.Fatalf("create: %v %v", first, err)
	}
	again, err := clients(meta, "create", "-idempotency-key", "cli-key-1")
	if err != nil || fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("create retried with the same key = %v (%v), want %v", again, err, first)
	}
	_, err = clients(`{"client_name":"Other","redirect_uris":["https://cli.example/cb"]}`, "create", "-idempotency-key", "cli-key-1")
	if !errors.Is(err, clientadmin.ErrKeyReused) || !strings.Contains(err.Error(), "idempotency_key_reused") {
		t.Fatalf("same key, other input: %v", err)
	}
	id := str(first, "client_id")
	if _, err := clients("", "get", id, "-v"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := clients(meta, "add"); err != nil {
			t.Fatal(err)
		}
	}

	// list pages through all three clients.
	var ids []string
	cursor := ""
	for range 5 {
		args := []string{"list", "-limit", "2"}
		if cursor != "" {
			args = append(args, "-cursor", cursor)
		}
		page, err := clients("", args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page["clients"].([]any) {
			ids = append(ids, c.(map[string]any)["client_id"].(string))
		}
		if cursor = str(page, "next_cursor"); cursor == "" {
			break
		}
	}
	if len(ids) != 3 {
		t.Fatalf("list: %q", ids)
	}

	got, err := clients("", "get", id)
	if err != nil || str(got, "client_name") != "CLI" || got["client_secret"] != nil {
		t.Fatalf("get: %v %v", got, err)
	}
	upd, err := clients(`{"client_name":"CLI renamed","redirect_uris":["https://cli.example/cb"]}`, "update", id)
	if err != nil || str(upd, "client_name") != "CLI renamed" {
		t.Fatalf("update: %v %v", upd, err)
	}
	rot, err := clients("", "rotate-secret", id)
	if err != nil || str(rot, "client_secret") == "" || str(rot, "client_secret") == str(first, "client_secret") {
		t.Fatalf("rotate-secret: %v %v", rot, err)
	}
	del, err := clients("", "delete", id)
	if err != nil || del["deleted"] != true {
		t.Fatalf("delete: %v %v", del, err)
	}
	// An error is printed once, by main (the returned error): nothing on
	// stdout.
	gone, err := clients("", "get", id)
	if !errors.Is(err, clientadmin.ErrNotFound) || !strings.Contains(err.Error(), "not_found") || len(gone) != 0 {
		t.Fatalf("get after delete: %v %v", gone, err)
	}
	if code := exitCode(err, io.Discard); code != 1 {
		t.Fatalf("get after delete: exit status %d, want 1 (not a usage error)", code)
	}

	// A client_id may start with "-" (base64url): it is still the ID.
	odd, err := clients("", "get", "-not-a-flag")
	if !errors.Is(err, clientadmin.ErrNotFound) || len(odd) != 0 {
		t.Fatalf("get -not-a-flag: %v %v", odd, err)
	}

	var ue usageError
	for _, tt := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{`{"redirect_uris":["http://localhost/cb"]}`, []string{"create"}, "invalid_redirect_uri"},
		{`{"redirect_uris":["https://a.example/cb"],"bogus":1}`, []string{"create"}, "invalid_client_metadata"},
		{``, []string{"create"}, "nothing on stdin"},
		{``, []string{"get"}, "ID"},
		{``, []string{"frobnicate"}, "unknown command"},
		{``, []string{"list", "-limit", "0"}, "-limit"},
		{``, []string{"list", "-cursor", "bogus"}, "invalid_request"},
	} {
		_, err := clients(tt.stdin, tt.args...)
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("clients %v: err = %v, want a usage error containing %q", tt.args, err, tt.want)
		}
	}
}
