package identity_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/authd/authd/idempotency"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/storage/memory"
)

// TestAdmin: the operator's operations return typed results and errors; a
// write under a key replays its answer byte for byte; a page's cursor
// leads to the next page; withdrawing a consent that is not there is
// ErrConsentNotFound and keeps no key.
func TestAdmin(t *testing.T) {
	ctx := t.Context()
	store := memory.New()
	keys, err := idempotency.New(idempotency.Config{Secret: []byte("identity-admin-test-secret-0123456789-0123"), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	admin := identity.NewAdmin(identity.New(store, identity.Options{Passwords: cheap}), keys)
	caller := keys.LocalCaller("test")

	created, err := admin.Create(ctx, caller, "k1", identity.NewUser{Username: "Alice", Password: "correct horse"})
	if err != nil || created.Outcome != idempotency.OutcomeCreated || created.User.Username != "alice" ||
		created.Subject != created.User.Subject || created.Replayed {
		t.Fatalf("Create = %+v, %v", created, err)
	}
	again, err := admin.Create(ctx, caller, "k1", identity.NewUser{Username: "ALICE", Password: "correct horse"})
	if err != nil || !again.Replayed || !bytes.Equal(again.JSON, created.JSON) || again.User.Subject != created.User.Subject {
		t.Fatalf("replay = %+v, %v", again, err)
	}
	if _, err := admin.Create(ctx, caller, "k1", identity.NewUser{Username: "alice", Password: "another horse"}); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("another request under the key: %v", err)
	}
	if _, err := admin.Create(ctx, caller, "", identity.NewUser{Username: "a b", Password: "correct horse"}); !errors.Is(err, identity.ErrInvalidUsername) {
		t.Fatalf("bad username: %v", err)
	}

	renamed, err := admin.Update(ctx, caller, "", "alice", identity.UserChange{Username: "Alicia", Name: "A"})
	if err != nil || renamed.User.Username != "alicia" || renamed.User.Subject != created.Subject {
		t.Fatalf("Update = %+v, %v", renamed, err)
	}
	out, err := admin.SignOut(ctx, caller, "", "alicia")
	if err != nil || out.SessionsEnded != 0 || out.Subject != created.Subject {
		t.Fatalf("SignOut = %+v, %v", out, err)
	}
	if r, err := admin.RevokeConsent(ctx, caller, "k2", "alicia", "some-app"); !errors.Is(err, identity.ErrConsentNotFound) || r.JSON != nil {
		t.Fatalf("RevokeConsent without a consent = %+v, %v", r, err)
	}
	if _, err := admin.RevokeConsent(ctx, caller, "", "alicia", ""); !errors.Is(err, identity.ErrInvalidClientID) {
		t.Fatalf("RevokeConsent without a client: %v", err)
	}
	if _, err := admin.Disable(ctx, caller, "", "nobody"); !errors.Is(err, identity.ErrUserNotFound) {
		t.Fatalf("Disable nobody: %v", err)
	}

	for _, name := range []string{"bob", "carol"} {
		if _, err := admin.Create(ctx, caller, "", identity.NewUser{Username: name, Password: "correct horse"}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := admin.Page(ctx, 2, "")
	if err != nil || len(first.Users) != 2 || first.NextCursor == "" {
		t.Fatalf("first page = %+v, %v", first, err)
	}
	second, err := admin.Page(ctx, 2, first.NextCursor)
	if err != nil || len(second.Users) != 1 || second.Users[0].Username != "carol" || second.NextCursor != "" {
		t.Fatalf("second page = %+v, %v", second, err)
	}
	if _, err := admin.Page(ctx, identity.MaxPageLimit+1, ""); !errors.Is(err, identity.ErrInvalidLimit) {
		t.Fatalf("limit: %v", err)
	}
	if _, err := admin.Page(ctx, 0, "YWJj"); !errors.Is(err, identity.ErrInvalidCursor) {
		t.Fatalf("cursor: %v", err)
	}

	deleted, err := admin.Delete(ctx, caller, "k3", "alicia")
	if err != nil || deleted.Outcome != idempotency.OutcomeDone || deleted.JSON != nil || deleted.Subject != created.Subject {
		t.Fatalf("Delete = %+v, %v", deleted, err)
	}
	if replay, err := admin.Delete(ctx, caller, "k3", "alicia"); err != nil || !replay.Replayed || replay.Outcome != idempotency.OutcomeDone {
		t.Fatalf("Delete replay = %+v, %v", replay, err)
	}
}
