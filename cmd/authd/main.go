// Command authd is an OAuth 2.0 authorization server for first-party mobile
// and web apps: authorization code + PKCE, with an exchange replay cache so a
// retried token exchange gets the original response instead of invalid_grant.
//
// Subcommands: serve, dev, migrate, users, clients, janitor, jobs. Run
// "authd help".
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "authd:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a configuration or usage mistake: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

const usage = `authd — OAuth 2.0 authorization server (authorization code + PKCE, replay-safe token exchange)

Usage:
  authd dev                      run on in-memory storage with a demo user and client
  authd serve                    run the server (AUTHD_DATABASE_URL, AUTHD_SECRET, …)
  authd migrate up|status        apply or show the PostgreSQL schema migrations
  authd users add|list|show|rename|set-password|disable|enable|delete|sessions|sign-out|consents|revoke-consent
                                 manage users (JSON out; passwords on stdin; see authd users -h)
  authd clients create|list|get|update|delete|rotate-secret
                                 manage OAuth clients (JSON in and out; "add" = create)
  authd janitor [--once]         run the job worker and janitor (--once: the due jobs, then exit)
  authd jobs list                show background jobs and their state

Run "authd <command> -h" for the flags of a command. Every flag can also be
set with an AUTHD_* environment variable (flag -database-url is
AUTHD_DATABASE_URL); a flag wins over the environment.
`

// run is the whole program: no package state, everything injected.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command given")
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], getenv, stdout, stderr)
	case "dev":
		return cmdDev(ctx, args[1:], getenv, stdout, stderr)
	case "migrate":
		return cmdMigrate(ctx, args[1:], getenv, stdout)
	case "users":
		return cmdUsers(ctx, args[1:], getenv, stdin, stdout)
	case "clients":
		return cmdClients(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "janitor":
		return cmdJanitor(ctx, args[1:], getenv, stdout, stderr)
	case "jobs":
		return cmdJobs(ctx, args[1:], getenv, stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usagef("unknown command %q", args[0])
}
