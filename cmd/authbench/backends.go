package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// What authd sends to PostgreSQL and Redis, per iteration: its counters on
// the operations listener's /metrics (package ops: DBCounter, RedisCounter)
// are read right before and right after the timed phase, so preparation
// (minting codes, signing in) is excluded.

// backendCounters are the counters read per sample.
var backendCounters = []string{
	"authd_db_statements_total",
	"authd_db_round_trips_total",
	"authd_redis_commands_total",
	"authd_redis_round_trips_total",
}

// counterSample maps a counter's name to its value; a counter the server
// does not expose (memory store, no Redis) is absent.
type counterSample map[string]float64

// scrapeCounters reads the unlabelled counters named in backendCounters
// from a Prometheus text exposition at metricsURL.
func scrapeCounters(ctx context.Context, c *http.Client, metricsURL string) (counterSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return nil, err
	}
	// The text format: what promhttp answers a client without Accept.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", metricsURL, resp.Status)
	}
	s, err := parseCounters(resp.Body, backendCounters)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", metricsURL, err)
	}
	return s, nil
}

// parseCounters picks the samples "NAME VALUE [TIMESTAMP]" of the given
// names (without labels) out of a Prometheus text exposition.
func parseCounters(r io.Reader, names []string) (counterSample, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := counterSample{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || !want[f[0]] {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: bad value %q", f[0], f[1])
		}
		out[f[0]] = v
	}
	return out, sc.Err()
}

// perIteration sets the result's per-iteration figures from the samples
// taken at the start and end of the timed phase.
func perIteration(res *result, before, after counterSample) {
	if res.Iterations <= 0 || before == nil || after == nil {
		return
	}
	per := func(name string) *float64 {
		b, ok1 := before[name]
		a, ok2 := after[name]
		if !ok1 || !ok2 {
			return nil
		}
		v := (a - b) / float64(res.Iterations)
		return &v
	}
	res.DBStatements = per("authd_db_statements_total")
	res.DBRoundTrips = per("authd_db_round_trips_total")
	res.RedisCommands = per("authd_redis_commands_total")
	res.RedisRoundTrips = per("authd_redis_round_trips_total")
}

// validateMetricsURL checks -metrics-url like -target: absolute http(s),
// on this machine unless -allow-remote.
func (o *options) validateMetricsURL() error {
	if o.MetricsURL == "" {
		return nil
	}
	u, err := url.Parse(o.MetricsURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("-metrics-url: %q is not an absolute http(s) URL", o.MetricsURL)
	}
	if !o.AllowRemote && !isLoopbackHost(u.Hostname()) {
		return usagef("-metrics-url: %q is not a loopback address (use -allow-remote to override)", o.MetricsURL)
	}
	return nil
}
