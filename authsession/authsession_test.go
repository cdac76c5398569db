package authsession_test

import (
	"errors"
	"testing"
	"time"

	"github.com/authd/authd/authsession"
	"github.com/authd/authd/internal/importcheck"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
)

func TestHandleLifecycle(t *testing.T) {
	ctx := t.Context()
	store := memory.New()
	if err := store.CreateClient(ctx, &storage.Client{ID: "app"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	svc := authsession.New(store, authsession.Options{TTL: time.Minute, Now: func() time.Time { return now }})
	a := &storage.AuthSession{ClientID: "app", CodeChallenge: "cc"}
	handle, err := svc.Start(ctx, a)
	if err != nil || len(handle) != 43 || a.ID != authsession.ID(handle) || a.ID == handle {
		t.Fatalf("Start = %q, %v (id %q)", handle, err, a.ID)
	}
	for _, bad := range []string{"", "short", handle[:42] + "x"} {
		if _, err := svc.Get(ctx, bad); !errors.Is(err, authsession.ErrInvalid) {
			t.Errorf("Get(%q) = %v", bad, err)
		}
	}
	got, err := svc.Get(ctx, handle)
	if err != nil {
		t.Fatal(err)
	}
	stale := *got
	got.Subject, got.Done = "alice", true
	if err := svc.Advance(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := svc.Advance(ctx, &stale); !errors.Is(err, authsession.ErrInvalid) {
		t.Fatalf("stale advance: %v", err)
	}
	if _, err := svc.Get(ctx, handle); !errors.Is(err, authsession.ErrInvalid) {
		t.Fatalf("done session: %v", err)
	}
	h2, _ := svc.Start(ctx, &storage.AuthSession{ClientID: "app", CodeChallenge: "cc"})
	now = now.Add(time.Minute)
	if _, err := svc.Get(ctx, h2); !errors.Is(err, authsession.ErrInvalid) {
		t.Fatalf("expired session: %v", err)
	}
}

// TestNoHTTP: the service knows no HTTP.
func TestNoHTTP(t *testing.T) { importcheck.NoHTTP(t) }
