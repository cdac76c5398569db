package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/authd/authd/storage/postgres"
)

const migrateUsage = `usage: authd migrate up|status [flags]

  up       apply the embedded SQL migrations to AUTHD_DATABASE_URL, then show the version
  status   show the schema version and whether it is behind this binary
`

// migrateCommands are the "authd migrate" commands and what they do (their
// -h).
var migrateCommands = map[string]string{
	"up":     "Applies the embedded SQL migrations to AUTHD_DATABASE_URL (each in one\ntransaction, under an advisory lock), then shows the schema version.",
	"status": "Shows the schema version of AUTHD_DATABASE_URL and whether it is behind this\nbinary.",
}

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
	about, ok := migrateCommands[args[0]]
	if !ok {
		return usagef("migrate: unknown command %q: up or status (run \"authd help migrate\")", args[0])
	}
	fs = flag.NewFlagSet("migrate "+args[0], flag.ContinueOnError)
	c.flags(fs, false)
	envErr, err := envErrors(parseNoArgs(fs, subcommandUsage("migrate "+args[0], nil, about), args[1:], getenv, stdout))
	if err != nil {
		return helpOK(err)
	}
	var errs problems
	errs.add(envErr)
	if c.DatabaseURL == "" || c.DatabaseURL == "memory" {
		errs.addf("AUTHD_DATABASE_URL: migrate needs a postgres:// URL")
	}
	if err := errs.err(); err != nil {
		return err
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
	switch {
	case cur < latest:
		state = "behind: run \"authd migrate up\""
	case cur > latest:
		state = "ahead: written by a newer authd than this binary"
	}
	fmt.Fprintf(stdout, "schema version %d of %d (%s)\n", cur, latest, state)
	return nil
}
