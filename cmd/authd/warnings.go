package main

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/authd/authd/exchangecache"
)

// Startup warnings: what is wrong but does not stop authd. serve logs them
// (JSON under serve, text under dev) before it serves.

// warning is one startup warning: a message and its attributes.
type warning struct {
	msg  string
	args []any
}

type envNamesKey struct{}

// withEnvNames gives the commands the names of the environment's variables
// (main: os.Environ), so that serve and dev can warn about an AUTHD_*
// variable that is no setting. A run without them checks nothing.
func withEnvNames(ctx context.Context, names []string) context.Context {
	return context.WithValue(ctx, envNamesKey{}, names)
}

func envNamesFrom(ctx context.Context) []string {
	names, _ := ctx.Value(envNamesKey{}).([]string)
	return names
}

// envNamesOf returns the names of os.Environ's "NAME=value" entries.
func envNamesOf(environ []string) []string {
	names := make([]string, 0, len(environ))
	for _, kv := range environ {
		if name, _, ok := strings.Cut(kv, "="); ok && name != "" {
			names = append(names, name)
		}
	}
	return names
}

// otherVariables are AUTHD_* variables that are no flag: the test suite's
// (AUTHD_TEST_*, and the janitor benchmark's), the crash tests' fault, and
// the retired AUTHD_PPROF_ADDR (refused with its own message).
var otherVariables = []string{"AUTHD_FAULT", "AUTHD_JANITOR_BENCH", "AUTHD_PPROF_ADDR"}

// knownSettings is every AUTHD_* variable authd reads.
func knownSettings() map[string]bool {
	known := map[string]bool{}
	for _, fs := range flagSets() {
		fs.VisitAll(func(f *flag.Flag) { known[envName(f.Name)] = true })
	}
	for _, v := range otherVariables {
		known[v] = true
	}
	return known
}

// unknownSettings warns about each AUTHD_* variable in names that authd
// does not read (a typo is otherwise silently ignored), naming the closest
// setting.
func unknownSettings(names []string) []warning {
	var known map[string]bool
	var ws []warning
	for _, name := range names {
		if !strings.HasPrefix(name, "AUTHD_") || strings.HasPrefix(name, "AUTHD_TEST_") {
			continue
		}
		if known == nil {
			known = knownSettings()
		}
		if known[name] {
			continue
		}
		ws = append(ws, warning{msg: name + " is not a setting and is ignored; did you mean " + closest(name, known) + "?",
			args: []any{"variable", name}})
	}
	return ws
}

// closest is the name in known nearest to name by edit distance (the
// first in order of a tie).
func closest(name string, known map[string]bool) string {
	best, bestD := "", -1
	for k := range known {
		d := editDistance(name, k)
		if bestD < 0 || d < bestD || (d == bestD && k < best) {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes: the
// names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// issuerWarnings warns about an http:// issuer outside loopback: codes,
// tokens and passwords would cross the network in the clear, and RFC 8414
// §2 requires https.
func issuerWarnings(issuer string) []warning {
	u, err := url.Parse(issuer)
	if err != nil || u.Scheme != "http" || isLoopback(u.Hostname()) {
		return nil
	}
	return []warning{{msg: "AUTHD_ISSUER is http:// on a host that is not loopback: codes, tokens and passwords cross the network in the clear; use https:// (RFC 8414 §2)",
		args: []any{"issuer", issuer}}}
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// redisPingTimeout bounds the first ping: a Redis call is bounded to its
// read timeout (exchangecache.DefaultRedisTimeout), its dial to 500 ms.
const redisPingTimeout = time.Second

// warnIfRedisDown pings the replay cache's Redis once at startup and warns
// if it does not answer. authd serves anyway: Redis is an accelerator, and
// the cache fails open to PostgreSQL (docs/architecture.md, "Principles").
func warnIfRedisDown(ctx context.Context, cache exchangecache.Cache, redisURL string, log *slog.Logger) {
	p, ok := cache.(interface{ Ping(context.Context) error })
	if !ok || cacheKind(redisURL) != "redis" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, redisPingTimeout)
	defer cancel()
	if err := p.Ping(ctx); err != nil {
		log.Warn("Redis does not answer; serving without the replay cache until it does (exchanges are answered from the database)",
			"redis", redisHosts(redisURL), "error", err.Error())
	}
}

// redisHosts is AUTHD_REDIS_URL's hosts, without its credentials.
func redisHosts(redisURL string) string {
	u, err := url.Parse(redisURL)
	if err != nil {
		return ""
	}
	return u.Host
}
