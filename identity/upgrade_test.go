package identity_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/password"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// cheap is a Hasher fast enough for tests: argon2id with 64 KiB, 1 pass.
var cheap = password.New(password.Options{Params: password.Params{Memory: 64, Time: 1, Threads: 1}})

// newStore is a fresh store of backend ("memory" or "postgres"; PostgreSQL
// is skipped, or fails with AUTHD_TEST_REQUIRE_BACKENDS, without
// AUTHD_TEST_POSTGRES_DSN).
func newStore(t *testing.T, backend string) identity.Store {
	if backend == "postgres" {
		return postgres.New(pgtest.New(t))
	}
	return memory.New()
}

// bcryptUser stores a user whose hash is bcrypt, as authd before argon2id
// made them, straight into the store.
func bcryptUser(t *testing.T, store identity.Store, name, pw string) *storage.User {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	u := &storage.User{Username: name, PasswordHash: hash, CreatedAt: time.Now().UTC()}
	if err := store.CreateUser(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	return u
}

func storedHash(t *testing.T, store identity.Store, subject string) []byte {
	t.Helper()
	u, err := store.GetUserBySubject(t.Context(), subject)
	if err != nil {
		t.Fatal(err)
	}
	return u.PasswordHash
}

// TestBcryptUserUpgradedAtSignIn: an existing bcrypt user signs in and
// their stored hash is now argon2id; they sign in again with it; a wrong
// password or a disabled user upgrades nothing.
func TestBcryptUserUpgradedAtSignIn(t *testing.T) {
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			store := newStore(t, backend)
			svc := identity.New(store, identity.Options{Passwords: cheap})
			u := bcryptUser(t, store, "alice", "correct horse")
			old := storedHash(t, store, u.Subject)

			if _, err := svc.Authenticate(ctx, "alice", "wrong horse"); !errors.Is(err, identity.ErrInvalidCredentials) {
				t.Fatalf("wrong password: %v", err)
			}
			if got := storedHash(t, store, u.Subject); !bytes.Equal(got, old) {
				t.Fatalf("a wrong password changed the stored hash to %q", got)
			}

			got, err := svc.Authenticate(ctx, "Alice", "correct horse")
			if err != nil || got.Subject != u.Subject {
				t.Fatalf("bcrypt sign-in = %+v, %v", got, err)
			}
			upgraded := storedHash(t, store, u.Subject)
			if !strings.HasPrefix(string(upgraded), "$argon2id$v=19$") || cheap.NeedsRehash(upgraded) {
				t.Fatalf("stored hash after sign-in = %q, want argon2id with the current parameters", upgraded)
			}
			if err := cheap.Verify(ctx, upgraded, []byte("correct horse")); err != nil {
				t.Fatalf("the new hash is not of the password: %v", err)
			}

			if _, err := svc.Authenticate(ctx, "alice", "correct horse"); err != nil {
				t.Fatalf("second sign-in, argon2id: %v", err)
			}
			if again := storedHash(t, store, u.Subject); !bytes.Equal(again, upgraded) {
				t.Error("a sign-in with a current hash rehashed it")
			}
			if _, err := svc.Authenticate(ctx, "alice", "wrong horse"); !errors.Is(err, identity.ErrInvalidCredentials) {
				t.Errorf("wrong password after the upgrade: %v", err)
			}

			// A disabled bcrypt user: refused, nothing rewritten.
			d := bcryptUser(t, store, "dora", "correct horse")
			if err := store.SetUserDisabled(ctx, d.Subject, true); err != nil {
				t.Fatal(err)
			}
			dOld := storedHash(t, store, d.Subject)
			if _, err := svc.Authenticate(ctx, "dora", "correct horse"); !errors.Is(err, identity.ErrInvalidCredentials) {
				t.Errorf("disabled user: %v", err)
			}
			if !bytes.Equal(storedHash(t, store, d.Subject), dOld) {
				t.Error("a disabled user's sign-in rewrote the hash")
			}
		})
	}
}

// TestUpgradeWithDefaultParams: with the production Hasher (OWASP's
// parameters), the upgraded hash is exactly their PHC form.
func TestUpgradeWithDefaultParams(t *testing.T) {
	t.Parallel()
	store := memory.New()
	svc := identity.New(store, identity.Options{})
	u := bcryptUser(t, store, "alice", "correct horse")
	if _, err := svc.Authenticate(t.Context(), "alice", "correct horse"); err != nil {
		t.Fatal(err)
	}
	if h := storedHash(t, store, u.Subject); !strings.HasPrefix(string(h), "$argon2id$v=19$m=7168,t=5,p=1$") {
		t.Errorf("stored hash = %q, want OWASP's argon2id parameters", h)
	}
	added, err := svc.Add(t.Context(), identity.NewUser{Username: "bob", Password: "battery staple"})
	if err != nil {
		t.Fatal(err)
	}
	if h := storedHash(t, store, added.Subject); !strings.HasPrefix(string(h), "$argon2id$v=19$m=7168,t=5,p=1$") {
		t.Errorf("new user's hash = %q, want OWASP's argon2id parameters", h)
	}
}

// TestOldArgon2ParamsUpgraded: a user whose hash has the parameters authd
// used before (OWASP's 19 MiB, t = 2) signs in with them, and the stored
// hash then has the current ones.
func TestOldArgon2ParamsUpgraded(t *testing.T) {
	t.Parallel()
	store := memory.New()
	svc := identity.New(store, identity.Options{})
	old, err := password.New(password.Options{Params: password.Params{Memory: 19456, Time: 2, Threads: 1}}).Hash(t.Context(), []byte("correct horse"))
	if err != nil {
		t.Fatal(err)
	}
	u := &storage.User{Username: "carol", PasswordHash: old, CreatedAt: time.Now().UTC()}
	if err := store.CreateUser(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Authenticate(t.Context(), "carol", "correct horse"); err != nil {
		t.Fatalf("sign-in with a 19 MiB hash: %v", err)
	}
	if h := storedHash(t, store, u.Subject); !strings.HasPrefix(string(h), "$argon2id$v=19$m=7168,t=5,p=1$") {
		t.Errorf("stored hash after sign-in = %q, want the current parameters", h)
	}
}

// raceStore runs before() inside UpgradePasswordHash, before the write:
// a password change or an outage between the sign-in's read and its
// rehash.
type raceStore struct {
	identity.Store
	before func(ctx context.Context, subject string) error
}

func (s raceStore) UpgradePasswordHash(ctx context.Context, subject string, oldHash, newHash []byte) (bool, error) {
	if err := s.before(ctx, subject); err != nil {
		return false, err
	}
	return s.Store.UpgradePasswordHash(ctx, subject, oldHash, newHash)
}

// TestUpgradeNeverOverwritesAPasswordChange: a password set between a
// bcrypt sign-in's read and its rehash stays; an upgrade that fails leaves
// the sign-in successful and logs without any hash.
func TestUpgradeNeverOverwritesAPasswordChange(t *testing.T) {
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			base := newStore(t, backend)
			admin := identity.New(base, identity.Options{Passwords: cheap})
			var log syncBuffer
			var fail bool
			store := raceStore{Store: base, before: func(ctx context.Context, subject string) error {
				if fail {
					return storage.ErrUnavailable
				}
				_, err := admin.SetPassword(ctx, "alice", "set by the admin")
				return err
			}}
			svc := identity.New(store, identity.Options{Passwords: cheap, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			bcryptUser(t, base, "alice", "correct horse")
			if _, err := svc.Authenticate(ctx, "alice", "correct horse"); err != nil {
				t.Fatalf("sign-in racing a password change: %v", err)
			}
			if _, err := svc.Authenticate(ctx, "alice", "set by the admin"); err != nil {
				t.Errorf("the admin's new password was overwritten by the rehash: %v", err)
			}
			if _, err := svc.Authenticate(ctx, "alice", "correct horse"); !errors.Is(err, identity.ErrInvalidCredentials) {
				t.Errorf("the old password still works: %v", err)
			}

			fail = true
			b := bcryptUser(t, base, "bob", "correct horse")
			old := storedHash(t, base, b.Subject)
			if _, err := svc.Authenticate(ctx, "bob", "correct horse"); err != nil {
				t.Fatalf("sign-in whose upgrade fails: %v, want success", err)
			}
			if !bytes.Equal(storedHash(t, base, b.Subject), old) {
				t.Error("the failed upgrade changed the hash")
			}
			out := log.String()
			if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "not upgraded") || !strings.Contains(out, b.Subject) {
				t.Errorf("no warning for the failed upgrade: %q", out)
			}
			if strings.Contains(out, "$2a$") || strings.Contains(out, "$argon2id$") || strings.Contains(out, "correct horse") {
				t.Errorf("the log holds a hash or password: %q", out)
			}
		})
	}
}

// TestAuthenticateWaitsForASlot: every sign-in, an unknown user's too (the
// decoy), verifies through the Hasher, so one whose context has ended does
// no work and says why.
func TestAuthenticateWaitsForASlot(t *testing.T) {
	store := memory.New()
	svc := identity.New(store, identity.Options{Passwords: cheap})
	bcryptUser(t, store, "alice", "correct horse")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, user := range []string{"alice", "nobody"} {
		if _, err := svc.Authenticate(ctx, user, "correct horse"); !errors.Is(err, context.Canceled) {
			t.Errorf("Authenticate(%s) with an ended context = %v, want context.Canceled", user, err)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
