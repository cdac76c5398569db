package jobs

import (
	"context"
	"time"
)

// SetPauseHook makes w call f before each heartbeat: a test blocks f to
// pause the worker's heartbeat as a stopped process would.
func SetPauseHook(w *Worker, f func(ctx context.Context)) { w.pauseHook = f }

// WithBatchObserver returns c with f observing every janitor batch.
func WithBatchObserver(c JanitorConfig, f func(kind string, rows int, d time.Duration)) JanitorConfig {
	c.onBatch = f
	return c
}
