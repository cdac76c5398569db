package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"slices"
	"time"

	fositestorage "github.com/ory/fosite/storage"

	"github.com/authd/authd/storage"
)

// Store is what a Worker needs: the job queue, and transactions to fence a
// handler's writes with its lease.
type Store interface {
	storage.JobStore
	fositestorage.Transactional
}

// Handler runs one job. ctx is cancelled when the job's lease is lost (its
// cause is then storage.ErrLeaseLost) or the worker stops; the handler must
// then return promptly. Writes that must not commit for a worker that lost
// the lease go through j.Tx or j.Commit.
//
// Returning nil completes the job (unless j.Commit already did); returning
// an error queues it again with backoff, or fails it after its last attempt.
// A job may run more than once (a worker can die after its writes and before
// completing), so handlers must be idempotent; j.Commit makes a handler's
// writes and the completion one transaction.
type Handler func(ctx context.Context, j *Job) error

// Kind is a kind of job a Worker runs.
type Kind struct {
	// Name is the jobs' kind column; it must be unique per Worker.
	Name string
	// Handler runs one job of this kind.
	Handler Handler
	// MaxAttempts bounds the attempts of jobs this worker schedules;
	// <= 0 means storage.DefaultJobMaxAttempts.
	MaxAttempts int
	// Every, if positive, makes the kind recurring: Worker.Schedule keeps
	// one pending job of it (unique key = Name), and each run, when it
	// completes or fails for good, schedules the next one Every later.
	Every time.Duration
}

// next is the run that follows a run of a recurring kind, or nil.
func (k *Kind) next() *storage.NewJob {
	if k.Every <= 0 {
		return nil
	}
	return &storage.NewJob{Kind: k.Name, UniqueKey: k.Name, Delay: k.Every, MaxAttempts: k.MaxAttempts}
}

// Config configures a Worker. Zero fields take the defaults named.
type Config struct {
	// ID names the worker in locked_by; default host-pid-random. Every
	// worker must have its own.
	ID string
	// Lease is how long a claim holds a job without a heartbeat; default
	// 30s. A worker that pauses longer loses the job to another worker.
	Lease time.Duration
	// Heartbeat is how often the lease is renewed; default Lease/3.
	Heartbeat time.Duration
	// Poll is how long Run waits when no job is due; default 1s (±25%).
	Poll time.Duration
	// Backoff is the delay before attempt+1 after attempt failed; default
	// DefaultBackoff.
	Backoff func(attempt int) time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Metrics; default unregistered ones.
	Metrics *Metrics
}

// DefaultBackoff waits 1s after the first failed attempt, doubling after
// each further one, up to 5 minutes.
func DefaultBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 9 {
		return 5 * time.Minute
	}
	return min(time.Second<<(attempt-1), 5*time.Minute)
}

// Worker claims and runs jobs of its kinds, one at a time. Run several
// Workers (goroutines or processes) for parallelism; each has its own ID.
type Worker struct {
	store Store
	cfg   Config
	log   *slog.Logger
	kinds map[string]*Kind
	names []string // registration order

	// pauseHook, if set, runs before each heartbeat; tests block it to
	// simulate a paused process (export_test.go).
	pauseHook func(ctx context.Context)
}

// NewWorker returns a Worker running kinds on store. It returns an error if
// a kind has no name or handler or is registered twice, a duration is
// negative, or the heartbeat is not shorter than the lease.
func NewWorker(store Store, cfg Config, kinds ...Kind) (*Worker, error) {
	if cfg.Lease < 0 || cfg.Heartbeat < 0 || cfg.Poll < 0 {
		return nil, errors.New("jobs: negative duration in Config")
	}
	if cfg.ID == "" {
		cfg.ID = defaultID()
	}
	if cfg.Lease == 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = cfg.Lease / 3
	}
	if cfg.Heartbeat >= cfg.Lease {
		return nil, fmt.Errorf("jobs: heartbeat %v must be shorter than the lease %v", cfg.Heartbeat, cfg.Lease)
	}
	if cfg.Poll == 0 {
		cfg.Poll = time.Second
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	w := &Worker{store: store, cfg: cfg, log: cfg.Logger.With("worker", cfg.ID), kinds: map[string]*Kind{}}
	for _, k := range kinds {
		if k.Name == "" || k.Handler == nil {
			return nil, fmt.Errorf("jobs: kind %q: name and handler are required", k.Name)
		}
		if _, dup := w.kinds[k.Name]; dup {
			return nil, fmt.Errorf("jobs: kind %q registered twice", k.Name)
		}
		if k.MaxAttempts <= 0 {
			k.MaxAttempts = storage.DefaultJobMaxAttempts
		}
		w.kinds[k.Name] = &k
		w.names = append(w.names, k.Name)
	}
	return w, nil
}

// defaultID is host-pid-random: unique per worker, readable in jobs list.
func defaultID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// ID returns the worker's ID, as recorded in the locked_by of its jobs.
func (w *Worker) ID() string { return w.cfg.ID }

// Schedule enqueues a run, due now, of every recurring kind that has no
// queued or running one. The store's unique key makes it safe to call from
// every replica at once: they create one row per kind.
func (w *Worker) Schedule(ctx context.Context) error {
	for _, name := range w.names {
		k := w.kinds[name]
		if k.Every <= 0 {
			continue
		}
		if _, _, err := w.store.EnqueueJob(ctx, storage.NewJob{Kind: k.Name, UniqueKey: k.Name, MaxAttempts: k.MaxAttempts}); err != nil {
			return fmt.Errorf("jobs: schedule %q: %w", k.Name, err)
		}
	}
	return nil
}

// rescheduleEvery is how often Run calls Schedule again, to restore a
// recurring job whose chain was broken (e.g. its row deleted by hand).
const rescheduleEvery = time.Minute

// Run schedules the recurring kinds, then claims and runs due jobs until ctx
// ends; it returns nil then. Database errors are logged and retried after
// Poll. When ctx ends mid-job the handler's context is cancelled and the job
// is left as a dead worker leaves it: another worker takes it over when the
// lease expires.
func (w *Worker) Run(ctx context.Context) error {
	var scheduled time.Time
	for ctx.Err() == nil {
		if time.Since(scheduled) >= rescheduleEvery {
			if err := w.Schedule(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("jobs: schedule failed; retrying", "err", err)
			} else {
				scheduled = time.Now()
			}
		}
		_, ran, err := w.runOne(ctx, w.names)
		if ran {
			continue
		}
		if err != nil && ctx.Err() == nil {
			w.log.Warn("jobs: claim failed; retrying", "err", err)
		}
		poll := time.Duration(float64(w.cfg.Poll) * (0.75 + 0.5*mrand.Float64()))
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

// RunDue schedules the recurring kinds, then runs due jobs until none is
// due, and returns how many it ran. Each recurring kind runs at most once
// (its next run may already be due again). It returns the first database
// error, or ctx's.
func (w *Worker) RunDue(ctx context.Context) (int, error) {
	if err := w.Schedule(ctx); err != nil {
		return 0, err
	}
	kinds := slices.Clone(w.names)
	n := 0
	for len(kinds) > 0 {
		kind, ran, err := w.runOne(ctx, kinds)
		if err != nil {
			return n, err
		}
		if !ran {
			return n, ctx.Err()
		}
		n++
		if w.kinds[kind].Every > 0 {
			kinds = slices.DeleteFunc(kinds, func(k string) bool { return k == kind })
		}
	}
	return n, nil
}

// runOne claims one due job of kinds and runs it. ran reports whether a job
// was claimed; err is a claim error (the outcome of the job is logged and
// counted, not returned).
func (w *Worker) runOne(ctx context.Context, kinds []string) (kind string, ran bool, err error) {
	if len(kinds) == 0 {
		return "", false, nil // an empty list would claim every kind
	}
	claimedAt := time.Now()
	sj, err := w.store.ClaimJob(ctx, w.cfg.ID, kinds, w.cfg.Lease)
	if errors.Is(err, storage.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	w.process(ctx, sj, claimedAt)
	return sj.Kind, true, nil
}

// errHandlerReturned cancels the handler's context when it returned.
var errHandlerReturned = errors.New("jobs: handler returned")

// process runs a claimed job and records its outcome.
func (w *Worker) process(ctx context.Context, sj *storage.Job, claimedAt time.Time) {
	k := w.kinds[sj.Kind]
	m := w.cfg.Metrics
	m.claimed.WithLabelValues(k.Name).Inc()
	j := &Job{Job: *sj, w: w, kind: k}
	log := w.log.With("job", sj.ID, "kind", sj.Kind, "attempt", sj.Attempts)
	if sj.LastError != "" && sj.Attempts > 1 {
		log.Info("jobs: running again", "last_error", sj.LastError)
	}

	var err error
	if sj.Attempts > sj.MaxAttempts {
		// Earlier claims ended without an outcome (their leases expired):
		// a job that kills or hangs its worker is not run forever.
		err = fmt.Errorf("gave up after %d attempts: %s", sj.MaxAttempts, sj.LastError)
	} else {
		hctx, cancel := context.WithCancelCause(ctx)
		beat := make(chan struct{})
		go func() {
			defer close(beat)
			w.heartbeat(hctx, cancel, j.lease(), claimedAt.Add(w.cfg.Lease), log)
		}()
		err = runHandler(hctx, k.Handler, j)
		cancel(errHandlerReturned)
		<-beat
		if cause := context.Cause(hctx); errors.Is(cause, storage.ErrLeaseLost) && !j.committed {
			err = cause // whatever the handler returned, it stopped because of this
		}
	}

	// Record the outcome even if ctx was cancelled meanwhile, within a lease.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Lease)
	defer cancel()
	var ferr error
	switch {
	case j.committed:
		m.completed.WithLabelValues(k.Name).Inc()
		if err != nil {
			log.Warn("jobs: handler failed after committing; the job stays done", "err", err)
		}
		return
	case errors.Is(err, storage.ErrLeaseLost):
		ferr = err
	case err == nil:
		if ferr = w.store.CompleteJob(fctx, j.lease(), k.next()); ferr == nil {
			m.completed.WithLabelValues(k.Name).Inc()
			return
		}
	case ctx.Err() != nil:
		// The worker is stopping mid-job. Like a worker that died, it
		// leaves the job to be taken over when the lease expires.
		log.Info("jobs: worker stopped mid-job; the job runs again after its lease expires", "err", err)
		return
	case sj.Attempts < sj.MaxAttempts:
		delay := w.cfg.Backoff(sj.Attempts)
		if ferr = w.store.RetryJob(fctx, j.lease(), errorText(err), delay); ferr == nil {
			m.failed.WithLabelValues(k.Name, "retried").Inc()
			log.Warn("jobs: attempt failed; retrying", "err", err, "retry_in", delay)
			return
		}
	default:
		if ferr = w.store.FailJob(fctx, j.lease(), errorText(err), k.next()); ferr == nil {
			m.failed.WithLabelValues(k.Name, "failed").Inc()
			log.Error("jobs: job failed; no attempts left", "err", err, "attempts", sj.Attempts)
			return
		}
	}
	if errors.Is(ferr, storage.ErrLeaseLost) {
		m.leasesLost.WithLabelValues(k.Name).Inc()
		log.Warn("jobs: lease lost; stopped, nothing committed", "err", ferr)
		return
	}
	// Could not record the outcome: the lease expires and the job is
	// claimed again.
	log.Error("jobs: recording the outcome failed; the job runs again after its lease expires", "err", ferr, "job_err", err)
}

// heartbeat renews the lease every Heartbeat until ctx ends. When the lease
// is lost, or cannot be renewed before deadline (the database is
// unreachable), it cancels the handler with storage.ErrLeaseLost.
func (w *Worker) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, l storage.Lease, deadline time.Time, log *slog.Logger) {
	t := time.NewTicker(w.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.pauseHook != nil {
			w.pauseHook(ctx)
		}
		sent := time.Now()
		err := w.store.ExtendLease(ctx, l, w.cfg.Lease)
		switch {
		case err == nil:
			deadline = sent.Add(w.cfg.Lease)
		case ctx.Err() != nil:
			return
		case errors.Is(err, storage.ErrLeaseLost):
			cancel(err)
			return
		case time.Now().After(deadline):
			cancel(fmt.Errorf("jobs: lease not renewed before it expired: %w (%w)", storage.ErrLeaseLost, err))
			return
		default:
			log.Warn("jobs: heartbeat failed; retrying", "err", err)
		}
	}
}

// runHandler calls h, turning a panic into an error so that one bad job
// cannot stop the worker.
func runHandler(ctx context.Context, h Handler, j *Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("jobs: handler panicked: %v", p)
		}
	}()
	return h(ctx, j)
}

// errorText bounds what an error stores in last_error.
func errorText(err error) string {
	s := err.Error()
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	return s
}

// Job is a claimed job, as its Handler sees it.
type Job struct {
	storage.Job
	w         *Worker
	kind      *Kind
	committed bool
}

// lease is the lease of this claim.
func (j *Job) lease() storage.Lease { return j.Job.Lease() }

// Tx runs f in a transaction fenced by the job's lease: the transaction
// first renews the lease with a conditional write that locks the job's row,
// so f's writes (made with the context f receives) commit only if this
// worker still held the job, and no other worker can claim it meanwhile. It
// returns storage.ErrLeaseLost, with everything rolled back, if the lease
// was lost, and f's error, rolled back, if f fails. Use it for each batch of
// a long job.
func (j *Job) Tx(ctx context.Context, f func(ctx context.Context) error) error {
	return j.tx(ctx, f, false)
}

// Commit is Tx that also completes the job in the same transaction: f's
// writes and the job's completion (with the next run of a recurring kind)
// commit together or not at all. After Commit returns nil the handler should
// return nil; a second Commit is an error.
func (j *Job) Commit(ctx context.Context, f func(ctx context.Context) error) error {
	return j.tx(ctx, f, true)
}

func (j *Job) tx(ctx context.Context, f func(ctx context.Context) error, complete bool) (err error) {
	if j.committed {
		return fmt.Errorf("jobs: job %d already committed", j.ID)
	}
	defer func() {
		// A failure because ctx ended says why it ended, e.g.
		// storage.ErrLeaseLost from the heartbeat.
		if err != nil && ctx.Err() != nil && !errors.Is(err, context.Cause(ctx)) {
			err = fmt.Errorf("%w (%w)", context.Cause(ctx), err)
		}
	}()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	s := j.w.store
	err = storage.InTx(ctx, s, func(tx context.Context) error {
		if err := s.ExtendLease(tx, j.lease(), j.w.cfg.Lease); err != nil {
			return err
		}
		if err := f(tx); err != nil {
			return err
		}
		if complete {
			return s.CompleteJob(tx, j.lease(), j.kind.next())
		}
		return nil
	})
	if err != nil {
		return err
	}
	j.committed = complete
	return nil
}
