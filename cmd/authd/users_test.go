package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/authd/authd/storage/postgres/pgtest"
)

// TestUsersCommands walks the user lifecycle through the CLI on
// PostgreSQL: JSON on stdout, a stable sub, typed errors as exit status 2.
func TestUsersCommands(t *testing.T) {
	dsn := pgtest.DSN(t)
	e := env(map[string]string{"AUTHD_DATABASE_URL": dsn})
	users := func(t *testing.T, stdin string, args ...string) (map[string]any, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		var in *strings.Reader
		if stdin != "" {
			in = strings.NewReader(stdin)
		} else {
			in = strings.NewReader("")
		}
		err := run(t.Context(), append([]string{"users"}, args...), e, in, &out, &errOut)
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
	added := must(t, "carol-password-1\n", "add", "Carol", "-email", "carol@example.com", "-name", "Carol C")
	sub, _ := added["sub"].(string)
	if added["username"] != "carol" || len(sub) != 32 || added["email"] != "carol@example.com" {
		t.Fatalf("add: %v", added)
	}
	if _, err := users(t, "carol-password-1\n", "add", "CAROL"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("add CAROL again: %v", err)
	}
	if _, err := users(t, "short\n", "add", "dave"); err == nil || !strings.Contains(err.Error(), "password") {
		t.Errorf("short password: %v", err)
	}
	if _, err := users(t, "dave-password-1\n", "add", "da\u200dve"); err == nil || !strings.Contains(err.Error(), "invalid username") {
		t.Errorf("zero-width username: %v", err)
	}
	if got := must(t, "", "show", "CAROL"); got["sub"] != sub {
		t.Errorf("show: %v", got)
	}
	if got := must(t, "", "rename", "carol", "caroline"); got["sub"] != sub || got["username"] != "caroline" {
		t.Errorf("rename: %v", got)
	}
	list := must(t, "", "list")
	if us, _ := list["users"].([]any); len(us) != 1 {
		t.Errorf("list: %v", list)
	}
	if got := must(t, "new-password-99\n", "set-password", "caroline"); got["tokens_revoked"] != true {
		t.Errorf("set-password: %v", got)
	}
	if got := must(t, "", "disable", "caroline"); got["disabled"] != true {
		t.Errorf("disable: %v", got)
	}
	if got := must(t, "", "enable", "caroline"); got["disabled"] != false {
		t.Errorf("enable: %v", got)
	}
	if got := must(t, "", "sessions", "caroline"); got["sessions"] == nil {
		t.Errorf("sessions: %v", got)
	}
	if got := must(t, "", "sign-out", "caroline"); got["sessions_ended"] != float64(0) {
		t.Errorf("sign-out: %v", got)
	}
	// The second factor (issue 27): the operator's requirement, the reset.
	if got := must(t, "", "require-mfa", "caroline"); got["mfa_required"] != true || got["sub"] != sub {
		t.Errorf("require-mfa: %v", got)
	}
	if got := must(t, "", "require-mfa", "caroline", "-off"); got["mfa_required"] != false {
		t.Errorf("require-mfa -off: %v", got)
	}
	if got := must(t, "", "reset-mfa", "caroline"); got["sub"] != sub || got["factors_removed"] != false || got["sessions_ended"] != float64(0) {
		t.Errorf("reset-mfa: %v", got)
	}
	if _, err := users(t, "", "reset-mfa", "nobody"); err == nil {
		t.Error("reset-mfa of an unknown user succeeded")
	}
	if got := must(t, "", "consents", "caroline"); got["consents"] == nil {
		t.Errorf("consents: %v", got)
	}
	if _, err := users(t, "", "revoke-consent", "caroline", "no-app"); err == nil || !strings.Contains(err.Error(), "consent not found") {
		t.Errorf("revoke-consent without one: %v", err)
	}
	if got := must(t, "", "delete", "caroline"); got["deleted"] != true {
		t.Errorf("delete: %v", got)
	}
	if _, err := users(t, "", "show", "caroline"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("show after delete: %v", err)
	}
	again := must(t, "carol-password-1\n", "add", "caroline")
	if again["sub"] == sub {
		t.Error("re-added user got the old sub")
	}
	for _, args := range [][]string{{"bogus"}, {"show"}, {"rename", "a"}, {"show", "a", "b"}} {
		if _, err := users(t, "", args...); err == nil {
			t.Errorf("users %v succeeded", args)
		}
	}
}

// TestDevIgnoresProductionVariables: "AUTHD_DATABASE_URL=postgres://… authd
// dev" says, in one line, that it ignores the variable, runs in memory and
// writes nothing to that database (not even its demo user).
func TestDevIgnoresProductionVariables(t *testing.T) {
	dsn := pgtest.EmptyDSN(t)
	_, stderr := startCommand(t, []string{"dev", "-addr", "127.0.0.1:0"},
		map[string]string{"AUTHD_DATABASE_URL": dsn, "AUTHD_REDIS_URL": "redis://127.0.0.1:1/0"}, regexp.MustCompile(`Ctrl-C`))
	for _, v := range []string{"AUTHD_DATABASE_URL", "AUTHD_REDIS_URL"} {
		if !strings.Contains(stderr.String(), "authd dev: ignoring "+v) {
			t.Errorf("no one-line message about %s:\n%s", v, stderr.String())
		}
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var tables int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("authd dev created %d tables in AUTHD_DATABASE_URL's schema", tables)
	}
}
