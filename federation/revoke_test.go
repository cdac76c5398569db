package federation_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/authd/authd/federation"
	"github.com/authd/authd/federation/federationtest"
	"github.com/authd/authd/jobs"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// Deleting a user queues the revocation of its provider refresh token in
// the same transaction; the leased job revokes it at the provider, and a
// failed revocation is retried after its back-off (10 s), never lost.
func TestRevocationAtDeletion(t *testing.T) {
	ctx := context.Background()
	store := postgres.New(pgtest.New(t))
	up := federationtest.New(t)
	up.ClientID = "com.example.web"
	secret := []byte("revocation-test-secret-0123456789-0123456789")
	if err := store.CreateProvider(ctx, &storage.Provider{ID: "up", Kind: "oidc", Issuer: up.Issuer, ClientID: "com.example.web",
		DisplayName: "Up"}); err != nil {
		t.Fatal(err)
	}
	u := &storage.User{Username: "gone", PasswordHash: []byte{}}
	if err := store.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	if err := store.SaveProviderToken(ctx, &storage.ProviderToken{Issuer: up.Issuer, Sub: "s1", ProviderID: "up", Subject: u.Subject,
		Sealed: federation.SealToken(secret, up.Issuer, "s1", "apple-refresh-token")}); err != nil {
		t.Fatal(err)
	}
	// The real time plus what the test adds: DeleteUser queues with the
	// database's clock.
	c := &clock{}
	now := func() time.Time { return time.Now().Add(c.now().Sub(time.Time{})) }
	reg := federation.NewRegistry(federation.RegistryConfig{Secret: secret, Store: store})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	kind := federation.RevocationKindAt(secret, reg, store, log, now)
	kind.Every = time.Millisecond
	run := func() {
		t.Helper()
		w, err := jobs.NewWorker(store, jobs.Config{ID: "w", Logger: log}, kind)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		if _, err := w.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// until runs the job until cond holds (a bounded number of times).
	until := func(what string, cond func() bool) {
		t.Helper()
		for range 100 {
			run()
			if cond() {
				return
			}
		}
		t.Fatalf("never: %s", what)
	}
	run()
	if len(up.RevokedTokens()) != 0 {
		t.Fatal("revoked before the user was deleted")
	}
	if err := store.DeleteUser(ctx, u.Subject); err != nil {
		t.Fatal(err)
	}
	up.RevokeFailures = 1
	until("the first attempt", func() bool { return up.RevokeFailuresLeft() == 0 })
	for range 5 {
		run()
	}
	if len(up.RevokedTokens()) != 0 {
		t.Fatal("retried before its back-off")
	}
	c.add(11 * time.Second)
	until("the retry", func() bool { return len(up.RevokedTokens()) == 1 })
	if got := up.RevokedTokens(); got[0] != "apple-refresh-token" {
		t.Fatalf("revoked %v", got)
	}
	c.add(time.Hour)
	for range 5 {
		run()
	}
	if len(up.RevokedTokens()) != 1 {
		t.Fatal("revoked twice")
	}
}
