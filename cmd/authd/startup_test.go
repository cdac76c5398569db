package main

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestSubcommandHelp: "authd CMD SUB -h" (and -help, --help) prints SUB's
// own usage line and its flags on stdout, exit 0, for every subcommand;
// it is not the parent's usage.
func TestSubcommandHelp(t *testing.T) {
	want := map[string]string{ // the usage lines of a few, in full
		"users add":            "usage: authd users add NAME [flags]\n",
		"users rename":         "usage: authd users rename OLD NEW [flags]\n",
		"users revoke-consent": "usage: authd users revoke-consent NAME CLIENT_ID [flags]\n",
		"users list":           "usage: authd users list [flags]\n",
		"clients create":       "usage: authd clients create [flags]\n",
		"clients get":          "usage: authd clients get ID [flags]\n",
		"migrate up":           "usage: authd migrate up [flags]\n",
		"keys rotate":          "usage: authd keys rotate [flags]\n",
		"providers show":       "usage: authd providers show ID [flags]\n",
		"providers update":     "usage: authd providers update ID [flags]\n",
		"providers delete":     "usage: authd providers delete ID [flags]\n",
	}
	n := 0
	for cmd, subs := range subcommands() {
		_, parent, _ := runMain(t, cmd, "-h")
		for _, sub := range subs {
			n++
			t.Run(cmd+" "+sub, func(t *testing.T) {
				for _, h := range []string{"-h", "-help", "--help"} {
					code, out, stderr := runMain(t, cmd, sub, h)
					first, _, _ := strings.Cut(out, "\n")
					if code != 0 || stderr != "" || !strings.HasPrefix(out, "usage: authd "+cmd+" "+sub) || !strings.HasSuffix(first, "[flags]") {
						t.Fatalf("%s %s %s: exit %d, stderr %q, stdout %q", cmd, sub, h, code, stderr, out)
					}
					if !strings.Contains(out, "\nFlags (") || !strings.Contains(out, "-database-url") {
						t.Errorf("%s %s %s: no flags:\n%s", cmd, sub, h, out)
					}
					if out == parent && len(subs) > 1 { // "jobs -h" is "jobs list -h"
						t.Errorf("%s %s %s prints the parent's usage", cmd, sub, h)
					}
					if w, ok := want[cmd+" "+sub]; ok && !strings.HasPrefix(out, w) {
						t.Errorf("%s %s %s: usage line %q, want %q", cmd, sub, h, first, w)
					}
				}
			})
		}
	}
	if n < 23 {
		t.Errorf("%d subcommands, want the 12 of users, 7 of clients, 2 of migrate, 2 of keys and jobs list", n)
	}
	// A subcommand's own flags are shown where they belong.
	_, add, _ := runMain(t, "users", "add", "-h")
	_, list, _ := runMain(t, "clients", "list", "-h")
	if !strings.Contains(add, "-email-verified") || !strings.Contains(list, "-cursor") || strings.Contains(add, "-cursor") {
		t.Errorf("users add -h:\n%s\nclients list -h:\n%s", add, list)
	}
}

// TestHelpHelp: "authd help -h" (and "authd help help") print the
// command list, exit 0, and the list names every users subcommand.
func TestHelpHelp(t *testing.T) {
	_, want, _ := runMain(t, "help")
	for _, args := range [][]string{{"help", "-h"}, {"help", "--help"}, {"help", "help"}} {
		if code, out, stderr := runMain(t, args...); code != 0 || out != want || stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
	for _, sub := range subcommands()["users"] {
		if !strings.Contains(want, sub) {
			t.Errorf("authd help does not list users %s", sub)
		}
	}
}

// TestVersionFlags: "authd --version" and "authd -version" print what
// "authd version" prints.
func TestVersionFlags(t *testing.T) {
	code, want, _ := runMain(t, "version")
	if code != 0 || !strings.HasPrefix(want, "authd ") {
		t.Fatalf("version: exit %d, %q", code, want)
	}
	for _, flag := range []string{"--version", "-version"} {
		if code, out, stderr := runMain(t, flag); code != 0 || out != want || stderr != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %q", flag, code, out, stderr, want)
		}
	}
}

// TestConfigErrorsAllAtOnce: every invalid setting is reported before
// anything is opened, one line each naming it, exit status 2.
func TestConfigErrorsAllAtOnce(t *testing.T) {
	var out, errOut syncBuffer
	e := map[string]string{
		"AUTHD_SECRET": "short", "AUTHD_DATABASE_URL": "mysql://x", "AUTHD_REDIS_URL": "http://x",
		"AUTHD_CODE_TTL": "soon", "AUTHD_REPLAY_WINDOW": "-1s", "AUTHD_JANITOR_BATCH": "0",
		"AUTHD_CLIENT_CACHE_TTL": "1h", "AUTHD_SESSION_TTL": "1s",
	}
	args := []string{"serve", "-addr", "127.0.0.1:99999", "-log-level", "loud", "-pprof", "yes", "-issuer", "login.example.com"}
	code := exitCode(run(t.Context(), args, env(e), strings.NewReader(""), &out, &errOut), &errOut)
	lines := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
	if code != 2 || out.String() != "" {
		t.Fatalf("exit %d, stdout %q", code, out.String())
	}
	for _, setting := range []string{"AUTHD_SECRET", "AUTHD_DATABASE_URL", "AUTHD_REDIS_URL", "AUTHD_CODE_TTL", "AUTHD_REPLAY_WINDOW",
		"AUTHD_JANITOR_BATCH", "AUTHD_CLIENT_CACHE_TTL", "AUTHD_SESSION_TTL", "AUTHD_ADDR", "AUTHD_LOG_LEVEL", "AUTHD_PPROF", "AUTHD_ISSUER"} {
		found := 0
		for _, l := range lines {
			if strings.HasPrefix(l, "authd: "+setting) {
				found++
			}
		}
		if found != 1 {
			t.Errorf("%d lines name %s, want 1:\n%s", found, setting, errOut.String())
		}
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "authd: AUTHD_") {
			t.Errorf("line %q names no setting", l)
		}
	}

	// The database commands report theirs together too.
	var ue usageError
	err := run(t.Context(), []string{"clients", "list", "-limit", "0"}, env(nil), strings.NewReader(""), &out, &errOut)
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "-limit") || !strings.Contains(err.Error(), "AUTHD_DATABASE_URL") || !strings.Contains(err.Error(), "AUTHD_SECRET") {
		t.Errorf("clients list -limit 0: %v", err)
	}
}

// TestStartupWarnings: what is wrong but does not stop authd is one
// warning each on stderr, and authd serves: an AUTHD_* variable that is no
// setting (naming the closest), an http:// issuer off loopback, an issuer
// with a trailing slash (removed, the same in discovery), a Redis that
// does not answer.
func TestStartupWarnings(t *testing.T) {
	secret := strings.Repeat("w", 40)
	t.Run("unknown variable", func(t *testing.T) {
		t.Parallel()
		e := map[string]string{"AUTHD_SECRET": secret, "AUTHD_DATABASE_URL": "memory", "AUTHD_REPLAY_WINDOWS": "1m", "AUTHD_TEST_ANYTHING": "1"}
		_, stderr := startCommand(t, []string{"serve", "-addr", "127.0.0.1:0"}, e, publicAddrRe)
		log := stderr.String()
		if countLines(log, `"level":"WARN"`, "AUTHD_REPLAY_WINDOWS is not a setting", "did you mean AUTHD_REPLAY_WINDOW?") != 1 {
			t.Errorf("no warning naming AUTHD_REPLAY_WINDOW:\n%s", log)
		}
		if strings.Contains(log, "AUTHD_TEST_ANYTHING") || strings.Contains(log, "AUTHD_SECRET is") {
			t.Errorf("a known variable is warned about:\n%s", log)
		}
	})
	t.Run("http issuer", func(t *testing.T) {
		t.Parallel()
		e := map[string]string{"AUTHD_SECRET": secret, "AUTHD_DATABASE_URL": "memory"}
		_, stderr := startCommand(t, []string{"serve", "-addr", "127.0.0.1:0", "-issuer", "http://login.example.com"}, e, publicAddrRe)
		if countLines(stderr.String(), `"level":"WARN"`, "AUTHD_ISSUER is http://", `"issuer":"http://login.example.com"`) != 1 {
			t.Errorf("no warning about the http issuer:\n%s", stderr.String())
		}
		_, stderr = startCommand(t, []string{"serve", "-addr", "127.0.0.1:0", "-issuer", "http://localhost:8080"}, e, publicAddrRe)
		if strings.Contains(stderr.String(), "AUTHD_ISSUER is http://") {
			t.Errorf("a loopback http issuer is warned about:\n%s", stderr.String())
		}
	})
	t.Run("trailing slash", func(t *testing.T) {
		t.Parallel()
		e := map[string]string{"AUTHD_SECRET": secret, "AUTHD_DATABASE_URL": "memory", "AUTHD_ISSUER": "https://login.example.com/"}
		_, stderr := startCommand(t, []string{"serve", "-addr", "127.0.0.1:0"}, e, publicAddrRe)
		log := stderr.String()
		if countLines(log, `"level":"WARN"`, "trailing slash removed", `"issuer":"https://login.example.com"`) != 1 {
			t.Errorf("no warning about the trailing slash:\n%s", log)
		}
		resp, err := http.Get("http://" + publicAddrRe.FindStringSubmatch(log)[1] + "/.well-known/openid-configuration")
		if err != nil {
			t.Fatal(err)
		}
		var meta map[string]any
		if err := json.Unmarshal([]byte(readAll(t, resp)), &meta); err != nil {
			t.Fatal(err)
		}
		if meta["issuer"] != "https://login.example.com" || meta["token_endpoint"] != "https://login.example.com/oauth2/token" {
			t.Errorf("discovery: issuer %v, token_endpoint %v", meta["issuer"], meta["token_endpoint"])
		}
	})
	t.Run("redis not answering", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now: connections are refused
		e := map[string]string{"AUTHD_SECRET": secret, "AUTHD_DATABASE_URL": "memory", "AUTHD_JANITOR": "off"}
		_, stderr := startCommand(t, []string{"serve", "-addr", "127.0.0.1:0", "-redis-url", "redis://" + addr}, e, publicAddrRe)
		log := stderr.String()
		if countLines(log, `"level":"WARN"`, "Redis does not answer", `"redis":"`+addr+`"`) != 1 {
			t.Errorf("no warning about Redis:\n%s", log)
		}
		resp, err := http.Get("http://" + publicAddrRe.FindStringSubmatch(log)[1] + "/.well-known/openid-configuration")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("not serving: %v", err)
		}
		resp.Body.Close()
	})
}

// TestDevOpsPortTaken: when 127.0.0.1:9090 (Prometheus's default port) is
// taken, authd dev serves its operations listener on a free port, says so
// and prints it.
func TestDevOpsPortTaken(t *testing.T) {
	if ln, err := net.Listen("tcp", defaultOpsAddr); err == nil {
		t.Cleanup(func() { ln.Close() })
	} // else it is taken already, which is the case under test
	stdout, stderr := runUntil(t, []string{"dev", "-addr", "127.0.0.1:0", "-drain-delay", "0"}, nil, regexp.MustCompile(`Ctrl-C`))
	m := regexp.MustCompile(`operations\s+http://(127\.0\.0\.1:(\d+))`).FindStringSubmatch(stdout.String())
	if m == nil || m[1] == defaultOpsAddr {
		t.Fatalf("the banner names no free operations port:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "the operations address is taken") || !strings.Contains(stderr.String(), m[1]) {
		t.Errorf("no warning naming the port:\n%s", stderr.String())
	}
	resp, err := http.Get("http://" + m[1] + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz on %s: %v", m[1], err)
	}
	resp.Body.Close()

	// serve does not move: the port it was given is the one it needs.
	var out, errOut syncBuffer
	err = run(t.Context(), []string{"serve", "-addr", "127.0.0.1:0", "-drain-delay", "0"},
		env(map[string]string{"AUTHD_SECRET": strings.Repeat("s", 40), "AUTHD_DATABASE_URL": "memory"}), strings.NewReader(""), &out, &errOut)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "AUTHD_OPS_ADDR") {
		t.Errorf("serve with the operations port taken: %v", err)
	}
}
