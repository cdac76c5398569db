package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/authd/authd/storage"
)

// The mail outbox, its job queue and the pending self-service flows, for
// "authd dev" (packages mail and accounts). The job queue is a value of
// its own (JobQueue), not methods of Store: the janitor of a Store keeps
// running in process (jobs.RunSweeper), as before.

var (
	_ storage.MailStore        = (*Store)(nil)
	_ storage.AccountFlowStore = (*Store)(nil)
	_ storage.JobStore         = (*JobQueue)(nil)
)

type outboxState struct {
	mails    map[int64]storage.Mail
	nextMail int64
	flows    map[string]storage.AccountFlow
	jobs     map[int64]storage.Job
	nextJob  int64
}

// box returns the outbox state. Callers hold s.mu.
func (s *Store) box() *outboxState {
	if s.outbox == nil {
		s.outbox = &outboxState{mails: map[int64]storage.Mail{}, flows: map[string]storage.AccountFlow{}, jobs: map[int64]storage.Job{}}
	}
	return s.outbox
}

// InsertMail stores a pending message.
func (s *Store) InsertMail(ctx context.Context, m *storage.Mail) error {
	if m.MessageID == "" || m.Recipient == "" || m.Template == "" {
		return errors.New("memory: insert mail: message id, recipient and template are required")
	}
	s.tx(func() {
		b := s.box()
		b.nextMail++
		m.ID, m.Status, m.CreatedAt = b.nextMail, storage.MailPending, storage.NormalizeTime(s.now())
		c := *m
		c.Sealed = slices.Clone(m.Sealed)
		b.mails[m.ID] = c
		id := m.ID
		s.record(ctx, func() { delete(b.mails, id) })
	})
	return nil
}

// GetMail returns a copy of the row.
func (s *Store) GetMail(_ context.Context, id int64) (*storage.Mail, error) {
	var (
		m  storage.Mail
		ok bool
	)
	s.tx(func() { m, ok = s.box().mails[id] })
	if !ok {
		return nil, fmt.Errorf("memory: get mail: %w", storage.ErrNotFound)
	}
	m.Sealed = slices.Clone(m.Sealed)
	return &m, nil
}

// updateMail changes a pending row with f, recording the undo.
func (s *Store) updateMail(ctx context.Context, id int64, f func(m *storage.Mail)) bool {
	var done bool
	s.tx(func() {
		b := s.box()
		old, ok := b.mails[id]
		if !ok || old.Status != storage.MailPending {
			return
		}
		m := old
		f(&m)
		b.mails[id] = m
		s.record(ctx, func() { b.mails[id] = old })
		done = true
	})
	return done
}

// RecordMailAttempt counts a failed attempt of a pending row.
func (s *Store) RecordMailAttempt(ctx context.Context, id int64, errMsg string) error {
	s.updateMail(ctx, id, func(m *storage.Mail) { m.Attempts++; m.LastError = errMsg })
	return nil
}

// FinishMail moves a pending row to sent or given up, erasing its data.
func (s *Store) FinishMail(ctx context.Context, id int64, status storage.MailStatus, errMsg string) (bool, error) {
	if status != storage.MailSent && status != storage.MailGivenUp {
		return false, errors.New("memory: finish mail: status must be sent or given_up")
	}
	now := storage.NormalizeTime(s.now())
	return s.updateMail(ctx, id, func(m *storage.Mail) {
		m.Status, m.Sealed, m.FinishedAt = status, nil, now
		m.Attempts++
		if errMsg != "" {
			m.LastError = errMsg
		}
	}), nil
}

// ---- self-service flows ----

func cloneFlow(f storage.AccountFlow) *storage.AccountFlow {
	f.PasswordHash, f.CodeHash, f.LinkHash = slices.Clone(f.PasswordHash), slices.Clone(f.CodeHash), slices.Clone(f.LinkHash)
	return &f
}

// CreateAccountFlow inserts f unless its ID exists.
func (s *Store) CreateAccountFlow(ctx context.Context, f *storage.AccountFlow) (bool, error) {
	var created bool
	s.tx(func() {
		b := s.box()
		if _, ok := b.flows[f.ID]; ok {
			return
		}
		c := *cloneFlow(*f)
		c.ExpiresAt, c.CreatedAt = storage.NormalizeTime(c.ExpiresAt), storage.NormalizeTime(s.now())
		b.flows[f.ID] = c
		id := f.ID
		s.record(ctx, func() { delete(b.flows, id) })
		created = true
	})
	return created, nil
}

// GetAccountFlow returns a copy of the flow.
func (s *Store) GetAccountFlow(_ context.Context, id string) (*storage.AccountFlow, error) {
	var (
		f  storage.AccountFlow
		ok bool
	)
	s.tx(func() { f, ok = s.box().flows[id] })
	if !ok {
		return nil, fmt.Errorf("memory: get account flow: %w", storage.ErrNotFound)
	}
	return cloneFlow(f), nil
}

// AttemptAccountFlow counts a guess at a usable flow.
func (s *Store) AttemptAccountFlow(ctx context.Context, id string, now time.Time, max int) (*storage.AccountFlow, error) {
	var out *storage.AccountFlow
	s.tx(func() {
		b := s.box()
		old, ok := b.flows[id]
		if !ok || !old.UsedAt.IsZero() || !now.Before(old.ExpiresAt) || old.Attempts >= max {
			return
		}
		f := old
		f.Attempts++
		b.flows[id] = f
		s.record(ctx, func() { b.flows[id] = old })
		out = cloneFlow(f)
	})
	if out == nil {
		return nil, fmt.Errorf("memory: attempt account flow: %w", storage.ErrNotFound)
	}
	return out, nil
}

// UseAccountFlow marks an unused flow used.
func (s *Store) UseAccountFlow(ctx context.Context, id string, now time.Time) (bool, error) {
	var used bool
	s.tx(func() {
		b := s.box()
		old, ok := b.flows[id]
		if !ok || !old.UsedAt.IsZero() {
			return
		}
		f := old
		f.UsedAt = storage.NormalizeTime(now)
		b.flows[id] = f
		s.record(ctx, func() { b.flows[id] = old })
		used = true
	})
	return used, nil
}

// DeleteAccountFlows deletes the flows of subject.
func (s *Store) DeleteAccountFlows(ctx context.Context, subject string) error {
	s.tx(func() {
		b := s.box()
		for id, f := range b.flows {
			if f.Subject == subject {
				delete(b.flows, id)
				s.record(ctx, func() { b.flows[id] = f })
			}
		}
	})
	return nil
}

// FindUserByEmail returns the user named username, else the oldest whose
// email is email (case-insensitive).
func (s *Store) FindUserByEmail(_ context.Context, username, email string) (*storage.User, error) {
	var found *storage.User
	s.tx(func() {
		if sub, ok := s.userByName(username); ok {
			found = cloneUser(s.users[sub])
			return
		}
		for _, u := range s.users {
			if strings.EqualFold(u.Email, email) && (found == nil || u.CreatedAt.Before(found.CreatedAt)) {
				found = cloneUser(u)
			}
		}
	})
	if found == nil {
		return nil, fmt.Errorf("memory: find user by email: %w", storage.ErrNotFound)
	}
	return found, nil
}

// ClaimUserEmail sets a verified address unless another user has it (as
// email or username); the check and the write hold s.mu together.
func (s *Store) ClaimUserEmail(ctx context.Context, subject, email, username string) error {
	return s.updateUser(ctx, "claim user email", subject, func(u *storage.User) error {
		if other, ok := s.userByName(username); ok && other != subject {
			return fmt.Errorf("memory: claim user email: %w", storage.ErrAlreadyExists)
		}
		for sub, o := range s.users {
			if sub != subject && strings.EqualFold(o.Email, email) {
				return fmt.Errorf("memory: claim user email: %w", storage.ErrAlreadyExists)
			}
		}
		u.Email, u.EmailVerified = email, true
		return nil
	})
}

// ---- the job queue ----

// JobQueue is an in-process storage.JobStore on the Store's lock and
// transactions, for the mail worker of "authd dev" (it passes
// storagetest.RunJobStore).
type JobQueue struct{ s *Store }

// JobQueue returns the Store's job queue.
func (s *Store) JobQueue() *JobQueue { return &JobQueue{s: s} }

// EnqueueJob inserts a queued job, unless its unique key is pending.
func (q *JobQueue) EnqueueJob(ctx context.Context, j storage.NewJob) (int64, bool, error) {
	if j.Kind == "" {
		return 0, false, errors.New("memory: enqueue job: empty kind")
	}
	payload := json.RawMessage(slices.Clone(j.Payload))
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	if j.MaxAttempts <= 0 {
		j.MaxAttempts = storage.DefaultJobMaxAttempts
	}
	s := q.s
	var (
		id      int64
		created bool
	)
	s.tx(func() {
		b := s.box()
		if j.UniqueKey != "" {
			for _, x := range b.jobs {
				if x.UniqueKey == j.UniqueKey && (x.Status == storage.JobQueued || x.Status == storage.JobRunning) {
					return
				}
			}
		}
		b.nextJob++
		id, created = b.nextJob, true
		now := storage.NormalizeTime(s.now())
		b.jobs[id] = storage.Job{ID: id, Kind: j.Kind, Payload: payload, MaxAttempts: j.MaxAttempts, UniqueKey: j.UniqueKey,
			Status: storage.JobQueued, RunAt: now.Add(j.Delay), CreatedAt: now}
		s.record(ctx, func() { delete(b.jobs, id) })
	})
	return id, created, nil
}

// ClaimJob claims the due job of kinds (any kind if none) with the oldest
// RunAt.
func (q *JobQueue) ClaimJob(ctx context.Context, worker string, kinds []string, d time.Duration) (*storage.Job, error) {
	s := q.s
	var out *storage.Job
	s.tx(func() {
		now := s.now()
		var due []storage.Job
		for _, j := range s.box().jobs {
			if len(kinds) > 0 && !slices.Contains(kinds, j.Kind) || j.RunAt.After(now) {
				continue
			}
			if j.Status == storage.JobQueued || j.Status == storage.JobRunning && !j.LeaseUntil.After(now) {
				due = append(due, j)
			}
		}
		if len(due) == 0 {
			return
		}
		sort.Slice(due, func(a, b int) bool { return due[a].RunAt.Before(due[b].RunAt) })
		j := due[0]
		if j.Status == storage.JobRunning {
			j.LastError = fmt.Sprintf("attempt %d: lease of %s expired", j.Attempts, j.LockedBy)
		}
		j.Status, j.LockedBy, j.LeaseUntil = storage.JobRunning, worker, storage.NormalizeTime(now.Add(d))
		j.Attempts++
		s.box().jobs[j.ID] = j
		out = &j
	})
	if out == nil {
		return nil, fmt.Errorf("memory: claim job: %w", storage.ErrNotFound)
	}
	return out, nil
}

// held changes the job of a valid lease with f, or returns ErrLeaseLost.
func (q *JobQueue) held(ctx context.Context, l storage.Lease, f func(j *storage.Job)) error {
	s := q.s
	err := storage.ErrLeaseLost
	s.tx(func() {
		b := s.box()
		old, ok := b.jobs[l.JobID]
		if !ok || old.Status != storage.JobRunning || old.LockedBy != l.Worker || old.Attempts != l.Attempt || !old.LeaseUntil.After(s.now()) {
			return
		}
		j := old
		f(&j)
		b.jobs[l.JobID] = j
		s.record(ctx, func() { b.jobs[l.JobID] = old })
		err = nil
	})
	return err
}

// ExtendLease renews a valid lease.
func (q *JobQueue) ExtendLease(ctx context.Context, l storage.Lease, d time.Duration) error {
	return q.held(ctx, l, func(j *storage.Job) {
		j.LeaseUntil = storage.NormalizeTime(q.s.now().Add(d))
	})
}

// CompleteJob marks the job done and enqueues next.
func (q *JobQueue) CompleteJob(ctx context.Context, l storage.Lease, next *storage.NewJob) error {
	return q.finish(ctx, l, storage.JobDone, "", next)
}

// finish ends the job with status and enqueues next.
func (q *JobQueue) finish(ctx context.Context, l storage.Lease, status storage.JobStatus, errMsg string, next *storage.NewJob) error {
	err := q.held(ctx, l, func(j *storage.Job) {
		j.Status, j.LeaseUntil, j.FinishedAt = status, time.Time{}, storage.NormalizeTime(q.s.now())
		if errMsg != "" {
			j.LastError = errMsg
		}
	})
	if err != nil {
		return err
	}
	if next != nil {
		_, _, err := q.EnqueueJob(ctx, *next)
		return err
	}
	return nil
}

// RetryJob queues the job again after delay.
func (q *JobQueue) RetryJob(ctx context.Context, l storage.Lease, errMsg string, delay time.Duration) error {
	return q.held(ctx, l, func(j *storage.Job) {
		j.Status, j.LastError, j.LeaseUntil = storage.JobQueued, errMsg, time.Time{}
		j.RunAt = storage.NormalizeTime(q.s.now().Add(delay))
	})
}

// FailJob marks the job failed and enqueues next.
func (q *JobQueue) FailJob(ctx context.Context, l storage.Lease, errMsg string, next *storage.NewJob) error {
	return q.finish(ctx, l, storage.JobFailed, errMsg, next)
}

// ListJobs returns the jobs matching f, newest first.
func (q *JobQueue) ListJobs(_ context.Context, f storage.JobFilter) ([]*storage.Job, error) {
	var out []*storage.Job
	q.s.tx(func() {
		for _, j := range q.s.box().jobs {
			if (f.Kind == "" || j.Kind == f.Kind) && (f.Status == "" || j.Status == f.Status) {
				c := j
				out = append(out, &c)
			}
		}
	})
	sort.Slice(out, func(a, b int) bool { return out[a].ID > out[b].ID })
	lim := f.Limit
	if lim <= 0 {
		lim = 100
	}
	return out[:min(len(out), lim)], nil
}

// deleteExpiredOutbox deletes up to limit expired flows (kind
// storage.CleanupAccountFlows) or mail rows finished before before
// (storage.CleanupMailOutbox).
func (s *Store) deleteExpiredOutbox(ctx context.Context, kind string, before time.Time, limit int) int {
	n := 0
	s.tx(func() {
		b := s.box()
		if kind == storage.CleanupAccountFlows {
			for id, f := range b.flows {
				if n < limit && f.ExpiresAt.Before(before) {
					delete(b.flows, id)
					s.record(ctx, func() { b.flows[id] = f })
					n++
				}
			}
			return
		}
		for id, m := range b.mails {
			if n < limit && m.Status != storage.MailPending && m.FinishedAt.Before(before) {
				delete(b.mails, id)
				s.record(ctx, func() { b.mails[id] = m })
				n++
			}
		}
	})
	return n
}
