package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/bcrypt"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
)

const migrateUsage = `usage: authd migrate up|status [flags]

  up       apply the embedded SQL migrations to AUTHD_DATABASE_URL, then show the version
  status   show the schema version and whether it is behind this binary
`

// cmdMigrate applies ("up") or shows ("status") the embedded migrations.
func cmdMigrate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var c config
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	c.flags(fs, false)
	if len(args) == 0 || isHelp(args[0]) {
		if len(args) > 0 {
			printUsage(fs, migrateUsage, stdout)
			return nil
		}
		return usagef("migrate: missing up or status (run \"authd help migrate\")")
	}
	if args[0] != "up" && args[0] != "status" {
		return usagef("migrate: unknown command %q: up or status (run \"authd help migrate\")", args[0])
	}
	fs = flag.NewFlagSet("migrate "+args[0], flag.ContinueOnError)
	c.flags(fs, false)
	if err := parseNoArgs(fs, migrateUsage, args[1:], getenv, stdout); err != nil {
		return helpOK(err)
	}
	if c.DatabaseURL == "" || c.DatabaseURL == "memory" {
		return usagef("AUTHD_DATABASE_URL: migrate needs a postgres:// URL")
	}
	pool, err := pgxpool.New(ctx, c.DatabaseURL)
	if err != nil {
		return usagef("AUTHD_DATABASE_URL: %v", err)
	}
	defer pool.Close()
	if args[0] == "up" {
		if err := postgres.Migrate(ctx, pool); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	cur, latest, err := postgres.SchemaStatus(ctx, pool)
	if err != nil {
		return fmt.Errorf("migrate status: %w", err)
	}
	state := "up to date"
	if cur < latest {
		state = "behind: run \"authd migrate up\""
	}
	fmt.Fprintf(stdout, "schema version %d of %d (%s)\n", cur, latest, state)
	return nil
}

const usersUsage = `usage: authd users add USERNAME [flags]

Adds a user to AUTHD_DATABASE_URL. The password (8–72 bytes) is read from
stdin, one line:

  printf '%s\n' "$PASSWORD" | authd users add USERNAME
`

// cmdUsers manages users: "users add USERNAME" reads the password from
// stdin (one line) when stdin is not a terminal.
func cmdUsers(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, _ io.Writer) error {
	var c config
	fs := flag.NewFlagSet("users add", flag.ContinueOnError)
	c.flags(fs, false)
	if len(args) < 2 || args[0] != "add" || strings.HasPrefix(args[1], "-") {
		if len(args) > 0 && isHelp(args[len(args)-1]) {
			printUsage(fs, usersUsage, stdout)
			return nil
		}
		if len(args) > 0 && args[0] != "add" && !strings.HasPrefix(args[0], "-") {
			return usagef("users: unknown command %q: only add (run \"authd help users\")", args[0])
		}
		return usagef("usage: printf '%%s\\n' \"$PASSWORD\" | authd users add USERNAME  (the password is read from stdin)")
	}
	username := args[1]
	if err := parseNoArgs(fs, usersUsage, args[2:], getenv, stdout); err != nil {
		return helpOK(err)
	}
	if c.DatabaseURL == "" || c.DatabaseURL == "memory" {
		return usagef("AUTHD_DATABASE_URL: users add needs a postgres:// URL (the memory store lives only inside a running server)")
	}
	if username == "" || len(username) > 128 || strings.ContainsAny(username, " \t\r\n") {
		return usagef("USERNAME: 1–128 characters without whitespace")
	}
	if f, ok := stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return usagef("the password is read from stdin; pipe it in, e.g.: printf '%%s\\n' \"$PASSWORD\" | authd users add %s", username)
		}
	}
	line, err := bufio.NewReader(io.LimitReader(stdin, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read password: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	if len(password) < 8 {
		return usagef("password: at least 8 bytes")
	}
	if len(password) > 72 {
		return usagef("password: at most 72 bytes (bcrypt's limit)")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	store, closeStore, err := openStore(ctx, c.DatabaseURL, true)
	if err != nil {
		return err
	}
	defer closeStore()
	if err := store.CreateUser(ctx, &storage.User{Username: username, PasswordHash: hash, CreatedAt: time.Now().UTC()}); err != nil {
		if errors.Is(err, storage.ErrAlreadyExists) {
			return usagef("user %q already exists", username)
		}
		return err
	}
	fmt.Fprintf(stdout, "user %q added\n", username)
	return nil
}
