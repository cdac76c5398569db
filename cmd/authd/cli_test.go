package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// runMain runs the program as main does: the exit status and what it
// printed.
func runMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	code = exitCode(run(ctx, args, env(nil), strings.NewReader(""), &out, &errOut), &errOut)
	return code, out.String(), errOut.String()
}

// TestCommandsRefuseStrayArguments: every command refuses an argument it
// does not take, with one line on stderr and exit status 2, before it
// touches a database or a port (Go's flag package stops at the first
// non-flag: "serve extra -addr x" used to listen on the default port).
func TestCommandsRefuseStrayArguments(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "extra", "-addr", "127.0.0.1:1"},
		{"serve", "-addr", "127.0.0.1:0", "extra"},
		{"dev", "extra"},
		{"migrate", "up", "extra"},
		{"migrate", "status", "x"},
		{"migrate", "sideways"},
		{"users", "add", "fred", "extra"},
		{"users", "remove", "fred"},
		{"clients", "create", "extra"},
		{"clients", "add", "extra"},
		{"clients", "list", "extra"},
		{"clients", "get", "id", "extra"},
		{"clients", "update", "id", "extra"},
		{"clients", "delete", "id", "extra"},
		{"clients", "rotate-secret", "id", "extra"},
		{"clients", "frobnicate"},
		{"janitor", "extra"},
		{"janitor", "--once", "extra"},
		{"jobs", "list", "failed"},
		{"jobs", "show"},
		{"version", "extra"},
		{"help", "serve", "extra"},
		{"help", "frobnicate"},
		{"frobnicate"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runMain(t, args...)
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "authd: ") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line on stderr", code, stdout, stderr)
			}
		})
	}
}

// TestCommandHelp: "authd CMD -h" (and --help) and "authd help CMD" print
// the command's usage on stdout and exit 0; both print the same text.
func TestCommandHelp(t *testing.T) {
	for name := range commands() {
		t.Run(name, func(t *testing.T) {
			code, help, stderr := runMain(t, "help", name)
			if code != 0 || stderr != "" || !strings.HasPrefix(help, "usage: ") || !strings.Contains(help, "authd "+name) {
				t.Fatalf("help %s: exit %d, stdout %q, stderr %q", name, code, help, stderr)
			}
			for _, h := range []string{"-h", "--help", "-help"} {
				code, out, stderr := runMain(t, name, h)
				if code != 0 || stderr != "" || out != help {
					t.Fatalf("%s %s: exit %d, stderr %q, stdout %q; want exit 0 and the help text %q", name, h, code, stderr, out, help)
				}
			}
		})
	}
	for _, args := range [][]string{
		{"migrate", "up", "-h"}, {"migrate", "status", "--help"}, {"users", "add", "-h"},
		{"users", "add", "fred", "-h"}, {"clients", "get", "-h"}, {"clients", "create", "--help"},
		{"jobs", "list", "-h"}, {"janitor", "--once", "-h"}, {"serve", "-addr", "x", "-h"},
	} {
		code, out, stderr := runMain(t, args...)
		if code != 0 || stderr != "" || !strings.HasPrefix(out, "usage: authd "+args[0]) || !strings.Contains(out, "-database-url") {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", args, code, stderr, out)
		}
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"help", "help"}} {
		if code, out, _ := runMain(t, args...); code != 0 || !strings.Contains(out, "authd help [COMMAND]") {
			t.Errorf("%v: exit %d, stdout %q", args, code, out)
		}
	}
	// Every command of the table is listed in the top-level usage.
	for name := range commands() {
		if !strings.Contains(usage, "authd "+name) {
			t.Errorf("the top-level usage does not list %q", name)
		}
	}
}

// TestREADMEConfigurationTable: the README's configuration table names
// every setting of "authd serve" (flag -x-y is AUTHD_X_Y), and nothing else.
func TestREADMEConfigurationTable(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `(AUTHD_[A-Z0-9_]+)` \\|")
	var inTable bool
	var documented []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "### Configuration"):
			inTable = true
		case inTable && strings.HasPrefix(line, "#"):
			inTable = false
		case inTable:
			if m := row.FindStringSubmatch(line); m != nil {
				documented = append(documented, m[1])
			}
		}
	}
	var c config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.flags(fs, true)
	var settings []string
	fs.VisitAll(func(f *flag.Flag) { settings = append(settings, envName(f.Name)) })
	slices.Sort(documented)
	slices.Sort(settings)
	if !slices.Equal(documented, settings) {
		var missing, extra []string
		for _, s := range settings {
			if !slices.Contains(documented, s) {
				missing = append(missing, s)
			}
		}
		for _, d := range documented {
			if !slices.Contains(settings, d) {
				extra = append(extra, d)
			}
		}
		t.Fatalf("README configuration table: missing %v, not a setting %v", missing, extra)
	}
}

// TestVersion: "authd version" prints the VCS revision, module and Go
// version of a binary built by the go command in a git work tree.
func TestVersion(t *testing.T) {
	code, out, _ := runMain(t, "version")
	if code != 0 || !strings.Contains(out, "revision") || !strings.Contains(out, "go1.") {
		t.Fatalf("version (test binary): exit %d, %q", code, out)
	}
	if testing.Short() {
		t.Skip("-short: not building the binary")
	}
	// The go command stamps VCS information when the module root holds a
	// .git directory (a fresh clone, as CI has; not a "git worktree", whose
	// .git is a file). GOFLAGS may say -buildvcs=false: the flag wins.
	st, err := os.Stat(filepath.Join("..", "..", ".git"))
	stamped := err == nil && st.IsDir()
	vcs := "-buildvcs=auto"
	if stamped {
		vcs = "-buildvcs=true"
	}
	bin := filepath.Join(t.TempDir(), "authd")
	if b, err := exec.Command("go", "build", vcs, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	b, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("authd version: %v\n%s", err, b)
	}
	out = string(b)
	if !strings.Contains(out, "module    github.com/authd/authd") || !strings.Contains(out, "go        go1.") || !strings.Contains(out, "revision  ") {
		t.Fatalf("authd version: %q", out)
	}
	if !stamped {
		t.Logf("no .git directory at the module root: not checking the revision\n%s", out)
		return
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	if want := "revision  " + strings.TrimSpace(string(head)); !strings.Contains(out, want) {
		t.Fatalf("authd version = %q, want %q", out, want)
	}
}
