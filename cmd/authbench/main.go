// Command authbench is authd's load generator. It drives a running authd
// through its public HTTP surface only (authorization endpoint, login form,
// token and introspection endpoints), shows a live progress line on stderr
// and prints, per step, throughput and p50/p90/p99/max latency, with errors
// broken down by HTTP status and OAuth "error" code.
//
// Usage:
//
//	authbench -mode MODE [flags]           load a running authd
//	authbench ceiling-http [flags]         HTTP ceiling: a fixed token-sized JSON handler
//	authbench ceiling-db -database-url URL PostgreSQL ceiling: one exchange's SQL, from Go
//	authbench report FILE.json...          Markdown table (with ceiling ratios) of -json results
//	authbench compare -base DIRS -head DIRS median ok/s of two revisions per mode, and their ratio
//	authbench free-port [-n N]             N free TCP ports on 127.0.0.1
//	authbench check-server -pid PID URL... check that PID is what listens there
//
// Modes: login, sso, sso-consent, exchange, burst, replay, refresh,
// introspect, client-credentials (and ceiling-http, to load an external
// "authbench ceiling-http -serve-only").
//
// Traffic goes only where -target points; the script bench/run.sh points it
// at 127.0.0.1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "authbench:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a usage mistake: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

const usage = `authbench — load generator for authd (public HTTP surface only)

Usage:
  authbench -mode MODE [flags]             load a running authd
  authbench ceiling-http [flags]           HTTP ceiling: serve a fixed token-sized JSON and load it
  authbench ceiling-db -database-url URL   PostgreSQL ceiling: one exchange's SQL, driven from Go
  authbench report FILE.json...            Markdown table of -json results, with ceiling ratios
  authbench compare -base DIRS -head DIRS  median ok/s per mode of two revisions and HEAD/BASE (bench/compare.sh)
  authbench free-port [-n N]               print N free TCP ports on 127.0.0.1
  authbench check-server -pid PID URL...   check that PID is the process listening there

Modes:
  login               authorize → login form (password, CSRF) → consent/skip → token (PKCE S256)
  sso                 authorize with the session cookie (no password) → token
  sso-consent         a returning user of a third-party client (no skip_consent; an https
                      -redirect-uri): authorize with the session cookie, a nonce and the
                      consent remembered (allowed once per browser, not timed) → token →
                      ID token checked (nonce, aud, iss, exp, ES256/RS256 signature)
  exchange            token exchange only; codes minted ahead in the same run (not timed)
  token-exchange      RFC 8693 exchanges of fresh provider ID tokens (the native sign-in);
                      authbench serves the provider on -upstream-listen
  burst               exchanges as in "exchange" for half of -d, then -burst password
                      sign-ins (login flows) at once while the exchanges go on; reports
                      the exchange p99 before and during the burst and their ratio
  replay              duplicate exchanges answered by the replay cache
  refresh             refresh_token grant, rotating
  introspect          RFC 7662 introspection by a confidential client
  client-credentials  client_credentials grant by a confidential client

Run "authbench -h", "authbench ceiling-http -h" or "authbench ceiling-db -h" for flags.
`

// run is the whole program; no package state.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "ceiling-http":
			return cmdCeilingHTTP(ctx, args[1:], stdout, stderr)
		case "ceiling-db":
			return cmdCeilingDB(ctx, args[1:], stdout, stderr)
		case "report":
			return cmdReport(args[1:], stdout)
		case "compare":
			return cmdCompare(args[1:], stdout)
		case "free-port":
			return cmdFreePort(args[1:], stdout, stderr)
		case "check-server":
			return cmdCheckServer(args[1:], stdout, stderr)
		case "help", "-help", "--help":
			fmt.Fprint(stdout, usage)
			return nil
		}
	}
	return cmdLoad(ctx, args, stdout, stderr)
}

// cmdLoad runs one mode against -target.
func cmdLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("authbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage+"\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.Mode, "mode", "", "login, passkey, challenge, sso, sso-consent, exchange, token-exchange, burst, replay, refresh, introspect, client-credentials or ceiling-http")
	o.loadFlags(fs)
	o.clientFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	m, ok := modes[o.Mode]
	if !ok {
		return usagef("-mode: %q is not one of login, passkey, challenge, sso, sso-consent, exchange, token-exchange, burst, replay, refresh, introspect, client-credentials, ceiling-http", o.Mode)
	}
	if err := o.validate(); err != nil {
		return err
	}
	if err := m.check(&o); err != nil {
		return err
	}
	if o.ServerPID > 0 {
		// Measure only the server this run was told about: nobody else's
		// authd on the same port, and its counters, not another's.
		for _, t := range []string{o.Target, o.MetricsURL} {
			if t == "" {
				continue
			}
			if err := verifyServer(o.ServerPID, t); err != nil {
				return err
			}
		}
	}
	res, err := runLoad(ctx, &o, m, stderr)
	if err != nil {
		return err
	}
	return o.emit(res, stdout, stderr)
}
