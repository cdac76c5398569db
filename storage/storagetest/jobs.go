package storagetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ory/fosite"
	fositestorage "github.com/ory/fosite/storage"

	"github.com/authd/authd/storage"
)

// JobStore is what RunJobStore tests: the job queue and transactions.
type JobStore interface {
	storage.JobStore
	fositestorage.Transactional
}

// CleanerStore is what RunCleaner tests: a Store that also cleans.
type CleanerStore interface {
	Store
	storage.Cleaner
}

var jobCases = []struct {
	name string
	run  func(t *testing.T, s JobStore)
}{
	{"EnqueueClaimComplete", testJobLifecycle},
	{"ClaimRespectsRunAtAndKinds", testJobClaimFilter},
	{"UniqueKeyOnePending", testJobUniqueKey},
	{"CompleteSchedulesNext", testJobCompleteNext},
	{"ExpiredLeaseTakenOver", testJobLeaseTakeover},
	{"LeaseFencesTransaction", testJobFence},
	{"RetryAndFail", testJobRetryFail},
	{"ListJobs", testJobList},
	{"ConcurrentClaims", testJobConcurrentClaims},
}

// RunJobStore runs the storage.JobStore conformance cases. newStore must
// return a fresh, empty store for each case.
func RunJobStore(t *testing.T, newStore func(t *testing.T) JobStore) {
	for _, tc := range jobCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t))
		})
	}
}

func mustEnqueue(t *testing.T, s JobStore, j storage.NewJob) int64 {
	t.Helper()
	id, created, err := s.EnqueueJob(t.Context(), j)
	noErr(t, "EnqueueJob", err)
	if !created || id == 0 {
		t.Fatalf("EnqueueJob(%+v) = %d, %v; want a new job", j, id, created)
	}
	return id
}

func mustClaim(t *testing.T, s JobStore, worker string, d time.Duration, kinds ...string) *storage.Job {
	t.Helper()
	j, err := s.ClaimJob(t.Context(), worker, kinds, d)
	noErr(t, "ClaimJob by "+worker, err)
	return j
}

func getJob(t *testing.T, s JobStore, id int64) *storage.Job {
	t.Helper()
	js, err := s.ListJobs(t.Context(), storage.JobFilter{Limit: 1000})
	noErr(t, "ListJobs", err)
	for _, j := range js {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("job %d not listed", id)
	return nil
}

func testJobLifecycle(t *testing.T, s JobStore) {
	ctx := t.Context()
	id := mustEnqueue(t, s, storage.NewJob{Kind: "k", Payload: []byte(`{"n":1}`)})
	j := mustClaim(t, s, "w1", time.Minute)
	if j.ID != id || j.Kind != "k" || j.Status != storage.JobRunning || j.LockedBy != "w1" ||
		j.Attempts != 1 || j.MaxAttempts != storage.DefaultJobMaxAttempts || !strings.Contains(string(j.Payload), `"n"`) {
		t.Fatalf("claimed %+v", j)
	}
	if d := time.Until(j.LeaseUntil); d < 30*time.Second || d > 2*time.Minute {
		t.Errorf("LeaseUntil %v is not about a minute from now", j.LeaseUntil)
	}
	_, err := s.ClaimJob(ctx, "w2", nil, time.Minute)
	wantErr(t, "ClaimJob while leased", err, storage.ErrNotFound)
	noErr(t, "ExtendLease", s.ExtendLease(ctx, j.Lease(), time.Minute))
	noErr(t, "CompleteJob", s.CompleteJob(ctx, j.Lease(), nil))
	wantErr(t, "CompleteJob again", s.CompleteJob(ctx, j.Lease(), nil), storage.ErrLeaseLost)
	wantErr(t, "ExtendLease after completion", s.ExtendLease(ctx, j.Lease(), time.Minute), storage.ErrLeaseLost)
	got := getJob(t, s, id)
	if got.Status != storage.JobDone || got.LockedBy != "w1" || !got.LeaseUntil.IsZero() || got.FinishedAt.IsZero() {
		t.Errorf("after CompleteJob: %+v", got)
	}
	_, err = s.ClaimJob(ctx, "w2", nil, time.Minute)
	wantErr(t, "ClaimJob after completion", err, storage.ErrNotFound)
}

func testJobClaimFilter(t *testing.T, s JobStore) {
	ctx := t.Context()
	mustEnqueue(t, s, storage.NewJob{Kind: "later", Delay: time.Hour})
	b := mustEnqueue(t, s, storage.NewJob{Kind: "b"})
	_, err := s.ClaimJob(ctx, "w", []string{"later", "c"}, time.Minute)
	wantErr(t, "ClaimJob of kinds not due", err, storage.ErrNotFound)
	if j := mustClaim(t, s, "w", time.Minute, "b", "later"); j.ID != b {
		t.Errorf("claimed job %d, want %d", j.ID, b)
	}
}

func testJobUniqueKey(t *testing.T, s JobStore) {
	ctx := t.Context()
	first := mustEnqueue(t, s, storage.NewJob{Kind: "r", UniqueKey: "r"})
	id, created, err := s.EnqueueJob(ctx, storage.NewJob{Kind: "r", UniqueKey: "r"})
	if err != nil || created || id != 0 {
		t.Fatalf("EnqueueJob of a pending key = %d, %v, %v; want 0, false, nil", id, created, err)
	}
	j := mustClaim(t, s, "w", time.Minute)
	if _, created, _ := s.EnqueueJob(ctx, storage.NewJob{Kind: "r", UniqueKey: "r"}); created {
		t.Error("EnqueueJob created a second job while the first runs")
	}
	noErr(t, "CompleteJob", s.CompleteJob(ctx, j.Lease(), nil))
	if second := mustEnqueue(t, s, storage.NewJob{Kind: "r", UniqueKey: "r"}); second == first {
		t.Error("EnqueueJob after completion returned the old job")
	}

	// Concurrent schedulers create one pending job.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		newCount int
	)
	for range Concurrency {
		wg.Go(func() {
			_, c, err := s.EnqueueJob(ctx, storage.NewJob{Kind: "s", UniqueKey: "s"})
			if err != nil {
				t.Errorf("EnqueueJob: %v", err)
			}
			if c {
				mu.Lock()
				newCount++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if newCount != 1 {
		t.Errorf("%d concurrent EnqueueJob calls with one key created %d jobs, want 1", Concurrency, newCount)
	}
}

func testJobCompleteNext(t *testing.T, s JobStore) {
	ctx := t.Context()
	mustEnqueue(t, s, storage.NewJob{Kind: "r", UniqueKey: "r"})
	j := mustClaim(t, s, "w", time.Minute)
	noErr(t, "CompleteJob", s.CompleteJob(ctx, j.Lease(), &storage.NewJob{Kind: "r", UniqueKey: "r", Delay: time.Hour, MaxAttempts: 3}))
	queued, err := s.ListJobs(ctx, storage.JobFilter{Status: storage.JobQueued})
	noErr(t, "ListJobs", err)
	if len(queued) != 1 || queued[0].UniqueKey != "r" || queued[0].MaxAttempts != 3 ||
		time.Until(queued[0].RunAt) < 50*time.Minute {
		t.Fatalf("after CompleteJob with next: queued = %+v", queued)
	}
	// A lost lease schedules nothing.
	mustEnqueue(t, s, storage.NewJob{Kind: "x"})
	x := mustClaim(t, s, "w", time.Minute, "x")
	stale := x.Lease()
	stale.Attempt++
	wantErr(t, "CompleteJob with a stale lease", s.CompleteJob(ctx, stale, &storage.NewJob{Kind: "y"}), storage.ErrLeaseLost)
	if ys, _ := s.ListJobs(ctx, storage.JobFilter{Kind: "y"}); len(ys) != 0 {
		t.Errorf("CompleteJob that lost its lease enqueued next: %+v", ys)
	}
}

func testJobLeaseTakeover(t *testing.T, s JobStore) {
	ctx := t.Context()
	id := mustEnqueue(t, s, storage.NewJob{Kind: "k"})
	a := mustClaim(t, s, "a", 100*time.Millisecond)
	time.Sleep(250 * time.Millisecond)
	wantErr(t, "ExtendLease after expiry", s.ExtendLease(ctx, a.Lease(), time.Minute), storage.ErrLeaseLost)
	b := mustClaim(t, s, "b", time.Minute)
	if b.ID != id || b.Attempts != 2 || b.LockedBy != "b" || !strings.Contains(b.LastError, "expired") {
		t.Fatalf("takeover claim = %+v", b)
	}
	wantErr(t, "CompleteJob by the old lease", s.CompleteJob(ctx, a.Lease(), nil), storage.ErrLeaseLost)
	wantErr(t, "RetryJob by the old lease", s.RetryJob(ctx, a.Lease(), "x", 0), storage.ErrLeaseLost)
	wantErr(t, "FailJob by the old lease", s.FailJob(ctx, a.Lease(), "x", nil), storage.ErrLeaseLost)
	noErr(t, "CompleteJob by the new lease", s.CompleteJob(ctx, b.Lease(), nil))
	if got := getJob(t, s, id); got.Status != storage.JobDone || got.LockedBy != "b" {
		t.Errorf("after takeover: %+v", got)
	}
	// The same worker claiming again holds a new lease; the old one is void.
	mustEnqueue(t, s, storage.NewJob{Kind: "k2"})
	c1 := mustClaim(t, s, "c", 100*time.Millisecond, "k2")
	time.Sleep(250 * time.Millisecond)
	c2 := mustClaim(t, s, "c", time.Minute, "k2")
	wantErr(t, "CompleteJob by an older lease of the same worker", s.CompleteJob(ctx, c1.Lease(), nil), storage.ErrLeaseLost)
	noErr(t, "CompleteJob by the newer lease", s.CompleteJob(ctx, c2.Lease(), nil))
}

func testJobFence(t *testing.T, s JobStore) {
	ctx := t.Context()
	mustEnqueue(t, s, storage.NewJob{Kind: "k"})
	j := mustClaim(t, s, "w", time.Minute)

	// With the lease: the fenced write commits.
	tx, err := s.BeginTX(ctx)
	noErr(t, "BeginTX", err)
	noErr(t, "ExtendLease in tx", s.ExtendLease(tx, j.Lease(), time.Minute))
	mustEnqueue(t, s, storage.NewJob{Kind: "effect-1"}) // outside the tx: unaffected
	_, _, err = s.EnqueueJob(tx, storage.NewJob{Kind: "effect-2"})
	noErr(t, "EnqueueJob in tx", err)
	noErr(t, "Commit", s.Commit(tx))

	// Without it: ExtendLease fails and the caller rolls back.
	stale := j.Lease()
	stale.Worker = "other"
	tx, err = s.BeginTX(ctx)
	noErr(t, "BeginTX", err)
	wantErr(t, "ExtendLease of a stale lease in tx", s.ExtendLease(tx, stale, time.Minute), storage.ErrLeaseLost)
	noErr(t, "Rollback", s.Rollback(tx))

	// Completion inside the transaction of the handler's writes: rolled
	// back together.
	tx, err = s.BeginTX(ctx)
	noErr(t, "BeginTX", err)
	_, _, err = s.EnqueueJob(tx, storage.NewJob{Kind: "effect-3"})
	noErr(t, "EnqueueJob in tx", err)
	noErr(t, "CompleteJob in tx", s.CompleteJob(tx, j.Lease(), nil))
	noErr(t, "Rollback", s.Rollback(tx))
	if got := getJob(t, s, j.ID); got.Status != storage.JobRunning {
		t.Errorf("rolled-back completion left status %q", got.Status)
	}
	if e3, _ := s.ListJobs(ctx, storage.JobFilter{Kind: "effect-3"}); len(e3) != 0 {
		t.Error("rolled-back write persisted")
	}
	if e2, _ := s.ListJobs(ctx, storage.JobFilter{Kind: "effect-2"}); len(e2) != 1 {
		t.Error("committed fenced write missing")
	}
}

func testJobRetryFail(t *testing.T, s JobStore) {
	ctx := t.Context()
	id := mustEnqueue(t, s, storage.NewJob{Kind: "k", MaxAttempts: 2})
	j := mustClaim(t, s, "w", time.Minute)
	noErr(t, "RetryJob", s.RetryJob(ctx, j.Lease(), "boom 1", 200*time.Millisecond))
	got := getJob(t, s, id)
	if got.Status != storage.JobQueued || got.LastError != "boom 1" || !got.LeaseUntil.IsZero() {
		t.Fatalf("after RetryJob: %+v", got)
	}
	_, err := s.ClaimJob(ctx, "w", nil, time.Minute)
	wantErr(t, "ClaimJob during backoff", err, storage.ErrNotFound)
	time.Sleep(300 * time.Millisecond)
	j = mustClaim(t, s, "w", time.Minute)
	if j.Attempts != 2 {
		t.Errorf("second claim Attempts = %d, want 2", j.Attempts)
	}
	noErr(t, "FailJob", s.FailJob(ctx, j.Lease(), "boom 2", &storage.NewJob{Kind: "k", UniqueKey: "k"}))
	got = getJob(t, s, id)
	if got.Status != storage.JobFailed || got.LastError != "boom 2" || got.Attempts != 2 || got.FinishedAt.IsZero() {
		t.Fatalf("after FailJob: %+v", got)
	}
	_, err = s.ClaimJob(ctx, "w", []string{"nothing-else"}, time.Minute)
	wantErr(t, "ClaimJob", err, storage.ErrNotFound)
	if next, _ := s.ListJobs(ctx, storage.JobFilter{Kind: "k", Status: storage.JobQueued}); len(next) != 1 {
		t.Errorf("FailJob with next: queued = %+v", next)
	}
}

func testJobList(t *testing.T, s JobStore) {
	ctx := t.Context()
	var ids []int64
	for i := range 5 {
		ids = append(ids, mustEnqueue(t, s, storage.NewJob{Kind: fmt.Sprint("k", i%2)}))
	}
	all, err := s.ListJobs(ctx, storage.JobFilter{})
	noErr(t, "ListJobs", err)
	if len(all) != 5 || all[0].ID != ids[4] || all[4].ID != ids[0] {
		t.Fatalf("ListJobs = %d jobs, want 5 newest first", len(all))
	}
	k1, err := s.ListJobs(ctx, storage.JobFilter{Kind: "k1", Status: storage.JobQueued, Limit: 1})
	noErr(t, "ListJobs filtered", err)
	if len(k1) != 1 || k1[0].ID != ids[3] {
		t.Errorf("ListJobs(k1, queued, 1) = %+v", k1)
	}
}

func testJobConcurrentClaims(t *testing.T, s JobStore) {
	ctx := t.Context()
	const jobs = 100
	for range jobs {
		mustEnqueue(t, s, storage.NewJob{Kind: "k"})
	}
	var (
		mu     sync.Mutex
		claims = map[int64]int{}
		wg     sync.WaitGroup
	)
	for w := range Concurrency {
		wg.Go(func() {
			for {
				j, err := s.ClaimJob(ctx, fmt.Sprint("w", w), nil, time.Minute)
				if errors.Is(err, storage.ErrNotFound) {
					return
				}
				if err != nil {
					t.Errorf("ClaimJob: %v", err)
					return
				}
				mu.Lock()
				claims[j.ID]++
				mu.Unlock()
				if err := s.CompleteJob(ctx, j.Lease(), nil); err != nil {
					t.Errorf("CompleteJob: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if len(claims) != jobs {
		t.Errorf("%d jobs claimed, want %d", len(claims), jobs)
	}
	for id, n := range claims {
		if n != 1 {
			t.Errorf("job %d claimed %d times", id, n)
		}
	}
}

// ---- cleanup ----

var cleanerCases = []struct {
	name string
	run  func(t *testing.T, s CleanerStore)
}{
	{"DeleteExpiredTokens", testCleanupTokens},
	{"DeleteExpiredClientAssertionJWTs", testCleanupJTIs},
	{"DeleteExpiredUnknownKind", testCleanupUnknownKind},
}

// RunCleaner runs the storage.Cleaner conformance cases. newStore must
// return a fresh, empty store for each case.
func RunCleaner(t *testing.T, newStore func(t *testing.T) CleanerStore) {
	for _, tc := range cleanerCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t))
		})
	}
}

// requestExpiring returns a request whose code, access and refresh token
// all expire at exp.
func requestExpiring(clientID, id string, exp time.Time) *fosite.Request {
	r := newRequest(clientID, id)
	s := r.Session.(*fosite.DefaultSession)
	for k := range s.ExpiresAt {
		s.ExpiresAt[k] = exp
	}
	return r
}

func testCleanupTokens(t *testing.T, s CleanerStore) {
	ctx := t.Context()
	mustClient(t, s, "app")
	now := time.Now()
	past, future := now.Add(-time.Minute), now.Add(time.Hour)
	kinds := []struct {
		kind   string
		create func(sig string, r fosite.Requester) error
		get    func(sig string) error
	}{
		{storage.CleanupAuthorizeCodes, func(sig string, r fosite.Requester) error { return s.CreateAuthorizeCodeSession(ctx, sig, r) },
			func(sig string) error { _, err := s.GetAuthorizeCodeSession(ctx, sig, sess()); return err }},
		{storage.CleanupAccessTokens, func(sig string, r fosite.Requester) error { return s.CreateAccessTokenSession(ctx, sig, r) },
			func(sig string) error { _, err := s.GetAccessTokenSession(ctx, sig, sess()); return err }},
		{storage.CleanupRefreshTokens, func(sig string, r fosite.Requester) error { return s.CreateRefreshTokenSession(ctx, sig, "", r) },
			func(sig string) error { _, err := s.GetRefreshTokenSession(ctx, sig, sess()); return err }},
		{storage.CleanupPKCESessions, func(sig string, r fosite.Requester) error { return s.CreatePKCERequestSession(ctx, sig, r) },
			func(sig string) error { _, err := s.GetPKCERequestSession(ctx, sig, sess()); return err }},
	}
	const expired = 7
	for _, k := range kinds {
		for i := range expired {
			noErr(t, "create expired", k.create(fmt.Sprintf("%s-old-%d", k.kind, i), requestExpiring("app", fmt.Sprint("old-", i), past)))
		}
		noErr(t, "create live", k.create(k.kind+"-live", requestExpiring("app", "live", future)))
		noErr(t, "create revoked", k.create(k.kind+"-revoked", requestExpiring("app", "revoked", future)))
	}
	noErr(t, "InvalidateAuthorizeCodeSession", s.InvalidateAuthorizeCodeSession(ctx, storage.CleanupAuthorizeCodes+"-revoked"))
	noErr(t, "RevokeAccessToken", s.RevokeAccessToken(ctx, "revoked"))
	noErr(t, "RevokeRefreshToken", s.RevokeRefreshToken(ctx, "revoked"))

	got, err := s.CleanupKinds(ctx)
	noErr(t, "CleanupKinds", err)
	for _, k := range kinds {
		if !slices.Contains(got, k.kind) {
			t.Errorf("CleanupKinds = %v, missing %q", got, k.kind)
		}
		n, err := s.DeleteExpired(ctx, k.kind, now, 5)
		noErr(t, "DeleteExpired "+k.kind, err)
		if n != 5 {
			t.Errorf("DeleteExpired(%s, limit 5) = %d, want 5", k.kind, n)
		}
		// Revoked rows stay until they expire (see storage.Cleanup*).
		want := expired - 5
		n, err = s.DeleteExpired(ctx, k.kind, now, 100)
		noErr(t, "DeleteExpired "+k.kind, err)
		if n != want {
			t.Errorf("DeleteExpired(%s) second batch = %d, want %d", k.kind, n, want)
		}
		n, _ = s.DeleteExpired(ctx, k.kind, now, 100)
		if n != 0 {
			t.Errorf("DeleteExpired(%s) third batch = %d, want 0", k.kind, n)
		}
		for i := range expired {
			wantErr(t, k.kind+" expired row", k.get(fmt.Sprintf("%s-old-%d", k.kind, i)), storage.ErrNotFound)
		}
		if err := k.get(k.kind + "-live"); err != nil {
			t.Errorf("%s live row: %v", k.kind, err)
		}
		if err := k.get(k.kind + "-revoked"); errors.Is(err, storage.ErrNotFound) {
			t.Errorf("%s: unexpired revoked row deleted", k.kind)
		}
	}
}

func testCleanupJTIs(t *testing.T, s CleanerStore) {
	ctx := t.Context()
	// SetClientAssertionJWT forgets expired JTIs itself, so these expire
	// only after they are all set.
	noErr(t, "SetClientAssertionJWT live", s.SetClientAssertionJWT(ctx, "live", time.Now().Add(time.Hour)))
	for i := range 3 {
		noErr(t, "SetClientAssertionJWT", s.SetClientAssertionJWT(ctx, fmt.Sprint("old-", i), time.Now().Add(200*time.Millisecond)))
	}
	time.Sleep(300 * time.Millisecond)
	n, err := s.DeleteExpired(ctx, storage.CleanupClientAssertionJWTs, time.Now(), 2)
	noErr(t, "DeleteExpired", err)
	if n != 2 {
		t.Errorf("DeleteExpired(limit 2) = %d, want 2", n)
	}
	n, _ = s.DeleteExpired(ctx, storage.CleanupClientAssertionJWTs, time.Now(), 100)
	if n != 1 {
		t.Errorf("DeleteExpired second batch = %d, want 1", n)
	}
	wantErr(t, "live JTI", s.ClientAssertionJWTValid(ctx, "live"), fosite.ErrJTIKnown)
}

func testCleanupUnknownKind(t *testing.T, s CleanerStore) {
	_, err := s.DeleteExpired(t.Context(), "users", time.Now(), 10)
	wantErr(t, "DeleteExpired(users)", err, storage.ErrNotFound)
}
