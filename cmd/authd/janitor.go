package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/jobs"
	"github.com/authd/authd/signing"
	"github.com/authd/authd/storage"
)

// jobsConfig holds the settings of the background job worker and the
// janitor (docs/architecture.md, "Background work: leases").
type jobsConfig struct {
	Janitor  string        // "on" or "off" (AUTHD_JANITOR)
	Interval time.Duration // between runs of each janitor kind
	Batch    int           // rows per delete transaction
	Lease    time.Duration // job lease without a heartbeat
	Grace    time.Duration // how long past expiry rows are kept
}

// flags registers the job settings on fs; the on/off switch only for a
// server (serve, dev).
func (j *jobsConfig) flags(fs *flag.FlagSet, server bool) {
	j.Janitor = "on"
	if server {
		fs.StringVar(&j.Janitor, "janitor", "on", "run the job worker and the janitor, which deletes expired codes, tokens and keys: on or off (AUTHD_JANITOR)")
	}
	fs.DurationVar(&j.Interval, "janitor-interval", 5*time.Minute, "time between janitor runs of each kind of row (AUTHD_JANITOR_INTERVAL)")
	fs.IntVar(&j.Batch, "janitor-batch", 1000, "rows the janitor deletes per transaction (AUTHD_JANITOR_BATCH)")
	fs.DurationVar(&j.Grace, "janitor-grace", 5*time.Minute, "how long past its expiry a row is kept, covering clock skew between replicas (AUTHD_JANITOR_GRACE)")
	fs.DurationVar(&j.Lease, "job-lease", 30*time.Second, "how long a worker holds a job without a heartbeat; one silent for longer loses the job to another replica (AUTHD_JOB_LEASE)")
}

// validate checks the job settings; errors name the setting.
func (j *jobsConfig) validate() error {
	var errs problems
	if j.Janitor != "on" && j.Janitor != "off" {
		errs.addf("AUTHD_JANITOR: %q must be on or off", j.Janitor)
	}
	if j.Interval < 10*time.Millisecond {
		errs.addf("AUTHD_JANITOR_INTERVAL: must be at least 10ms (got %s)", j.Interval)
	}
	if j.Batch < 1 || j.Batch > 100000 {
		errs.addf("AUTHD_JANITOR_BATCH: must be between 1 and 100000 (got %d)", j.Batch)
	}
	if j.Grace < 0 {
		errs.addf("AUTHD_JANITOR_GRACE: must not be negative (got %s)", j.Grace)
	}
	if j.Lease < 100*time.Millisecond {
		errs.addf("AUTHD_JOB_LEASE: must be at least 100ms (got %s)", j.Lease)
	}
	return errs.err()
}

// janitorConfig maps the settings to the janitor's.
func (j *jobsConfig) janitorConfig(log *slog.Logger, m *jobs.Metrics) jobs.JanitorConfig {
	grace := j.Grace
	if grace == 0 {
		grace = -1 // jobs.JanitorConfig: negative means no grace
	}
	return jobs.JanitorConfig{Every: j.Interval, BatchSize: j.Batch, Grace: grace, Logger: log, Metrics: m}
}

// jobStore is a store with a job queue (PostgreSQL).
type jobStore interface {
	jobs.Store
	storage.Cleaner
	storage.SigningKeyStore
}

// newJanitorWorker returns a Worker running the janitor on s.
// extra are further recurring kinds (the signing key rotation).
func newJanitorWorker(ctx context.Context, j jobsConfig, s jobStore, log *slog.Logger, m *jobs.Metrics, extra ...jobs.Kind) (*jobs.Worker, error) {
	kinds, err := jobs.JanitorKinds(ctx, s, j.janitorConfig(log, m))
	if err != nil {
		return nil, err
	}
	kinds = append(kinds, extra...)
	// Poll often enough for short test intervals, at most once a second.
	poll := min(time.Second, max(j.Interval/4, 10*time.Millisecond))
	return jobs.NewWorker(s, jobs.Config{Lease: j.Lease, Poll: poll, Logger: log, Metrics: m}, kinds...)
}

// startJobs starts the background work of serve and dev unless
// AUTHD_JANITOR=off: on PostgreSQL a job worker running the janitor (any
// number of replicas may), on the memory store an in-process sweeper. Its
// metrics go to reg. The worker also runs the signing key rotation (keys);
// on the memory store it runs in process. stop cancels the work and waits
// for it to end.
func startJobs(ctx context.Context, j jobsConfig, store storage.Store, reg prometheus.Registerer, log *slog.Logger, keys *signing.Manager, extra ...jobs.Kind) (stop func(), err error) {
	if err := j.validate(); err != nil {
		return nil, err
	}
	if j.Janitor == "off" {
		log.Info("janitor off (AUTHD_JANITOR=off): expired rows are not deleted and signing keys not rotated by this process (authd janitor does both)")
		return func() {}, nil
	}
	m := jobs.NewMetrics(reg)
	var run func(context.Context)
	switch s := store.(type) {
	case jobStore:
		w, err := newJanitorWorker(ctx, j, s, log, m, append([]jobs.Kind{keys.Kind()}, extra...)...)
		if err != nil {
			return nil, err
		}
		log.Info("job worker started", "worker", w.ID(), "janitor_interval", j.Interval, "lease", j.Lease)
		run = func(ctx context.Context) { _ = w.Run(ctx) }
	case storage.Cleaner:
		log.Info("janitor started (in process)", "janitor_interval", j.Interval)
		run = func(ctx context.Context) {
			go keys.RunRotation(ctx)
			jobs.RunSweeper(ctx, s, j.janitorConfig(log, m))
		}
	default:
		return nil, fmt.Errorf("janitor: the %T store cannot clean up; set AUTHD_JANITOR=off", store)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	return func() { cancel(); <-done }, nil
}

const janitorUsage = `usage: authd janitor [--once] [flags]

Runs the job worker with the janitor (and, given AUTHD_SECRET, the signing
key rotation), without the HTTP server, until interrupted; with --once, runs the jobs that are due and exits. Needs
AUTHD_DATABASE_URL (PostgreSQL). A job is due when its run_at has passed:
each janitor run schedules the next one -janitor-interval later.
`

// cmdJanitor runs the janitor: "janitor --once" runs the due jobs and exits.
func cmdJanitor(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var (
		c    config
		once bool
	)
	fs := janitorFlagSet(&c, &once)
	envErr, err := envErrors(parseNoArgs(fs, janitorUsage, args, getenv, stdout))
	if err != nil {
		return helpOK(err)
	}
	var errs problems
	errs.add(envErr)
	errs.add(c.jobs.validate())
	if c.Secret != "" {
		errs.add(c.keys.validate())
	}
	errs.add(jobDatabase(c.DatabaseURL, "janitor"))
	if err := errs.err(); err != nil {
		return err
	}
	store, closeStore, err := openJobStore(ctx, c.DatabaseURL, "janitor")
	if err != nil {
		return err
	}
	defer closeStore()
	log := newLogger(stderr, false, slog.LevelInfo)
	var extra []jobs.Kind
	if c.Secret != "" {
		// With AUTHD_SECRET, the janitor also rotates the signing keys.
		keys, err := signing.New(store, c.keys.signingConfig(c.Secret, log))
		if err != nil {
			return usagef("AUTHD_SECRET: %v", err)
		}
		extra = append(extra, keys.Kind())
	}
	w, err := newJanitorWorker(ctx, c.jobs, store, log, jobs.NewMetrics(nil), extra...)
	if err != nil {
		return err
	}
	if !once {
		return w.Run(ctx)
	}
	n, err := w.RunDue(ctx)
	fmt.Fprintf(stdout, "janitor: ran %d due job(s)\n", n)
	return err
}

// janitorFlagSet is the flag set of "authd janitor".
func janitorFlagSet(c *config, once *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("janitor", flag.ContinueOnError)
	c.flags(fs, false)
	c.jobs.flags(fs, false)
	c.keys.flags(fs)
	fs.BoolVar(once, "once", false, "run the due jobs, then exit")
	return fs
}

// jobDatabase refuses a job command's database that keeps no jobs.
func jobDatabase(dbURL, cmd string) error {
	if dbURL == "" || dbURL == "memory" {
		return usagef("AUTHD_DATABASE_URL: %s needs a postgres:// URL (the memory store keeps no jobs)", cmd)
	}
	return nil
}

// openJobStore opens the PostgreSQL store for a job command.
func openJobStore(ctx context.Context, dbURL, cmd string) (jobStore, func(), error) {
	if err := jobDatabase(dbURL, cmd); err != nil {
		return nil, nil, err
	}
	store, closeStore, err := openStore(ctx, dbURL, true)
	if err != nil {
		return nil, nil, err
	}
	js, ok := store.(jobStore)
	if !ok {
		closeStore()
		return nil, nil, fmt.Errorf("%s: the %T store keeps no jobs", cmd, store)
	}
	return js, closeStore, nil
}

const jobsUsage = `usage: authd jobs list [-kind KIND] [-status queued|running|done|failed] [-limit N] [flags]

Shows the background jobs in AUTHD_DATABASE_URL, newest first.
`

// jobsFlagSet is the flag set of "authd jobs list".
func jobsFlagSet(c *config, filter *storage.JobFilter, status *string) *flag.FlagSet {
	fs := flag.NewFlagSet("jobs list", flag.ContinueOnError)
	c.flags(fs, false)
	fs.StringVar(&filter.Kind, "kind", "", "only jobs of this kind, e.g. janitor:access_tokens")
	fs.StringVar(status, "status", "", "only jobs in this state: queued, running, done or failed")
	fs.IntVar(&filter.Limit, "limit", 50, "at most this many jobs, newest first")
	return fs
}

// cmdJobs shows jobs: "jobs list [-kind K] [-status S] [-limit N]".
func cmdJobs(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var (
		c      config
		filter storage.JobFilter
		status string
	)
	fs := jobsFlagSet(&c, &filter, &status)
	if len(args) == 0 || args[0] != "list" {
		if len(args) > 0 && isHelp(args[0]) {
			printUsage(fs, jobsUsage, stdout)
			return nil
		}
		if len(args) > 0 {
			return usagef("jobs: unknown command %q: only list (run \"authd help jobs\")", args[0])
		}
		return usagef("jobs: missing list (run \"authd help jobs\")")
	}
	envErr, err := envErrors(parseNoArgs(fs, jobsUsage, args[1:], getenv, stdout))
	if err != nil {
		return helpOK(err)
	}
	var errs problems
	errs.add(envErr)
	switch st := storage.JobStatus(status); st {
	case "", storage.JobQueued, storage.JobRunning, storage.JobDone, storage.JobFailed:
		filter.Status = st
	default:
		errs.addf("-status: %q is not one of queued, running, done, failed", status)
	}
	errs.add(jobDatabase(c.DatabaseURL, "jobs list"))
	if err := errs.err(); err != nil {
		return err
	}
	store, closeStore, err := openJobStore(ctx, c.DatabaseURL, "jobs list")
	if err != nil {
		return err
	}
	defer closeStore()
	list, err := store.ListJobs(ctx, filter)
	if err != nil {
		return err
	}
	writeJobs(stdout, list, time.Now())
	return nil
}

// writeJobs prints jobs as a table.
func writeJobs(out io.Writer, list []*storage.Job, now time.Time) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATUS\tRUN AT\tATTEMPTS\tWORKER\tLEASE\tLAST ERROR")
	for _, j := range list {
		lease := "-"
		if !j.LeaseUntil.IsZero() {
			lease = j.LeaseUntil.Sub(now).Round(time.Millisecond).String() + " left"
			if j.LeaseUntil.Before(now) {
				lease = "expired"
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", j.ID, j.Kind, j.Status,
			j.RunAt.Format(time.RFC3339), j.Attempts, j.MaxAttempts, dash(j.LockedBy), lease,
			dash(strings.ReplaceAll(j.LastError, "\n", " ")))
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
