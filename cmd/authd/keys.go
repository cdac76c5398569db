package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/authd/authd/oauth"
	"github.com/authd/authd/signing"
)

// keysConfig holds the ID token signing key settings (package signing).
type keysConfig struct {
	Rotation   time.Duration
	Prepublish time.Duration
	IDTokenTTL time.Duration
}

func (k *keysConfig) flags(fs *flag.FlagSet) {
	fs.DurationVar(&k.Rotation, "key-rotation", 720*time.Hour, "age at which the ID token signing keys are replaced by the rotation job (AUTHD_KEY_ROTATION)")
	fs.DurationVar(&k.Prepublish, "key-prepublish", 0, "how long a new signing key is in the JWKS before it signs, at most half of AUTHD_KEY_ROTATION; 0: 24h or half of AUTHD_KEY_ROTATION if less (AUTHD_KEY_PREPUBLISH)")
	fs.DurationVar(&k.IDTokenTTL, "id-token-ttl", time.Hour, "ID token lifetime; a retired key stays published this long (AUTHD_ID_TOKEN_TTL)")
}

// validate checks the settings; errors name the variable.
func (k *keysConfig) validate() error {
	var errs problems
	if k.Rotation < 20*time.Millisecond {
		errs.addf("AUTHD_KEY_ROTATION: must be at least 20ms (got %s)", k.Rotation)
	}
	if k.Prepublish == 0 {
		k.Prepublish = min(24*time.Hour, k.Rotation/2)
	}
	if k.Prepublish < 0 || k.Prepublish > k.Rotation/2 {
		errs.addf("AUTHD_KEY_PREPUBLISH: must be positive and at most half of AUTHD_KEY_ROTATION (%s), got %s", k.Rotation, k.Prepublish)
	}
	if k.IDTokenTTL < time.Second {
		errs.addf("AUTHD_ID_TOKEN_TTL: must be at least 1s (got %s)", k.IDTokenTTL)
	}
	return errs.err()
}

// apply copies the settings into the server's configuration.
func (k *keysConfig) apply(oc *oauth.Config) {
	oc.IDTokenTTL = k.IDTokenTTL
}

// signingConfig is the settings as package signing takes them.
func (k *keysConfig) signingConfig(secret string, log *slog.Logger) signing.Config {
	return signing.Config{Secret: []byte(secret), RotateEvery: k.Rotation, Prepublish: k.Prepublish,
		TokenTTL: k.IDTokenTTL, Logger: log}
}

const keysUsage = `usage: authd keys list|rotate [flags]

Shows or rotates the ID token signing keys in AUTHD_DATABASE_URL (sealed
under AUTHD_SECRET; both required). Each generation holds an RS256 and an
ES256 key. States: next (published, signs after AUTHD_KEY_PREPUBLISH),
current (signing), retired (published until every ID token it signed has
expired), expired (deleted by the next rotation).

  list     list the keys and their states
  rotate   add a new generation now (the rotation job does it every
           AUTHD_KEY_ROTATION); it signs after AUTHD_KEY_PREPUBLISH
`

// keysCommands are the "authd keys" commands and what they do (their -h).
var keysCommands = map[string]string{
	"list":   "Lists the ID token signing keys in AUTHD_DATABASE_URL and their states: next,\ncurrent, retired, expired.",
	"rotate": "Adds a new generation of signing keys now (the rotation job does it every\nAUTHD_KEY_ROTATION), then lists the keys; it signs after AUTHD_KEY_PREPUBLISH.",
}

// keysFlagSet is the flag set of "authd keys" (name "keys" or "keys SUB").
func keysFlagSet(name string, c *config, kc *keysConfig) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	c.flags(fs, false)
	kc.flags(fs)
	return fs
}

// cmdKeys runs "authd keys list|rotate".
func cmdKeys(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var (
		c  config
		kc keysConfig
	)
	fs := keysFlagSet("keys", &c, &kc)
	if len(args) == 0 || keysCommands[args[0]] == "" {
		if len(args) > 0 && (isHelp(args[0]) || args[0] == "help") {
			printUsage(fs, keysUsage, stdout)
			return nil
		}
		if len(args) > 0 {
			return usagef("keys: unknown command %q: list or rotate (run \"authd help keys\")", args[0])
		}
		return usagef("keys: missing list or rotate (run \"authd help keys\")")
	}
	sub := args[0]
	fs.Init("keys "+sub, flag.ContinueOnError)
	envErr, err := envErrors(parseNoArgs(fs, subcommandUsage("keys "+sub, nil, keysCommands[sub]), args[1:], getenv, stdout))
	if err != nil {
		return helpOK(err)
	}
	var errs problems
	errs.add(envErr)
	if len(c.Secret) < 32 {
		errs.addf("AUTHD_SECRET: must be at least 32 bytes (got %d): the keys are sealed under it", len(c.Secret))
	}
	errs.add(kc.validate())
	if c.DatabaseURL == "" || c.DatabaseURL == "memory" {
		errs.addf("AUTHD_DATABASE_URL: keys needs a postgres:// URL (the memory store's keys live and die with its process)")
	}
	if err := errs.err(); err != nil {
		return err
	}
	store, closeStore, err := openStore(ctx, c.DatabaseURL, true)
	if err != nil {
		return err
	}
	defer closeStore()
	m, err := signing.New(store, kc.signingConfig(c.Secret, newLogger(stderr, false, slog.LevelWarn)))
	if err != nil {
		return usagef("%v", err)
	}
	if sub == "rotate" {
		added, err := m.Rotate(ctx, true, nil)
		if err != nil {
			return err
		}
		if !added {
			fmt.Fprintln(stdout, "keys: another process added a generation at the same moment; none added")
		}
	}
	list, err := m.List(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KID\tALG\tGENERATION\tCREATED\tSTATE")
	for _, k := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", k.ID, k.Alg, k.Generation, k.CreatedAt.UTC().Format(time.RFC3339), k.State)
	}
	return tw.Flush()
}
