package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/storage"
)

const usersUsage = `usage: authd users COMMAND ARGS [flags]

Manage the people who sign in, in AUTHD_DATABASE_URL. Every command prints
JSON on stdout; passwords are read from stdin (one line, 8–256 bytes after
PRECIS OpaqueString), never from the command line.

  add NAME            add a user (-email, -email-verified, -name); prints its sub
  list                list users by username (-limit, -cursor)
  show NAME           show a user, with its stable sub
  rename OLD NEW      change the login name; the sub, tokens and consents stay
  set-password NAME   new password from stdin; ends sessions, revokes tokens
  disable NAME        stop sign-ins; ends sessions, revokes codes and tokens
  enable NAME         allow sign-ins again
  delete NAME         delete; ends sessions, revokes codes and tokens
  sessions NAME       list the user's browser sessions
  sign-out NAME       end every session of the user (tokens stay valid)
  require-mfa NAME    require a second factor (-off to lift); set up at next sign-in
  reset-mfa NAME      delete the user's second factors; ends their sessions
  consents NAME       list the user's remembered consents
  revoke-consent NAME CLIENT_ID
                      withdraw a consent; revokes that client's tokens
  passkeys NAME       list the user's passkeys (credential ids in base64url)
  remove-passkey NAME ID
                      remove a passkey (not the user's last way to sign in)
  passkey-link NAME   a single-use link (15 minutes) to add one passkey

add -no-password creates a user without a password (they enrol with a
passkey-link); set-password -no-password removes the password of a user
who has a passkey, ends their sessions and revokes their tokens.

Usernames are compared after PRECIS UsernameCaseMapped (RFC 8265 §3.3):
"Alice" and "alice" are one account.
`

// usersCommand is one "authd users" command: its positional arguments,
// whether it reads a password from stdin, and what it does (its -h).
type usersCommand struct {
	args  []string
	stdin bool
	about string
}

// usersCommands are the "authd users" commands.
var usersCommands = map[string]usersCommand{
	"add":            {[]string{"NAME"}, true, "Adds a user and prints it, with its stable sub. The password is read from stdin\n(one line, 8–256 bytes after PRECIS OpaqueString), never from the command line."},
	"list":           {nil, false, "Lists users by username, a page at a time: -limit users, from -cursor (the\nnext_cursor of the previous page)."},
	"show":           {[]string{"NAME"}, false, "Shows a user, with its stable sub."},
	"rename":         {[]string{"OLD", "NEW"}, false, "Changes a user's login name; the sub, tokens and consents stay."},
	"set-password":   {[]string{"NAME"}, true, "Sets a new password, read from stdin (one line); ends the user's sessions and\nrevokes their tokens."},
	"disable":        {[]string{"NAME"}, false, "Stops the user's sign-ins; ends their sessions and revokes their codes and\ntokens."},
	"enable":         {[]string{"NAME"}, false, "Allows the user's sign-ins again."},
	"delete":         {[]string{"NAME"}, false, "Deletes the user; ends their sessions and revokes their codes and tokens."},
	"sessions":       {[]string{"NAME"}, false, "Lists the user's browser sessions."},
	"sign-out":       {[]string{"NAME"}, false, "Ends every browser session of the user; their tokens stay valid."},
	"consents":       {[]string{"NAME"}, false, "Lists the user's remembered consents."},
	"require-mfa":    {[]string{"NAME"}, false, "Requires a second factor of the user: one without it sets it up at the next\nsign-in. -off lifts the requirement."},
	"reset-mfa":      {[]string{"NAME"}, false, "Deletes the user's second factors (authenticator app, recovery codes) and ends\ntheir sessions."},
	"revoke-consent": {[]string{"NAME", "CLIENT_ID"}, false, "Withdraws the user's consent for a client and revokes the tokens issued to\nthat client."},
	"passkeys":       {[]string{"NAME"}, false, "Lists the user's passkeys, each with its credential id in base64url."},
	"remove-passkey": {[]string{"NAME", "ID"}, false, "Removes the user's passkey ID (base64url, as listed); refused if it is the\nuser's last way to sign in."},
	"passkey-link":   {[]string{"NAME"}, false, "Prints a single-use link, valid 15 minutes, with which the user adds one\npasskey (and is signed in to nothing else). Needs AUTHD_ISSUER."},
}

// usage is the command's own usage text ("authd users add -h").
func (u usersCommand) usage(name string) string {
	return subcommandUsage("users "+name, u.args, u.about+"\nPrints JSON on stdout. Usernames are compared after PRECIS UsernameCaseMapped\n(RFC 8265 §3.3).")
}

// usersOptions are the flags of the "authd users" commands beyond config's.
type usersOptions struct {
	email, name   string
	emailVerified bool
	limit         int
	cursor        string
	noPassword    bool // add, set-password: -no-password
	off           bool // require-mfa -off
}

// usersFlagSet is the flag set of "authd users NAME".
func usersFlagSet(name string, c *config, o *usersOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("users "+name, flag.ContinueOnError)
	c.flags(fs, false)
	switch name {
	case "add":
		fs.StringVar(&o.email, "email", "", "email address (profile claim)")
		fs.BoolVar(&o.emailVerified, "email-verified", false, "mark the email address verified")
		fs.StringVar(&o.name, "name", "", "full name (profile claim)")
		fs.BoolVar(&o.noPassword, "no-password", false, "no password: the user enrols a passkey with authd users passkey-link")
	case "set-password":
		fs.BoolVar(&o.noPassword, "no-password", false, "remove the password (the user must have a passkey)")
	case "passkey-link":
		fs.StringVar(&c.Issuer, "issuer", "", "the server's public URL, where the link points (AUTHD_ISSUER)")
		fs.StringVar(&c.passkeys.RPID, "webauthn-rp-id", "", "passkeys' relying party ID, as the server's (AUTHD_WEBAUTHN_RP_ID)")
	case "list":
		fs.IntVar(&o.limit, "limit", 50, "users per page, 1–200")
		fs.StringVar(&o.cursor, "cursor", "", "the next_cursor of the previous page")
	case "require-mfa":
		fs.BoolVar(&o.off, "off", false, "lift the requirement")
	}
	return fs
}

// cmdUsers runs "authd users COMMAND": it calls the identity service (the
// code an admin HTTP adapter would call) and prints its answer as JSON.
func cmdUsers(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) || args[0] == "help" {
		if len(args) > 0 {
			_, _ = io.WriteString(stdout, usersUsage)
			return nil
		}
		return usagef("usage: authd users add|list|show|rename|set-password|disable|enable|delete|sessions|sign-out|consents|revoke-consent|require-mfa|reset-mfa|passkeys|remove-passkey|passkey-link (see authd users -h)")
	}
	cmd, ok := usersCommands[args[0]]
	if !ok {
		return usagef("authd users: unknown command %q (see authd users -h)", args[0])
	}
	var (
		c config
		o usersOptions
	)
	fs := usersFlagSet(args[0], &c, &o)
	rest := args[1:]
	var pos []string
	for len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		pos, rest = append(pos, rest[0]), rest[1:]
	}
	usage := usagef("usage: authd users %s [flags] (see authd users %s -h)", strings.Join(append([]string{args[0]}, cmd.args...), " "), args[0])
	if len(pos) != len(cmd.args) && !(len(rest) > 0 && isHelp(rest[0])) {
		return usage
	}
	envErr, err := envErrors(parse(fs, cmd.usage(args[0]), rest, getenv, stdout))
	if err != nil {
		return helpOK(err)
	}
	if fs.NArg() > 0 {
		return usagef("users %s: unexpected argument %q (run \"authd users %s -h\")", args[0], fs.Arg(0), args[0])
	}
	var errs problems
	errs.add(envErr)
	if c.DatabaseURL == "" || c.DatabaseURL == "memory" {
		errs.addf("AUTHD_DATABASE_URL: users %s needs a postgres:// URL (the memory store lives only inside a running server)", args[0])
	}
	if err := errs.err(); err != nil {
		return err
	}
	var password string
	if cmd.stdin && !o.noPassword {
		p, err := readPassword(stdin, args[0], pos[0])
		if err != nil {
			return err
		}
		password = p
	}
	store, closeStore, err := openRevokingStore(ctx, c, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	defer closeStore()
	svc := identity.New(store, identity.Options{})
	var out any
	if isPasskeyCommand(args[0], o) {
		out, err = runPasskeyUsers(ctx, c, store, svc, args[0], pos) // users_passkeys.go
	} else {
		out, err = runUsers(ctx, svc, args[0], pos, password, identity.NewUser{Email: o.email, EmailVerified: o.emailVerified, Name: o.name, NoPassword: o.noPassword}, o)
	}
	if err != nil {
		return usersError(err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// runUsers performs one command and returns what to print.
func runUsers(ctx context.Context, svc *identity.Service, cmd string, pos []string, password string, profile identity.NewUser, o usersOptions) (any, error) {
	limit, cursor, off := o.limit, o.cursor, o.off
	switch cmd {
	case "add":
		profile.Username, profile.Password = pos[0], password
		return svc.Add(ctx, profile)
	case "list":
		if limit < 1 || limit > 200 {
			return nil, fmt.Errorf("%w: -limit must be 1–200", errUsage)
		}
		us, err := svc.List(ctx, cursor, limit)
		if err != nil {
			return nil, err
		}
		page := struct {
			Users      []identity.User `json:"users"`
			NextCursor string          `json:"next_cursor,omitempty"`
		}{Users: us}
		if len(us) == limit {
			page.NextCursor = us[len(us)-1].Username
		}
		return page, nil
	case "show":
		return svc.Get(ctx, pos[0])
	case "rename":
		return svc.Rename(ctx, pos[0], pos[1])
	case "set-password":
		u, err := svc.SetPassword(ctx, pos[0], password)
		return withRevoked(u, err)
	case "disable":
		u, err := svc.Disable(ctx, pos[0])
		return withRevoked(u, err)
	case "enable":
		return svc.Enable(ctx, pos[0])
	case "delete":
		u, err := svc.Delete(ctx, pos[0])
		if err != nil {
			return nil, err
		}
		return map[string]any{"sub": u.Subject, "username": u.Username, "deleted": true, "sessions_ended": true, "tokens_revoked": true}, nil
	case "sessions":
		xs, err := svc.Sessions(ctx, pos[0])
		return map[string]any{"sessions": xs}, err
	case "sign-out":
		n, err := svc.SignOut(ctx, pos[0])
		return map[string]any{"username": pos[0], "sessions_ended": n}, err
	case "require-mfa":
		u, err := svc.RequireMFA(ctx, pos[0], !off)
		if err != nil {
			return nil, err
		}
		return map[string]any{"sub": u.Subject, "username": u.Username, "mfa_required": !off}, nil
	case "reset-mfa":
		return svc.ResetMFA(ctx, pos[0])
	case "consents":
		cs, err := svc.Consents(ctx, pos[0])
		return map[string]any{"consents": cs}, err
	case "revoke-consent":
		if err := svc.RevokeConsent(ctx, pos[0], pos[1]); err != nil {
			return nil, err
		}
		return map[string]any{"username": pos[0], "client_id": pos[1], "consent_revoked": true, "tokens_revoked": true}, nil
	}
	return nil, fmt.Errorf("%w: unknown command %q", errUsage, cmd)
}

// withRevoked shows a user after an operation that ended its access.
func withRevoked(u identity.User, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return struct {
		identity.User
		SessionsEnded bool `json:"sessions_ended"`
		TokensRevoked bool `json:"tokens_revoked"`
	}{u, true, true}, nil
}

var errUsage = errors.New("usage")

// usersError maps the service's typed errors to exit status 2 (the
// operator's input) or 1 (anything else).
func usersError(err error) error {
	for _, e := range []error{identity.ErrInvalidUsername, identity.ErrInvalidPassword, identity.ErrInvalidProfile,
		identity.ErrUserExists, identity.ErrUserNotFound, identity.ErrConsentNotFound, errUsage} {
		if errors.Is(err, e) {
			return usagef("%v", err)
		}
	}
	if errors.Is(err, storage.ErrNotFound) || isPasskeyUsageError(err) {
		return usagef("%v", err)
	}
	return err
}

// readPassword reads one line from stdin, refusing a terminal (the
// password would echo) so it is always piped in.
func readPassword(stdin io.Reader, cmd, username string) (string, error) {
	if isTerminal(stdin) {
		return "", usagef("the password is read from stdin; pipe it in, e.g.: printf '%%s\\n' \"$PASSWORD\" | authd users %s %s", cmd, username)
	}
	if stdin == nil {
		return "", usagef("the password is read from stdin")
	}
	line, err := bufio.NewReader(io.LimitReader(stdin, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	if _, err := identity.PreparePassword(password); err != nil {
		return "", usagef("password: %v", err)
	}
	return password, nil
}
