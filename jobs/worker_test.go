package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/jobs"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// newPool opens a pool of its own on dsn: each worker of a test gets
// separate connections, as separate replicas would.
func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// testLogger logs warnings and errors to the test's output
// (AUTHD_TEST_LOG=debug for everything).
func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("AUTHD_TEST_LOG") == "debug" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

func mustWorker(t testing.TB, s jobs.Store, cfg jobs.Config, kinds ...jobs.Kind) *jobs.Worker {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	w, err := jobs.NewWorker(s, cfg, kinds...)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// execution is the committed result of one run of a test job: a marker
// job written in the transaction that completes the job.
type execution struct {
	Job    int64  `json:"job"`
	Worker string `json:"worker"`
}

const executedKind = "test:executed"

// recordExecution writes the marker with store, in the transaction of ctx.
func recordExecution(ctx context.Context, store jobs.Store, job int64, worker string) error {
	b, _ := json.Marshal(execution{Job: job, Worker: worker})
	_, _, err := store.EnqueueJob(ctx, storage.NewJob{Kind: executedKind, Payload: b})
	return err
}

// executions returns the committed executions per job.
func executions(t *testing.T, s storage.JobStore) map[int64][]string {
	t.Helper()
	js, err := s.ListJobs(context.Background(), storage.JobFilter{Kind: executedKind, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]string{}
	for _, j := range js {
		var e execution
		if err := json.Unmarshal(j.Payload, &e); err != nil {
			t.Fatal(err)
		}
		out[e.Job] = append(out[e.Job], e.Worker)
	}
	return out
}

func listJobs(t *testing.T, s storage.JobStore, f storage.JobFilter) []*storage.Job {
	t.Helper()
	if f.Limit == 0 {
		f.Limit = 100000
	}
	js, err := s.ListJobs(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func getJob(t *testing.T, s storage.JobStore, id int64) *storage.Job {
	t.Helper()
	for _, j := range listJobs(t, s, storage.JobFilter{}) {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("job %d not found", id)
	return nil
}

func enqueue(t *testing.T, s storage.JobStore, j storage.NewJob) int64 {
	t.Helper()
	id, _, err := s.EnqueueJob(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// waitFor polls cond until it holds, failing the test at ctx's deadline.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// counter returns the value of the counter name{labels} in reg, 0 if absent.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestWorkersRunEachJobOnce: 4 workers on separate connections share 200
// jobs; every job is run, and committed, exactly once.
func TestWorkersRunEachJobOnce(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	admin := postgres.New(newPool(t, dsn))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	const nJobs, nWorkers = 200, 4
	for i := range nJobs {
		enqueue(t, admin, storage.NewJob{Kind: "count", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	var (
		mu       sync.Mutex
		runs     = map[int64]int{}
		byWorker = map[string]int{}
		wg       sync.WaitGroup
	)
	wctx, stop := context.WithCancel(ctx)
	for i := range nWorkers {
		store := postgres.New(newPool(t, dsn))
		id := fmt.Sprint("worker-", i)
		w := mustWorker(t, store, jobs.Config{ID: id, Lease: 10 * time.Second, Poll: 10 * time.Millisecond},
			jobs.Kind{Name: "count", Handler: func(ctx context.Context, j *jobs.Job) error {
				mu.Lock()
				runs[j.ID]++
				byWorker[id]++
				mu.Unlock()
				return j.Commit(ctx, func(tx context.Context) error { return recordExecution(tx, store, j.ID, id) })
			}})
		wg.Go(func() { _ = w.Run(wctx) })
	}
	waitFor(t, ctx, "all jobs done", func() bool {
		return len(listJobs(t, admin, storage.JobFilter{Kind: "count", Status: storage.JobDone})) == nJobs
	})
	stop()
	wg.Wait()

	if len(runs) != nJobs {
		t.Errorf("%d jobs ran, want %d", len(runs), nJobs)
	}
	for id, n := range runs {
		if n != 1 {
			t.Errorf("job %d ran %d times", id, n)
		}
	}
	execs := executions(t, admin)
	if len(execs) != nJobs {
		t.Errorf("%d jobs have committed executions, want %d", len(execs), nJobs)
	}
	for id, ws := range execs {
		if len(ws) != 1 {
			t.Errorf("job %d committed %d executions (%v), want 1", id, len(ws), ws)
		}
	}
	for _, j := range listJobs(t, admin, storage.JobFilter{Kind: "count"}) {
		if j.Status != storage.JobDone || j.Attempts != 1 {
			t.Errorf("job %d: status %s, %d attempts; want done, 1", j.ID, j.Status, j.Attempts)
		}
	}
	t.Logf("jobs per worker: %v", byWorker)
}

// TestPausedWorkerLosesLease: worker A is paused (handler and heartbeat)
// past its lease; B takes the job over and completes it; A, resumed, finds
// its lease lost, stops, and commits nothing.
func TestPausedWorkerLosesLease(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	admin := postgres.New(newPool(t, dsn))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// Wide enough that B's first look, right after A started, falls
	// within A's lease however loaded the machine (500 ms was not: CI).
	const lease = 3 * time.Second
	id := enqueue(t, admin, storage.NewJob{Kind: "work"})

	var (
		started  = make(chan struct{})
		resume   = make(chan struct{})
		aCommit  = make(chan error, 1)
		aStore   = postgres.New(newPool(t, dsn))
		aReg     = prometheus.NewRegistry()
		bStore   = postgres.New(newPool(t, dsn))
		bReg     = prometheus.NewRegistry()
		pauseOne sync.Once
	)
	a := mustWorker(t, aStore, jobs.Config{ID: "A", Lease: lease, Heartbeat: lease / 3, Metrics: jobs.NewMetrics(aReg)},
		jobs.Kind{Name: "work", Handler: func(ctx context.Context, j *jobs.Job) error {
			close(started)
			<-resume // paused: the test holds the worker
			err := j.Commit(ctx, func(tx context.Context) error { return recordExecution(tx, aStore, j.ID, "A") })
			aCommit <- err
			return err
		}})
	// The whole process is paused: the heartbeat too.
	jobs.SetPauseHook(a, func(context.Context) { pauseOne.Do(func() { <-resume }) })
	b := mustWorker(t, bStore, jobs.Config{ID: "B", Lease: lease, Metrics: jobs.NewMetrics(bReg)},
		jobs.Kind{Name: "work", Handler: func(ctx context.Context, j *jobs.Job) error {
			return j.Commit(ctx, func(tx context.Context) error { return recordExecution(tx, bStore, j.ID, "B") })
		}})

	aDone := make(chan error, 1)
	go func() { _, err := a.RunDue(ctx); aDone <- err }()
	<-started
	if n, err := b.RunDue(ctx); err != nil || n != 0 {
		t.Fatalf("B.RunDue while A holds a valid lease = %d, %v; want 0, nil", n, err)
	}
	// A's lease expires (the database's clock decides); B then takes over.
	var ran int
	waitFor(t, ctx, "B to take the job over once A's lease expired", func() bool {
		n, err := b.RunDue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ran += n
		return ran > 0
	})
	if ran != 1 {
		t.Fatalf("B ran %d jobs, want 1", ran)
	}
	close(resume)
	if err := <-aCommit; !errors.Is(err, storage.ErrLeaseLost) {
		t.Errorf("paused worker's Commit = %v, want ErrLeaseLost", err)
	}
	if err := <-aDone; err != nil {
		t.Errorf("A.RunDue: %v", err)
	}

	if got := executions(t, admin)[id]; len(got) != 1 || got[0] != "B" {
		t.Errorf("committed executions = %v, want [B]", got)
	}
	j := getJob(t, admin, id)
	if j.Status != storage.JobDone || j.LockedBy != "B" || j.Attempts != 2 || !strings.Contains(j.LastError, "lease of A expired") {
		t.Errorf("job after takeover: %+v", j)
	}
	if n := counter(t, aReg, "authd_jobs_leases_lost_total", nil); n != 1 {
		t.Errorf("A: leases lost = %v, want 1", n)
	}
	if n := counter(t, aReg, "authd_jobs_completed_total", nil); n != 0 {
		t.Errorf("A: completed = %v, want 0", n)
	}
	if n := counter(t, bReg, "authd_jobs_completed_total", nil); n != 1 {
		t.Errorf("B: completed = %v, want 1", n)
	}
}

// TestKilledWorkerTakenOver: worker A is killed mid-job (its context
// cancelled, its connections closed); the job stays claimed until the lease
// expires, then B takes it over and completes it once.
func TestKilledWorkerTakenOver(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	admin := postgres.New(newPool(t, dsn))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// Wide enough that the delay between A's claim and the kill (a loaded
	// machine) cannot make B's takeover look early.
	const lease = 3 * time.Second
	id := enqueue(t, admin, storage.NewJob{Kind: "work"})

	aPool := newPool(t, dsn)
	aStore := postgres.New(aPool)
	started := make(chan struct{})
	a := mustWorker(t, aStore, jobs.Config{ID: "A", Lease: lease},
		jobs.Kind{Name: "work", Handler: func(ctx context.Context, j *jobs.Job) error {
			close(started)
			<-ctx.Done() // working until killed
			return ctx.Err()
		}})
	bStore := postgres.New(newPool(t, dsn))
	b := mustWorker(t, bStore, jobs.Config{ID: "B", Lease: lease},
		jobs.Kind{Name: "work", Handler: func(ctx context.Context, j *jobs.Job) error {
			return j.Commit(ctx, func(tx context.Context) error { return recordExecution(tx, bStore, j.ID, "B") })
		}})

	aCtx, kill := context.WithCancel(ctx)
	aDone := make(chan struct{})
	go func() { defer close(aDone); _ = a.Run(aCtx) }()
	<-started
	killedAt := time.Now()
	kill()
	<-aDone
	aPool.Close()

	if j := getJob(t, admin, id); j.Status != storage.JobRunning || j.LockedBy != "A" {
		t.Fatalf("job right after the kill: %+v; want running, locked by A", j)
	}
	var ran int
	waitFor(t, ctx, "B to take the job over", func() bool {
		n, err := b.RunDue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ran += n
		return ran > 0
	})
	if took := time.Since(killedAt); took < lease-50*time.Millisecond {
		t.Errorf("B took the job over %v after the kill, before the %v lease expired", took, lease)
	}
	if got := executions(t, admin)[id]; len(got) != 1 || got[0] != "B" {
		t.Errorf("committed executions = %v, want [B]", got)
	}
	if j := getJob(t, admin, id); j.Status != storage.JobDone || j.LockedBy != "B" || j.Attempts != 2 {
		t.Errorf("job after takeover: %+v", j)
	}
	if n, _ := b.RunDue(ctx); n != 0 {
		t.Errorf("B.RunDue after completion ran %d jobs, want 0", n)
	}
}

// TestRetryThenFail: a failing job is retried with backoff up to its
// maximum attempts, then stays failed with its last error; a recurring
// kind's next run is scheduled anyway.
func TestRetryThenFail(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	store := postgres.New(newPool(t, dsn))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	reg := prometheus.NewRegistry()
	var (
		mu       sync.Mutex
		attempts []time.Time
	)
	w := mustWorker(t, store, jobs.Config{
		ID: "w", Lease: time.Second, Poll: 10 * time.Millisecond, Metrics: jobs.NewMetrics(reg),
		Backoff: func(n int) time.Duration { return time.Duration(n) * 100 * time.Millisecond },
	}, jobs.Kind{Name: "flaky", MaxAttempts: 3, Every: time.Hour, Handler: func(ctx context.Context, j *jobs.Job) error {
		mu.Lock()
		attempts = append(attempts, time.Now())
		mu.Unlock()
		if j.Attempts == 2 {
			panic("attempt 2 panics")
		}
		return fmt.Errorf("attempt %d failed", j.Attempts)
	}})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	waitFor(t, ctx, "the job to fail", func() bool {
		return len(listJobs(t, store, storage.JobFilter{Kind: "flaky", Status: storage.JobFailed})) == 1
	})
	stop()
	<-done

	failed := listJobs(t, store, storage.JobFilter{Kind: "flaky", Status: storage.JobFailed})[0]
	if failed.Attempts != 3 || failed.LastError != "attempt 3 failed" {
		t.Errorf("failed job: %d attempts, last error %q; want 3, %q", failed.Attempts, failed.LastError, "attempt 3 failed")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 3 {
		t.Fatalf("%d attempts, want 3", len(attempts))
	}
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		if gap := attempts[i+1].Sub(attempts[i]); gap < want-20*time.Millisecond {
			t.Errorf("attempt %d came %v after attempt %d, before the %v backoff", i+2, gap, i+1, want)
		}
	}
	next := listJobs(t, store, storage.JobFilter{Kind: "flaky", Status: storage.JobQueued})
	if len(next) != 1 || time.Until(next[0].RunAt) < 50*time.Minute {
		t.Errorf("next run of the recurring kind: %+v; want one, an hour out", next)
	}
	if n := counter(t, reg, "authd_jobs_failed_total", map[string]string{"outcome": "retried"}); n != 2 {
		t.Errorf("failed{retried} = %v, want 2", n)
	}
	if n := counter(t, reg, "authd_jobs_failed_total", map[string]string{"outcome": "failed"}); n != 1 {
		t.Errorf("failed{failed} = %v, want 1", n)
	}
}

// TestGiveUpAfterExpiredLeases: a job whose workers keep dying (every lease
// expires) is failed after its maximum attempts instead of run forever.
func TestGiveUpAfterExpiredLeases(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	store := postgres.New(newPool(t, dsn))
	id := enqueue(t, store, storage.NewJob{Kind: "crash", MaxAttempts: 2})
	for _, w := range []string{"a", "b"} {
		if _, err := store.ClaimJob(t.Context(), w, nil, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ran := false
	w := mustWorker(t, store, jobs.Config{ID: "c"}, jobs.Kind{Name: "crash", Handler: func(context.Context, *jobs.Job) error {
		ran = true
		return nil
	}})
	if _, err := w.RunDue(t.Context()); err != nil {
		t.Fatal(err)
	}
	j := getJob(t, store, id)
	if ran || j.Status != storage.JobFailed || !strings.Contains(j.LastError, "gave up after 2 attempts") {
		t.Errorf("ran = %v, job = %+v; want not run, failed after 2 attempts", ran, j)
	}
}

func TestNewWorkerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	h := func(context.Context, *jobs.Job) error { return nil }
	ok := []jobs.Kind{{Name: "k", Handler: h}}
	tests := []struct {
		name  string
		cfg   jobs.Config
		kinds []jobs.Kind
	}{
		{"no name", jobs.Config{}, []jobs.Kind{{Handler: h}}},
		{"no handler", jobs.Config{}, []jobs.Kind{{Name: "k"}}},
		{"duplicate", jobs.Config{}, []jobs.Kind{{Name: "k", Handler: h}, {Name: "k", Handler: h}}},
		{"negative lease", jobs.Config{Lease: -time.Second}, ok},
		{"heartbeat not shorter than lease", jobs.Config{Lease: time.Second, Heartbeat: time.Second}, ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := jobs.NewWorker(nil, tt.cfg, tt.kinds...); err == nil {
				t.Error("NewWorker succeeded")
			}
		})
	}
}

func TestDefaultBackoff(t *testing.T) {
	tests := []struct {
		attempt int
		want    time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {4, 8 * time.Second}, {9, 256 * time.Second}, {10, 5 * time.Minute}, {100, 5 * time.Minute}}
	for _, tt := range tests {
		if got := jobs.DefaultBackoff(tt.attempt); got != tt.want {
			t.Errorf("DefaultBackoff(%d) = %v, want %v", tt.attempt, got, tt.want)
		}
	}
}
