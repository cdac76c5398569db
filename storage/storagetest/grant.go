package storagetest

import (
	"errors"
	"testing"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

// testRevokeDuringRotation: a refresh token revoked while a rotation of it
// is in flight (RFC 7009 §2.1: revoking a refresh token invalidates the
// grant) leaves no token of the grant active, including the new pair the
// rotation commits afterwards.
func testRevokeDuringRotation(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "c1")
	req := newRequest("c1", "grant-1")
	if err := s.CreateAccessTokenSession(ctx, "at1", req); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRefreshTokenSession(ctx, "rt1", "at1", req); err != nil {
		t.Fatal(err)
	}

	tctx, err := s.BeginTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RotateRefreshToken(tctx, "grant-1", "rt1"); err != nil {
		t.Fatal(err)
	}
	revoked := make(chan error, 1)
	go func() {
		err := s.RevokeRefreshToken(ctx, "grant-1")
		if err == nil {
			err = s.RevokeAccessToken(ctx, "grant-1")
		}
		revoked <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the revocation start (and wait, where it must)
	if err := s.CreateAccessTokenSession(tctx, "at2", req); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRefreshTokenSession(tctx, "rt2", "at2", req); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(tctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-revoked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("revocation did not finish")
	}
	for _, sig := range []string{"rt1", "rt2"} {
		if _, err := s.GetRefreshTokenSession(ctx, sig, &fosite.DefaultSession{}); !errors.Is(err, storage.ErrInactiveToken) {
			t.Errorf("refresh token %s after revocation: err = %v, want ErrInactiveToken", sig, err)
		}
	}
	for _, sig := range []string{"at1", "at2"} {
		if _, err := s.GetAccessTokenSession(ctx, sig, &fosite.DefaultSession{}); !errors.Is(err, storage.ErrInactiveToken) {
			t.Errorf("access token %s after revocation: err = %v, want ErrInactiveToken", sig, err)
		}
	}
}

// testLockClient: LockClient finds existing clients, inside and outside a
// transaction, and reports ErrNotFound for unknown ones.
func testLockClient(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "c1")
	if err := s.LockClient(ctx, "c1"); err != nil {
		t.Fatalf("LockClient outside a transaction: %v", err)
	}
	tctx, err := s.BeginTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.LockClient(tctx, "c1"); err != nil {
		t.Fatalf("LockClient in a transaction: %v", err)
	}
	if err := s.LockClient(tctx, "nobody"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("LockClient of an unknown client: %v, want ErrNotFound", err)
	}
	if err := s.Rollback(tctx); err != nil {
		t.Fatal(err)
	}
}
