package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// modeOrder is the order of rows in a report.
var modeOrder = []string{"login", "sso", "sso-consent", "exchange", "burst", "replay", "refresh", "introspect", "client-credentials", "ceiling-http", "ceiling-db"}

// cmdReport prints a Markdown report of -json results: a summary row per
// run with its ratio to the HTTP and database ceilings measured at the
// same concurrency, then every step of every run.
func cmdReport(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usagef("usage: authbench report FILE.json...")
	}
	var results []*result
	for _, name := range fs.Args() {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(f)
		for {
			var r result
			err := dec.Decode(&r)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				f.Close()
				return fmt.Errorf("%s: %w", name, err)
			}
			results = append(results, &r)
		}
		f.Close()
	}
	writeReport(stdout, results)
	return nil
}

func modeRank(m string) int {
	for i, x := range modeOrder {
		if x == m {
			return i
		}
	}
	return len(modeOrder)
}

// mainStep is the row that stands for the whole iteration.
func mainStep(r *result) stepResult {
	for _, s := range r.Steps {
		if s.Step == "flow" {
			return s
		}
	}
	if len(r.Steps) > 0 {
		return r.Steps[0]
	}
	return stepResult{}
}

func writeReport(w io.Writer, results []*result) {
	sort.SliceStable(results, func(i, j int) bool {
		a, b := results[i], results[j]
		if modeRank(a.Mode) != modeRank(b.Mode) {
			return modeRank(a.Mode) < modeRank(b.Mode)
		}
		if a.Concurrency != b.Concurrency {
			return a.Concurrency < b.Concurrency
		}
		return a.Started < b.Started // RFC 3339 in UTC: in the order run
	})
	// A ceiling measured more than once at one concurrency (bench/run.sh
	// measures each before and after the modes it is the ceiling of, since
	// it moves by up to a third within minutes) counts as the mean of its
	// runs.
	ceiling := func(mode string, c int) float64 {
		var sum float64
		n := 0
		for _, r := range results {
			if r.Mode == mode && r.Concurrency == c {
				sum += r.Rate
				n++
			}
		}
		if n == 0 {
			return 0
		}
		return sum / float64(n)
	}
	ratio := func(rate, c float64) string {
		if c <= 0 || rate <= 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f%%", 100*rate/c)
	}
	fmt.Fprintln(w, "| mode | c | ok/s | p50 ms | p90 ms | p99 ms | max ms | failed | ÷ HTTP ceiling | ÷ DB ceiling | server CPU | server CPU µs/iter | SQL stmts/iter | SQL round trips/iter | Redis cmds/iter | Redis round trips/iter | server peak RSS | load avg |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		s := mainStep(r)
		cpu, cpuIter, rss := "–", "–", "–"
		if r.ServerCPU > 0 {
			cpu = fmt.Sprintf("%.2f", r.ServerCPU)
		}
		if r.ServerCPUus > 0 {
			cpuIter = fmt.Sprintf("%.0f", r.ServerCPUus)
		}
		if r.ServerHWMkB > 0 {
			rss = fmt.Sprintf("%.0f MiB", float64(r.ServerHWMkB)/1024)
		}
		name := r.Mode
		if r.Label != "" {
			name = r.Label
		}
		if r.Exhausted {
			name += " †"
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %.2f | %.2f | %.2f | %.1f | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f→%.1f |\n",
			name, r.Concurrency, r.Rate, s.P50, s.P90, s.P99, s.Max, r.Failed,
			ratio(r.Rate, ceiling("ceiling-http", r.Concurrency)), ratio(r.Rate, ceiling("ceiling-db", r.Concurrency)), cpu, cpuIter,
			perIter(r.DBStatements), perIter(r.DBRoundTrips), perIter(r.RedisCommands), perIter(r.RedisRoundTrips), rss,
			r.LoadStart, r.LoadEnd)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Latencies are of the whole iteration (the flow for login and sso). Server CPU is in cores (of 2), and in microseconds of CPU time per iteration (failed ones included). SQL and Redis columns are per iteration of the timed phase, from authd's counters on /metrics (authd_db_statements_total, authd_db_round_trips_total, authd_redis_commands_total, authd_redis_round_trips_total) read when it starts and ends, so preparation is excluded and background jobs (janitor, key rotation) are included; the database ceiling counts its own statements the same way. A ceiling run more than once at a concurrency (bench/run.sh runs the HTTP ceiling before and after the replay modes, the database ceiling before and after the exchange modes) is the mean of its runs, and each of its rows shows its ratio to that mean. Load avg is the machine's 1-minute load average at the start and end of the run: the same 2 cores run authd, PostgreSQL, Redis, authbench and whatever else the machine is doing. † prepared work ran out before the deadline; the rate is over the time it lasted.")
	fmt.Fprintln(w)
	writeBurstReport(w, results)
	fmt.Fprintln(w, "### Every step")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode | c | step | ok | errors | ok/s | mean ms | p50 ms | p90 ms | p99 ms | max ms |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		for _, s := range r.Steps {
			fmt.Fprintf(w, "| %s | %d | %s | %d | %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.1f |\n",
				r.Mode, r.Concurrency, s.Step, s.OK, s.Errors, s.Rate, s.Mean, s.P50, s.P90, s.P99, s.Max)
		}
	}
	var errs []string
	for _, r := range results {
		keys := make([]string, 0, len(r.Errors))
		for k := range r.Errors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			errs = append(errs, fmt.Sprintf("| %s | %d | %s | %d |", r.Mode, r.Concurrency, k, r.Errors[k]))
		}
	}
	if len(errs) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "### Errors (by step, HTTP status and OAuth error code)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| mode | c | error | count |")
		fmt.Fprintln(w, "|---|---:|---|---:|")
		fmt.Fprintln(w, strings.Join(errs, "\n"))
	}
	var notes []string
	for _, r := range results {
		if r.Prepared != "" || r.Note != "" {
			notes = append(notes, fmt.Sprintf("- %s c=%d: %s", r.Mode, r.Concurrency, strings.Trim(r.Prepared+"; "+r.Note, "; ")))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, strings.Join(notes, "\n"))
	}
}
