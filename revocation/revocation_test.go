package revocation_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/revocation"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
)

// partialCache is a replay cache one of whose keys cannot be reached, as
// when its Redis Cluster node is down while the others answer, and
// another of whose keys times out once (a busy node).
type partialCache struct {
	exchangecache.Cache
	down, slow string
	slowed     *int
}

func (c partialCache) Forget(ctx context.Context, key string) error {
	switch {
	case key == c.down:
		return errors.New("dial tcp: connection refused")
	case key == c.slow && *c.slowed == 0:
		*c.slowed++
		return fmt.Errorf("exchangecache: forget: %w", context.DeadlineExceeded)
	}
	return c.Cache.Forget(ctx, key)
}

// TestRevokeForgetsEveryReachableEntry: a revocation drops every replay
// cache entry of the grant it can reach, even when another entry's node
// is down (and retries one that timed out), and reports the one it could
// not drop.
func TestRevokeForgetsEveryReachableEntry(t *testing.T) {
	ctx := t.Context()
	store := memory.New()
	if err := store.CreateClient(ctx, &storage.Client{ID: "app", TokenEndpointAuthMethod: "none"}); err != nil {
		t.Fatal(err)
	}
	keys := []string{"c:code", "r:first", "r:second", "r:third"}
	mem := exchangecache.NewMemory()
	for _, k := range keys {
		if _, err := store.PutReplayRecord(ctx, &storage.ReplayRecord{Key: k, RequestID: "grant", ClientID: "app",
			Fingerprint: "fp", Sealed: []byte("sealed"), WindowEnd: time.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		res, err := mem.Claim(ctx, k, "fp", time.Minute)
		if err != nil || res.Outcome != exchangecache.Claimed {
			t.Fatalf("claim %s: %v %v", k, res.Outcome, err)
		}
		if err := mem.Complete(ctx, k, res.Owner, []byte("sealed"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// The store lists the keys in any order: with an early failure, the
	// old loop (stop at the first error) left the rest replayable.
	var reported []error
	slowed := 0
	s := revocation.Store{Store: store, Cache: partialCache{Cache: mem, down: "r:first", slow: "r:second", slowed: &slowed},
		OnError: func(err error) { reported = append(reported, err) }}
	if err := s.RevokeRefreshToken(ctx, "grant"); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		res, err := mem.Lookup(ctx, k, "fp")
		if err != nil {
			t.Fatal(err)
		}
		if want := exchangecache.Absent; k == "r:first" {
			if res.Outcome != exchangecache.Completed {
				t.Errorf("%s (unreachable): %v, want still completed", k, res.Outcome)
			}
		} else if res.Outcome != want {
			t.Errorf("%s: %v after the revocation, want %v: a reachable entry of a revoked grant is still replayable", k, res.Outcome, want)
		}
	}
	if len(reported) != 1 {
		t.Errorf("%d failures reported, want 1: %v", len(reported), reported)
	}
}

// failingStore is a memory store whose RevokeAccessToken fails, as when
// the database goes away between fosite's two revocation calls.
type failingStore struct {
	*memory.Store
}

func (failingStore) RevokeAccessToken(context.Context, string) error {
	return storage.ErrUnavailable
}

// TestRevokeGrantIsAtomic: revoking a grant's refresh token revokes its
// access tokens in the same transaction; when that fails, nothing is
// revoked, so the client's retry of the revocation (which fosite answers
// 200 once the refresh token is inactive) cannot leave the access token
// active.
func TestRevokeGrantIsAtomic(t *testing.T) {
	ctx := t.Context()
	mem := memory.New()
	if err := mem.CreateClient(ctx, &storage.Client{ID: "app", TokenEndpointAuthMethod: "none"}); err != nil {
		t.Fatal(err)
	}
	req := fosite.NewRequest()
	req.ID = "grant"
	req.Client = &storage.Client{ID: "app"}
	req.Session = &fosite.DefaultSession{}
	if err := mem.CreateAccessTokenSession(ctx, "at", req); err != nil {
		t.Fatal(err)
	}
	if err := mem.CreateRefreshTokenSession(ctx, "rt", "at", req); err != nil {
		t.Fatal(err)
	}
	s := revocation.Store{Store: failingStore{mem}}
	if err := s.RevokeRefreshToken(ctx, "grant"); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("RevokeRefreshToken: %v, want the failure of the access token half", err)
	}
	if _, err := mem.GetRefreshTokenSession(ctx, "rt", &fosite.DefaultSession{}); err != nil {
		t.Fatalf("refresh token after a failed revocation: %v, want still active (all or nothing)", err)
	}

	s = revocation.Store{Store: mem}
	if err := s.RevokeRefreshToken(ctx, "grant"); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.GetAccessTokenSession(ctx, "at", &fosite.DefaultSession{}); !errors.Is(err, storage.ErrInactiveToken) {
		t.Fatalf("access token after revoking the refresh token: %v, want inactive", err)
	}
}
