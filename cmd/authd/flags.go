package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"time"
)

// parse parses args, then fills every flag not given on the command line
// from its AUTHD_* variable (flag -database-url ← AUTHD_DATABASE_URL): a flag
// wins over the environment. The environment comes from getenv, so tests
// inject it. Errors name the setting: the command line's first, or every
// invalid value of the environment (settingErrors, see envErrors); -h
// prints usage (the command's text) and the flags to stdout and returns
// errHelp.
func parse(fs *flag.FlagSet, usage string, args []string, getenv func(string) string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, usage, stdout)
			return errHelp
		}
		return usagef("%s: %v (run \"authd help %s\")", fs.Name(), strings.ReplaceAll(err.Error(), "parse error", "invalid value (durations look like 60s, 15m or 1h)"), commandOf(fs))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if serr := fs.Set(f.Name, v); serr != nil {
				errs = append(errs, usagef("%s: %q is not valid%s", envName(f.Name), v, expectedForm(f)))
				// The flag package may have stored a zero; the default
				// keeps this setting out of the other checks' reports.
				_ = fs.Set(f.Name, f.DefValue)
			}
		}
	})
	if len(errs) > 0 {
		return settingErrors(errs)
	}
	return nil
}

// envErrors splits parse's error: the environment's invalid values (nil
// if none), which a command reports with the rest of its invalid
// settings, and anything else (help, the command line), which ends it.
func envErrors(err error) (settings, other error) {
	var se settingErrors
	if errors.As(err, &se) {
		return se, nil
	}
	return nil, err
}

// parseNoArgs is parse for a command that takes no positional argument:
// one is a usage error (Go's flag package stops at the first non-flag, so
// "serve extra -addr x" would otherwise ignore "-addr x" silently).
func parseNoArgs(fs *flag.FlagSet, usage string, args []string, getenv func(string) string, stdout io.Writer) error {
	envErr, err := envErrors(parse(fs, usage, args, getenv, stdout))
	if err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	return envErr
}

// noArgs refuses the arguments left after the flags of fs.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q (run \"authd help %s\")", fs.Name(), fs.Arg(0), commandOf(fs))
	}
	return nil
}

// commandOf is the top-level command of a flag set ("clients get" → clients).
func commandOf(fs *flag.FlagSet) string {
	name, _, _ := strings.Cut(fs.Name(), " ")
	return name
}

// printUsage writes a command's usage text and its flags.
func printUsage(fs *flag.FlagSet, usage string, w io.Writer) {
	io.WriteString(w, usage)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	io.WriteString(w, "\nFlags (each also an AUTHD_* variable, e.g. -database-url is AUTHD_DATABASE_URL):\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// envName is the AUTHD_* variable of a flag.
func envName(flagName string) string {
	return "AUTHD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// expectedForm says what a flag's value should look like.
func expectedForm(f *flag.Flag) string {
	switch f.Value.(type) {
	case interface{ Get() any }:
		switch f.Value.(flag.Getter).Get().(type) {
		case time.Duration:
			return ": expected a duration such as 60s, 15m or 1h"
		case float64:
			return ": expected a number"
		case bool:
			return ": expected true or false"
		}
	}
	return ""
}

// errHelp reports that -h was handled; the command exits 0.
var errHelp = errors.New("help requested")
