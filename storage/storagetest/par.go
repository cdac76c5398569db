package storagetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/authd/authd/storage"
)

// parCases are the storage.PARStore cases (RFC 9126): a pushed request
// round-trips, is used exactly once however many callers race, and goes
// with its client.
var parCases = []testCase{
	{"PARRequest", testPARRequest},
	{"PARRequestUsedOnce", testPARRequestUsedOnce},
}

func testPARRequest(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "par-app")
	req := newRequest("par-app", "par-req-1")
	if err := s.CreatePARRequest(ctx, "par-sig", req); err != nil {
		t.Fatal(err)
	}
	if err := s.CreatePARRequest(ctx, "par-sig", req); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("second create: %v", err)
	}
	got, active, err := s.GetPARRequest(ctx, "par-sig", sess())
	if err != nil || !active || got.GetID() != "par-req-1" || got.GetRequestForm().Get("redirect_uri") != "https://app.example/cb" {
		t.Fatalf("get: %v %v %v", got, active, err)
	}
	if _, _, err := s.GetPARRequest(ctx, "nope", sess()); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if err := s.UsePARRequest(ctx, "nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("use missing: %v", err)
	}
	if err := s.DeleteClient(ctx, "par-app"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetPARRequest(ctx, "par-sig", sess()); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after the client's deletion: %v", err)
	}
}

func testPARRequestUsedOnce(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "par-race")
	if err := s.CreatePARRequest(ctx, "par-race-sig", newRequest("par-race", "par-req-2")); err != nil {
		t.Fatal(err)
	}
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.UsePARRequest(ctx, "par-race-sig")
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, storage.ErrInactiveToken):
				t.Errorf("loser: %v", err)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d winners, want 1", won.Load())
	}
	if _, active, err := s.GetPARRequest(ctx, "par-race-sig", sess()); err != nil || active {
		t.Fatalf("after use: active %v, %v", active, err)
	}
}
