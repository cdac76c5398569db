package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/authd/authd/storage"
)

// JanitorKindPrefix prefixes the job kind of each janitor job: the job that
// cleans storage.CleanupAccessTokens is "janitor:access_tokens".
const JanitorKindPrefix = "janitor:"

// JanitorConfig configures the cleanup. Zero fields take the defaults named.
type JanitorConfig struct {
	// Every is the time between the end of one run of a kind and the next;
	// default 5 minutes.
	Every time.Duration
	// BatchSize is the number of rows one transaction deletes; default 1000.
	BatchSize int
	// MaxBatches bounds the batches of one run (the rest waits for the next
	// run); default 1000.
	MaxBatches int
	// JobRetention is how long finished jobs are kept; default 7 days.
	JobRetention time.Duration
	// Now is the clock that decides what has expired; default time.Now.
	Now func() time.Time
	// Grace is how long past its expiry a row is kept, so a replica whose
	// clock runs ahead never deletes a row another replica still considers
	// live (a redeemed code is needed until it expires, for reuse
	// detection); default 5 minutes. Negative means none.
	Grace time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Metrics; default unregistered ones.
	Metrics *Metrics

	// onBatch, if set, observes every batch (export_test.go).
	onBatch func(kind string, rows int, d time.Duration)
}

func (c *JanitorConfig) applyDefaults() {
	if c.Every <= 0 {
		c.Every = 5 * time.Minute
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 1000
	}
	if c.Grace == 0 {
		c.Grace = 5 * time.Minute
	} else if c.Grace < 0 {
		c.Grace = 0
	}
	if c.MaxBatches <= 0 {
		c.MaxBatches = 1000
	}
	if c.JobRetention <= 0 {
		c.JobRetention = 7 * 24 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
}

// JanitorKinds returns the janitor: one recurring Kind per kind of row c
// cleans (c.CleanupKinds), named JanitorKindPrefix + kind. Each run deletes
// the kind's expired rows in batches of cfg.BatchSize, one short transaction
// per batch, each fenced by the job's lease (Job.Tx): a worker that lost the
// job deletes nothing more. Register them on a Worker whose store is c.
func JanitorKinds(ctx context.Context, c storage.Cleaner, cfg JanitorConfig) ([]Kind, error) {
	cfg.applyDefaults()
	kinds, err := c.CleanupKinds(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: janitor: %w", err)
	}
	out := make([]Kind, 0, len(kinds))
	for _, kind := range kinds {
		out = append(out, Kind{
			Name:  JanitorKindPrefix + kind,
			Every: cfg.Every,
			Handler: func(ctx context.Context, j *Job) error {
				_, err := cfg.clean(ctx, c, kind, j.Tx)
				return err
			},
		})
	}
	return out, nil
}

// Sweep deletes the expired rows of every kind c cleans, in batches, once,
// and returns how many it deleted. It takes no lease: it is for a store only
// one process uses (the in-memory store).
func Sweep(ctx context.Context, c storage.Cleaner, cfg JanitorConfig) (int, error) {
	cfg.applyDefaults()
	kinds, err := c.CleanupKinds(ctx)
	if err != nil {
		return 0, fmt.Errorf("jobs: sweep: %w", err)
	}
	total := 0
	for _, kind := range kinds {
		n, err := cfg.clean(ctx, c, kind, func(ctx context.Context, f func(context.Context) error) error { return f(ctx) })
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// RunSweeper calls Sweep at once and then every cfg.Every until ctx ends,
// logging failures. It is the in-process janitor of a single-process store.
func RunSweeper(ctx context.Context, c storage.Cleaner, cfg JanitorConfig) {
	cfg.applyDefaults()
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	for {
		if _, err := Sweep(ctx, c, cfg); err != nil && ctx.Err() == nil {
			cfg.Logger.Warn("janitor: sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// clean deletes kind's expired rows in batches, each through inTx, until a
// batch comes back short or MaxBatches ran, and returns how many it deleted.
func (c *JanitorConfig) clean(ctx context.Context, cl storage.Cleaner, kind string, inTx func(context.Context, func(context.Context) error) error) (int, error) {
	start := c.Now()
	before := start.Add(-c.Grace)
	if kind == storage.CleanupJobs || kind == storage.CleanupLogoutDeliveries {
		before = before.Add(-c.JobRetention)
	}
	total, batches := 0, 0
	var longest time.Duration
	defer func() {
		level := slog.LevelDebug
		if total > 0 {
			level = slog.LevelInfo
		}
		c.Logger.Log(ctx, level, "janitor: deleted expired rows", "kind", kind, "rows", total,
			"batches", batches, "longest_batch", longest, "took", time.Since(start))
	}()
	for batches < c.MaxBatches {
		if ctx.Err() != nil {
			return total, context.Cause(ctx)
		}
		var n int
		t0 := time.Now()
		err := inTx(ctx, func(ctx context.Context) error {
			var err error
			n, err = cl.DeleteExpired(ctx, kind, before, c.BatchSize)
			return err
		})
		d := time.Since(t0)
		if err != nil {
			return total, fmt.Errorf("janitor: %s: %w", kind, err)
		}
		batches++
		total += n
		longest = max(longest, d)
		c.Metrics.rowsDeleted.WithLabelValues(kind).Add(float64(n))
		c.Metrics.batchTime.WithLabelValues(kind).Observe(d.Seconds())
		if c.onBatch != nil {
			c.onBatch(kind, n, d)
		}
		if n < c.BatchSize {
			break
		}
	}
	return total, nil
}
