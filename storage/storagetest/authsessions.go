package storagetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authd/authd/storage"
)

// authSessionCases check storage.AuthSessionStore (the challenge
// endpoint's auth_session): one conditional write per step, of N
// concurrent steps on one version exactly one wins.
var authSessionCases = []testCase{
	{"AuthSessionRoundTrip", testAuthSessionRoundTrip},
	{"AuthSessionOneStepWins", testAuthSessionOneStepWins},
}

func newAuthSession(t *testing.T, s Store, id string, now time.Time) *storage.AuthSession {
	t.Helper()
	a := &storage.AuthSession{ID: id, ClientID: "fp", JKT: "", CodeChallenge: "cc", Params: "scope=openid",
		ExpiresAt: now.Add(5 * time.Minute), CreatedAt: now}
	if err := s.CreateAuthSession(t.Context(), a); err != nil {
		t.Fatalf("CreateAuthSession = %v", err)
	}
	return a
}

func testAuthSessionRoundTrip(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "fp")
	now := time.Now().In(nonUTC)
	if err := s.CreateAuthSession(ctx, &storage.AuthSession{ID: "x", ClientID: "nobody", CodeChallenge: "c",
		ExpiresAt: now.Add(time.Minute), CreatedAt: now}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown client: %v, want ErrNotFound", err)
	}
	a := newAuthSession(t, s, "as1", now)
	if err := s.CreateAuthSession(ctx, a); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("duplicate: %v", err)
	}
	got, err := s.GetAuthSession(ctx, "as1", now)
	if err != nil || got.ClientID != "fp" || got.CodeChallenge != "cc" || got.Params != "scope=openid" || got.Subject != "" ||
		got.Version != 0 || !got.AuthTime.IsZero() || got.ExpiresAt.Location() != time.UTC {
		t.Fatalf("GetAuthSession = %+v, %v", got, err)
	}
	got.Subject, got.AMR, got.AuthTime = "alice-sub", []string{"pwd"}, now
	if err := s.UpdateAuthSession(ctx, got, now); err != nil || got.Version != 1 {
		t.Fatalf("UpdateAuthSession = %v (version %d)", err, got.Version)
	}
	stale := *got
	stale.Version = 0
	if err := s.UpdateAuthSession(ctx, &stale, now); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("stale version: %v", err)
	}
	again, err := s.GetAuthSession(ctx, "as1", now)
	if err != nil || again.Subject != "alice-sub" || len(again.AMR) != 1 || again.AuthTime.IsZero() {
		t.Fatalf("after update: %+v, %v", again, err)
	}
	if _, err := s.GetAuthSession(ctx, "as1", now.Add(6*time.Minute)); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("expired: %v", err)
	}
	if err := s.UpdateAuthSession(ctx, again, now.Add(6*time.Minute)); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("update expired: %v", err)
	}
	again.Done = true
	if err := s.UpdateAuthSession(ctx, again, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetAuthSession(ctx, "as1", now); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("done: %v", err)
	}
	if err := s.UpdateAuthSession(ctx, again, now); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("update done: %v", err)
	}
	newAuthSession(t, s, "as2", now.Add(-time.Hour))
	if n, err := s.DeleteExpiredAuthSessions(ctx, now, 10); err != nil || n != 1 {
		t.Fatalf("DeleteExpiredAuthSessions = %d, %v", n, err)
	}
}

func testAuthSessionOneStepWins(t *testing.T, s Store) {
	mustClient(t, s, "fp")
	now := time.Now()
	newAuthSession(t, s, "race", now)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range Concurrency {
		wg.Go(func() {
			ctx, err := s.BeginTX(t.Context())
			if err != nil {
				t.Error(err)
				return
			}
			a, err := s.GetAuthSession(ctx, "race", now)
			if err != nil {
				_ = s.Rollback(ctx)
				return // read after the winner committed
			}
			a.Done = true
			if err := s.UpdateAuthSession(ctx, a, now); err != nil {
				_ = s.Rollback(ctx)
				if !errors.Is(err, storage.ErrNotFound) {
					t.Error(err)
				}
				return
			}
			if err := s.Commit(ctx); err == nil {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d steps won, want 1", wins.Load())
	}
}
