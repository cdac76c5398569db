package signing

import (
	"context"
	"time"

	"github.com/authd/authd/jobs"
)

// RotationKind is the job kind that rotates the keys.
const RotationKind = "signing:rotate"

// Kind returns the recurring job that rotates the keys (Manager.Rotate),
// its writes fenced by the job's lease (jobs.Job.Commit). It runs every
// RotateEvery/8 (between 100 ms and 1 hour), so a rotation is at most that
// late; however many replicas run it, AddSigningKeys adds one generation.
func (m *Manager) Kind() jobs.Kind {
	every := min(time.Hour, max(100*time.Millisecond, m.cfg.RotateEvery/8))
	return jobs.Kind{
		Name:  RotationKind,
		Every: every,
		Handler: func(ctx context.Context, j *jobs.Job) error {
			_, err := m.Rotate(ctx, false, j.Commit)
			return err
		},
	}
}

// RunRotation rotates in process every RotateEvery/8 until ctx ends: the
// memory store under dev, which has no job queue.
func (m *Manager) RunRotation(ctx context.Context) {
	t := time.NewTicker(min(time.Hour, max(100*time.Millisecond, m.cfg.RotateEvery/8)))
	defer t.Stop()
	for {
		if _, err := m.Rotate(ctx, false, nil); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("signing: rotation failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
