package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/authd/authd/federation"
	"github.com/authd/authd/idempotency"
	"github.com/authd/authd/oauth"
)

const providersUsage = `usage: authd providers COMMAND [ID] [flags]

Manage upstream OpenID providers (Apple, Google, any OpenID provider) in
AUTHD_DATABASE_URL (with the server's AUTHD_SECRET and AUTHD_ISSUER), through
the same code path as the admin API (/admin/providers). Every command prints
the JSON answer the API would send; secrets are never printed.

  add             register a provider from JSON on stdin; prints its redirect_uri
  list            list providers, ordered by id (-limit, -cursor)
  show ID         show a provider
  update ID       replace a provider with JSON on stdin (omitted secrets are kept)
  delete ID       delete a provider (the identities linked through it stay)

add and update take -idempotency-key KEY. Running servers pick a change up
within 10 s.
`

var providersCommands = map[string]clientsCommand{
	"add":    {stdin: true, key: true, about: "Registers a provider from JSON on stdin and prints it with its redirect_uri."},
	"list":   {about: "Lists providers ordered by id."},
	"show":   {id: true, about: "Shows a provider (never its secret)."},
	"update": {id: true, stdin: true, key: true, about: "Replaces a provider with JSON on stdin; omitted secrets are kept."},
	"delete": {id: true, about: "Deletes a provider."},
}

// cmdProviders runs "authd providers COMMAND" on federation.Admin as the
// local caller "cli".
func cmdProviders(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) || args[0] == "help" {
		if len(args) > 0 {
			_, _ = io.WriteString(stdout, providersUsage)
			return nil
		}
		return usagef("usage: authd providers add|list|show|update|delete (run \"authd help providers\")")
	}
	name := args[0]
	cmd, ok := providersCommands[name]
	if !ok {
		return usagef("authd providers: unknown command %q; one of add, list, show, update, delete", name)
	}
	rest := args[1:]
	var (
		c config
		o clientsOptions
	)
	fs := flag.NewFlagSet("providers "+name, flag.ContinueOnError)
	c.flags(fs, false)
	fs.StringVar(&c.Issuer, "issuer", "", "authd's issuer URL, for the redirect_uri (AUTHD_ISSUER)")
	fs.BoolVar(&o.verbose, "v", false, "print the audit event on stderr")
	if cmd.key {
		fs.StringVar(&o.key, "idempotency-key", "", "make the command safe to retry")
	}
	if name == "list" {
		fs.IntVar(&o.limit, "limit", 50, "providers per page (1–200)")
		fs.StringVar(&o.cursor, "cursor", "", "next_cursor of the previous page")
	}
	var usageArgs []string
	if cmd.id {
		usageArgs = []string{"ID"}
	}
	id, envErr, err := parseWithID(fs, cmd.id, subcommandUsage("providers "+name, usageArgs, cmd.about), rest, getenv, stdout)
	if err != nil {
		return helpOK(err)
	}
	var errs problems
	errs.add(envErr)
	if c.DatabaseURL == "" || c.DatabaseURL == "memory" {
		errs.addf("AUTHD_DATABASE_URL: authd providers needs a postgres:// URL")
	}
	if len(c.Secret) < 32 {
		errs.addf("AUTHD_SECRET: must be set (the same as the server's): provider secrets are sealed under it")
	}
	if c.Issuer == "" && (name == "add" || name == "update" || name == "show" || name == "list") {
		errs.addf("AUTHD_ISSUER: must be set (as for serve): the redirect_uri to register at the provider is built from it")
	}
	if err := errs.err(); err != nil {
		return err
	}
	var body []byte
	if cmd.stdin {
		body, err = readJSONInput(stdin, "provider",
			fmt.Sprintf("the provider is read from stdin; pipe JSON in, e.g.: authd providers %s < apple.json", name),
			"nothing on stdin; pipe the provider's JSON in")
		if err != nil {
			return err
		}
	}
	store, closeStore, err := openRevokingStore(ctx, c, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	defer closeStore()
	keys, err := idempotency.New(idempotency.Config{Secret: []byte(c.Secret), Store: store})
	if err != nil {
		return usagef("%v", err)
	}
	admin := federation.NewAdmin([]byte(c.Secret), oauth.NormalizeIssuer(c.Issuer), store, keys, auditLogger(o.verbose, stderr))
	caller := keys.LocalCaller("cli")
	var out any
	switch name {
	case "add", "update":
		in, derr := federation.DecodeInput(body)
		if derr != nil {
			return usagef("%v", derr)
		}
		var res *federation.Result
		if name == "add" {
			res, err = admin.Create(ctx, caller, o.key, in)
		} else {
			res, err = admin.Update(ctx, caller, id, o.key, in)
		}
		if err == nil {
			out = json.RawMessage(res.JSON)
		}
	case "list":
		out, err = admin.List(ctx, caller, o.limit, o.cursor)
	case "show":
		out, err = admin.Get(ctx, caller, id)
	case "delete":
		if err = admin.Delete(ctx, caller, id); err == nil {
			out = map[string]any{"id": id, "deleted": true}
		}
	}
	if err != nil {
		return clientsError(err)
	}
	return printJSON(stdout, out)
}
