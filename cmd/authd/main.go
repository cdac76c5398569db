// Command authd is an OAuth 2.0 authorization server for first-party mobile
// and web apps: authorization code + PKCE, with an exchange replay cache so a
// retried token exchange gets the original response instead of invalid_grant.
//
// Subcommands: serve, dev, migrate, users, clients, janitor, jobs, keys, version,
// help. Run "authd help". Like the go command, every subcommand refuses an
// argument it does not take (one line, exit status 2), and "authd help CMD",
// "authd CMD -h" and "authd CMD SUB -h" print its usage (exit status 0).
// Invalid settings are all reported at once, one line each, before any I/O.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx = withEnvNames(ctx, envNamesOf(os.Environ()))
	code := exitCode(run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}

// exitCode prints err (once, on one line; invalid settings one line each)
// and returns the exit status: 0 for nil, 2 for a usage or configuration
// mistake, 1 otherwise.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var se settingErrors
	if errors.As(err, &se) {
		for _, e := range se {
			fmt.Fprintln(stderr, "authd:", strings.ReplaceAll(e.Error(), "\n", " "))
		}
		return 2
	}
	fmt.Fprintln(stderr, "authd:", strings.ReplaceAll(err.Error(), "\n", " "))
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// usageError is a configuration or usage mistake: exit status 2. It wraps
// an underlying error, if any, for errors.Is.
type usageError struct {
	msg string
	err error
}

func (e usageError) Error() string { return e.msg }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return usageError{msg: err.Error(), err: errors.Unwrap(err)}
}

// settingErrors are the invalid settings of one run, each a usageError:
// main prints one line for each, exit status 2.
type settingErrors []error

// Error is every setting's error on one line.
func (e settingErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e settingErrors) Unwrap() []error { return e }

// problems collects the invalid settings of a command, so that one run
// reports them all.
type problems []error

// add adds err (nil: nothing), flattening settingErrors.
func (p *problems) add(err error) {
	var se settingErrors
	switch {
	case err == nil:
	case errors.As(err, &se):
		*p = append(*p, se...)
	default:
		*p = append(*p, err)
	}
}

// addf adds a usage error.
func (p *problems) addf(format string, args ...any) { p.add(usagef(format, args...)) }

// err is nil, the one error, or settingErrors.
func (p problems) err() error {
	switch len(p) {
	case 0:
		return nil
	case 1:
		return p[0]
	}
	return settingErrors(p)
}

const usage = `authd — OAuth 2.0 authorization server (authorization code + PKCE, replay-safe token exchange)

Usage:
  authd dev                      run on in-memory storage with a demo user and client
  authd serve                    run the server (AUTHD_DATABASE_URL, AUTHD_SECRET, …)
  authd migrate up|status        apply or show the PostgreSQL schema migrations
  authd users add|list|show|rename|set-password|disable|enable|delete|sessions|sign-out|consents|revoke-consent|
              require-mfa|reset-mfa|passkeys|remove-passkey|passkey-link
                                 manage users (JSON out; passwords on stdin; see authd users -h)
  authd clients create|list|get|update|delete|rotate-secret
                                 manage OAuth clients (JSON in and out; "add" = create)
  authd providers add|list|show|update|delete
                                 manage upstream OpenID providers (Apple, Google, any; JSON in and out)
  authd janitor [--once]         run the job worker and janitor (--once: the due jobs, then exit)
  authd jobs list                show background jobs and their state
  authd keys list|rotate         show or rotate the ID token signing keys
  authd logout-deliveries list   show back-channel logout deliveries (JSON; -status pending|failed)
  authd version                  print the module version, VCS revision and Go version (also --version)
  authd help [COMMAND]           print this, or a command's usage

Run "authd help <command>" or "authd <command> -h" for the usage and flags of
a command. Every flag can also be set with an AUTHD_* environment variable
(flag -database-url is AUTHD_DATABASE_URL); a flag wins over the environment.
`

// commandFunc is a subcommand's implementation.
type commandFunc func(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error

// commands maps each subcommand to its implementation.
func commands() map[string]commandFunc {
	return map[string]commandFunc{
		"serve": func(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, stderr io.Writer) error {
			return cmdServe(ctx, args, getenv, stdout, stderr)
		},
		"dev": func(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, stderr io.Writer) error {
			return cmdDev(ctx, args, getenv, stdout, stderr)
		},
		"migrate": func(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, _ io.Writer) error {
			return cmdMigrate(ctx, args, getenv, stdout)
		},
		"users":     cmdUsers,
		"clients":   cmdClients,
		"providers": cmdProviders,
		"janitor": func(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, stderr io.Writer) error {
			return cmdJanitor(ctx, args, getenv, stdout, stderr)
		},
		"jobs": func(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, _ io.Writer) error {
			return cmdJobs(ctx, args, getenv, stdout)
		},
		"logout-deliveries": func(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, _ io.Writer) error {
			return cmdLogoutDeliveries(ctx, args, getenv, stdout)
		},
		"keys": func(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, stderr io.Writer) error {
			return cmdKeys(ctx, args, getenv, stdout, stderr)
		},
		"version": func(_ context.Context, args []string, _ func(string) string, _ io.Reader, stdout, _ io.Writer) error {
			return cmdVersion(args, stdout)
		},
	}
}

// run is the whole program: no package state, everything injected.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command given")
	}
	cmds := commands()
	switch name := args[0]; name {
	case "-version", "--version":
		return cmdVersion(args[1:], stdout)
	case "help", "-h", "-help", "--help":
		if len(args) == 1 || name != "help" {
			fmt.Fprint(stdout, usage)
			return nil
		}
		if len(args) > 2 {
			return usagef("help: unexpected argument %q; usage: authd help [COMMAND]", args[2])
		}
		if args[1] == "help" || isHelp(args[1]) {
			fmt.Fprint(stdout, usage)
			return nil
		}
		cmd, ok := cmds[args[1]]
		if !ok {
			return usagef("help: unknown command %q; run \"authd help\" for the list", args[1])
		}
		// "authd help CMD" is "authd CMD -h": one usage text per command.
		return cmd(ctx, []string{"-h"}, getenv, stdin, stdout, stderr)
	default:
		cmd, ok := cmds[name]
		if !ok {
			return usagef("unknown command %q; run \"authd help\" for the list", name)
		}
		return cmd(ctx, args[1:], getenv, stdin, stdout, stderr)
	}
}

// isHelp reports whether arg asks for help, as the flag package reads it.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--h" || arg == "-help" || arg == "--help"
}
