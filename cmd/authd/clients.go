package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/authd/authd/clientadmin"
)

const clientsUsage = `usage: authd clients COMMAND [ID] [flags]

Manage OAuth clients in AUTHD_DATABASE_URL (with the server's AUTHD_SECRET),
through the same code path as the admin API (/admin/clients). Every command
prints the JSON answer the API would send.

  create          register a client from RFC 7591 metadata JSON on stdin ("add" is an alias)
  list            list clients, ordered by client_id (-limit, -cursor)
  get ID          show a client (never its secret)
  update ID       replace a client's metadata with RFC 7591 JSON on stdin
  delete ID       delete a client; its codes and tokens die with it
  rotate-secret ID
                  issue a new client_secret (shown once); the old one stops working

create, update and rotate-secret take -idempotency-key KEY: a retry with the
same key and input prints the first answer (the same client_secret) instead
of acting twice. -v prints the audit event of each command on stderr (the
server logs those of the API).
`

// clientsCommand is one "authd clients" command: whether it takes a client
// ID, reads JSON on stdin, or takes an Idempotency-Key, and what it does
// (its -h).
type clientsCommand struct {
	id, stdin, key bool
	about          string
}

const createAbout = "Registers a client from RFC 7591 client metadata JSON on stdin and prints the\nclient information: the only time its client_secret is shown."

// clientsCommands are the "authd clients" commands.
var clientsCommands = map[string]clientsCommand{
	"create":        {stdin: true, key: true, about: createAbout},
	"add":           {stdin: true, key: true, about: createAbout + "\n\"add\" is \"create\"."},
	"list":          {about: "Lists clients ordered by client_id, a page at a time: -limit clients, from\n-cursor (the next_cursor of the previous page)."},
	"get":           {id: true, about: "Shows a client (never its secret)."},
	"update":        {id: true, stdin: true, key: true, about: "Replaces a client's metadata with RFC 7591 client metadata JSON on stdin."},
	"delete":        {id: true, about: "Deletes a client; its codes and tokens die with it."},
	"rotate-secret": {id: true, key: true, about: "Issues a new client_secret, shown once; the old one stops working."},
}

// usage is the command's own usage text ("authd clients create -h").
func (cc clientsCommand) usage(name string) string {
	var args []string
	if cc.id {
		args = []string{"ID"}
	}
	about := cc.about + "\nPrints the JSON answer the admin API (/admin/clients) would send."
	if cc.key {
		about += "\nWith -idempotency-key, a retry with the same key and input prints the first\nanswer instead of acting twice."
	}
	return subcommandUsage("clients "+name, args, about)
}

// clientsOptions are the flags of the "authd clients" commands beyond
// config's.
type clientsOptions struct {
	key     string
	limit   int
	cursor  string
	verbose bool
}

// clientsFlagSet is the flag set of "authd clients NAME".
func clientsFlagSet(name string, c *config, o *clientsOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("clients "+name, flag.ContinueOnError)
	c.flags(fs, false)
	fs.BoolVar(&o.verbose, "v", false, "print the audit event on stderr")
	if clientsCommands[name].key {
		fs.StringVar(&o.key, "idempotency-key", "", "make the command safe to retry: a retry with the same key and input prints the first answer")
	}
	if name == "list" {
		fs.IntVar(&o.limit, "limit", 50, "clients per page (1–200)")
		fs.StringVar(&o.cursor, "cursor", "", "next_cursor of the previous page")
	}
	return fs
}

// cmdClients runs "authd clients COMMAND": it calls clientadmin.Service,
// the code behind the admin API, as the local caller "cli", and prints the
// result as indented JSON on stdout. An error is returned (and printed
// once, by main) with the exit status clientsError picks; audit events go
// to stderr only with -v.
func cmdClients(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) || args[0] == "help" {
		if len(args) > 0 {
			_, _ = io.WriteString(stdout, clientsUsage)
			return nil
		}
		return usagef("usage: authd clients create|list|get|update|delete|rotate-secret (run \"authd help clients\")")
	}
	name := args[0]
	cmd, ok := clientsCommands[name]
	if !ok {
		return usagef("authd clients: unknown command %q; one of create, list, get, update, delete, rotate-secret", name)
	}
	rest := args[1:]

	var (
		c config
		o clientsOptions
	)
	fs := clientsFlagSet(name, &c, &o)
	id, envErr, err := parseWithID(fs, cmd.id, cmd.usage(name), rest, getenv, stdout)
	if err != nil {
		return helpOK(err)
	}
	var errs problems
	errs.add(envErr)
	if name == "list" && (o.limit < 1 || o.limit > 200) {
		errs.addf("-limit: must be between 1 and 200, got %d", o.limit)
	}
	if c.DatabaseURL == "" || c.DatabaseURL == "memory" {
		errs.addf("AUTHD_DATABASE_URL: authd clients needs a postgres:// URL (the memory store lives only inside a running server)")
	}
	if len(c.Secret) < 32 {
		errs.addf("AUTHD_SECRET: must be set (the same as the server's): client secrets are hashed, and Idempotency-Keys sealed, with keys derived from it")
	}
	if err := errs.err(); err != nil {
		return err
	}
	var body []byte
	if cmd.stdin {
		body, err = readJSONInput(stdin, "client metadata",
			fmt.Sprintf("client metadata is read from stdin; pipe RFC 7591 JSON in, e.g.: authd clients %s < client.json", name),
			fmt.Sprintf("client metadata: nothing on stdin; pipe RFC 7591 client metadata JSON in, e.g.: authd clients %s < client.json", name))
		if err != nil {
			return err
		}
	}

	store, closeStore, err := openRevokingStore(ctx, c, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	defer closeStore()
	svc, err := clientadmin.New(clientadmin.Config{Secret: []byte(c.Secret), Store: store, Logger: auditLogger(o.verbose, stderr)})
	if err != nil {
		return usagef("%v", err)
	}
	out, err := runClients(ctx, svc, svc.LocalCaller("cli"), name, id, o.key, body, o.limit, o.cursor)
	if err != nil {
		return clientsError(err)
	}
	return printJSON(stdout, out)
}

// runClients runs one "authd clients" command on the service and returns
// what to print: the JSON of a write's result (byte for byte what a retry
// with the same key gets), or a value to encode.
func runClients(ctx context.Context, svc *clientadmin.Service, caller clientadmin.Caller, name, id, key string, body []byte, limit int, cursor string) (any, error) {
	// refused audits a request whose input could not be decoded.
	refused := func(action string, err error) (any, error) {
		svc.Audit(ctx, clientadmin.AuditEvent{Who: caller.String(), What: action, ClientID: id, IdempotencyKey: key != "", Err: err})
		return nil, err
	}
	switch name {
	case "create", "add":
		meta, err := clientadmin.DecodeMetadata(body)
		if err != nil {
			return refused(clientadmin.ActionCreate, err)
		}
		res, err := svc.Create(ctx, caller, key, meta)
		if err != nil {
			return nil, err
		}
		return json.RawMessage(res.JSON), nil
	case "update":
		req, err := clientadmin.DecodeUpdate(body)
		if err != nil {
			return refused(clientadmin.ActionUpdate, err)
		}
		res, err := svc.Update(ctx, caller, id, key, req)
		if err != nil {
			return nil, err
		}
		return json.RawMessage(res.JSON), nil
	case "rotate-secret":
		res, err := svc.RotateSecret(ctx, caller, id, key)
		if err != nil {
			return nil, err
		}
		return json.RawMessage(res.JSON), nil
	case "list":
		return svc.List(ctx, caller, limit, cursor)
	case "get":
		return svc.Get(ctx, caller, id)
	case "delete":
		if err := svc.Delete(ctx, caller, id); err != nil {
			return nil, err
		}
		return map[string]any{"client_id": id, "deleted": true}, nil
	}
	return nil, usagef("authd clients: unknown command %q", name)
}

// clientsError picks the exit status from clientadmin's typed error (which
// federation.Admin answers too, for "authd providers"): a request the input
// made invalid (metadata, limit, cursor, a reused Idempotency-Key) is a
// usage error, exit status 2; anything else (an unknown client, a key still
// in flight, a conflict, the database) exits 1.
func clientsError(err error) error {
	for _, usage := range []error{clientadmin.ErrInvalidMetadata, clientadmin.ErrInvalidRedirectURI, clientadmin.ErrInvalidRequest, clientadmin.ErrKeyReused} {
		if errors.Is(err, usage) {
			return usagef("%w", err)
		}
	}
	return err
}

// printJSON prints v as indented JSON.
func printJSON(stdout io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = stdout.Write(append(b, '\n'))
	return err
}

// parseWithID parses the arguments of a command that takes an ID (when
// wantID) and flags: the ID comes first ("authd clients get ID -flags") or
// after the flags. Generated IDs are base64url and may start with "-", so
// only a defined flag is a flag. envErr are the settings' problems, for the
// caller to report with its own checks; err is parse's (errHelp after -h)
// or a usage error.
func parseWithID(fs *flag.FlagSet, wantID bool, usage string, args []string, getenv func(string) string, stdout io.Writer) (id string, envErr, err error) {
	if wantID && len(args) > 0 && !isFlag(fs, args[0]) {
		id, args = args[0], args[1:]
	}
	if envErr, err = envErrors(parse(fs, usage, args, getenv, stdout)); err != nil {
		return "", nil, err
	}
	if wantID && id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	} else if err := noArgs(fs); err != nil {
		return "", nil, err
	}
	if wantID && id == "" {
		return "", nil, usagef("usage: authd %s ID", fs.Name())
	}
	return id, envErr, nil
}

// readJSONInput reads a command's JSON input from stdin (at most 1 MiB).
// A terminal on stdin, or nothing piped in, is a usage error: onTerminal
// and onEmpty say what to pipe in.
func readJSONInput(stdin io.Reader, what, onTerminal, onEmpty string) ([]byte, error) {
	if isTerminal(stdin) {
		return nil, usagef("%s", onTerminal)
	}
	body, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, usagef("%s", onEmpty)
	}
	return body, nil
}

// isTerminal reports whether stdin is a terminal: a command that reads its
// input from stdin says how to pipe it in rather than wait for typing.
func isTerminal(stdin io.Reader) bool {
	f, ok := stdin.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// isFlag reports whether arg names a flag of fs (or asks for help).
func isFlag(fs *flag.FlagSet, arg string) bool {
	if !strings.HasPrefix(arg, "-") {
		return false
	}
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	return name == "h" || name == "help" || fs.Lookup(name) != nil
}

// auditLogger is where the service's audit events go: the server's log for
// the API; for a CLI user, nowhere unless -v asks for them.
func auditLogger(verbose bool, stderr io.Writer) *slog.Logger {
	if verbose {
		return newLogger(stderr, false, slog.LevelInfo)
	}
	return discardLogger()
}
