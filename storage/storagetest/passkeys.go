package storagetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/authd/authd/storage"
)

// PasskeyStore is what RunPasskeys tests.
type PasskeyStore interface {
	storage.UserStore
	storage.PasskeyStore
}

// RunPasskeys is the conformance suite of storage.PasskeyStore.
func RunPasskeys(t *testing.T, newStore func(t *testing.T) PasskeyStore) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, s PasskeyStore)
	}{
		{"CeremonySingleUse", testCeremonySingleUse},
		{"PasskeyCRUD", testPasskeyCRUD},
		{"SignCount", testPasskeySignCount},
		{"LastWayIn", testLastWayIn},
		{"Links", testPasskeyLinks},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newStore(t))
		})
	}
}

func testCeremonySingleUse(t *testing.T, s PasskeyStore) {
	ctx, now := t.Context(), time.Now()
	c := &storage.Ceremony{Key: []byte("k1"), Kind: "login", Binding: []byte("b"), Data: []byte("{}"), ExpiresAt: now.Add(time.Minute)}
	noErr(t, "PutCeremony", s.PutCeremony(ctx, c))
	wantErr(t, "PutCeremony twice", s.PutCeremony(ctx, c), storage.ErrAlreadyExists)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won int
	)
	for range Concurrency {
		wg.Go(func() {
			got, err := s.TakeCeremony(ctx, []byte("k1"), now)
			if err == nil {
				mu.Lock()
				won++
				mu.Unlock()
				if got.Kind != "login" || string(got.Data) != "{}" || string(got.Binding) != "b" {
					t.Errorf("TakeCeremony = %+v", got)
				}
			} else if !errors.Is(err, storage.ErrNotFound) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d concurrent takes won, want 1", won)
	}
	// Taken with a passkey's read: the passkey comes with it, once.
	u := passkeyUser(t, s, "erin", true)
	noErr(t, "CreatePasskey", s.CreatePasskey(ctx, &storage.Passkey{ID: []byte{7}, Subject: u.Subject, PublicKey: []byte("x"), AAGUID: make([]byte, 16), Name: "x"}))
	noErr(t, "PutCeremony", s.PutCeremony(ctx, &storage.Ceremony{Key: []byte("k4"), Kind: "login", Binding: []byte("b"), Data: []byte("{}"), ExpiresAt: now.Add(time.Minute)}))
	c4, p4, u4, err := s.TakeCeremonyPasskey(ctx, []byte("k4"), now, []byte{7})
	if err != nil || c4 == nil || p4 == nil || u4 == nil || u4.Username != "erin" || p4.Name != "x" || c4.Kind != "login" {
		t.Fatalf("TakeCeremonyPasskey = %+v, %+v, %+v, %v", c4, p4, u4, err)
	}
	_, _, _, err = s.TakeCeremonyPasskey(ctx, []byte("k4"), now, []byte{7})
	wantErr(t, "TakeCeremonyPasskey again", err, storage.ErrNotFound)
	noErr(t, "PutCeremony", s.PutCeremony(ctx, &storage.Ceremony{Key: []byte("k5"), Kind: "login", Binding: []byte("b"), Data: []byte("{}"), ExpiresAt: now.Add(time.Minute)}))
	if c5, p5, u5, err := s.TakeCeremonyPasskey(ctx, []byte("k5"), now, []byte{8}); err != nil || c5 == nil || p5 != nil || u5 != nil {
		t.Fatalf("TakeCeremonyPasskey, unknown passkey = %+v, %+v, %+v, %v", c5, p5, u5, err)
	}
	expired := &storage.Ceremony{Key: []byte("k2"), Kind: "login", Binding: []byte("b"), Data: []byte("{}"), ExpiresAt: now.Add(-time.Second)}
	noErr(t, "PutCeremony expired", s.PutCeremony(ctx, expired))
	_, err = s.TakeCeremony(ctx, []byte("k2"), now)
	wantErr(t, "TakeCeremony expired", err, storage.ErrNotFound)
	noErr(t, "PutCeremony expired", s.PutCeremony(ctx, &storage.Ceremony{Key: []byte("k3"), Kind: "login", Binding: []byte("b"), Data: []byte("{}"), ExpiresAt: now.Add(-time.Second)}))
	n, err := s.DeleteExpiredCeremonies(ctx, now, 100)
	noErr(t, "DeleteExpiredCeremonies", err)
	if n < 1 {
		t.Errorf("DeleteExpiredCeremonies = %d", n)
	}
}

func passkeyUser(t *testing.T, s PasskeyStore, name string, password bool) *storage.User {
	u := &storage.User{Username: name}
	if password {
		u.PasswordHash = []byte("hash")
	}
	noErr(t, "CreateUser", s.CreateUser(t.Context(), u))
	return u
}

func testPasskeyCRUD(t *testing.T, s PasskeyStore) {
	ctx := t.Context()
	u := passkeyUser(t, s, "alice", true)
	p := &storage.Passkey{ID: []byte{1, 2, 3}, Subject: u.Subject, PublicKey: []byte("cose"), AAGUID: make([]byte, 16),
		Transports: []string{"internal", "hybrid"}, BackupEligible: true, BackupState: true, Name: "Phone"}
	noErr(t, "CreatePasskey", s.CreatePasskey(ctx, p))
	wantErr(t, "CreatePasskey twice", s.CreatePasskey(ctx, &storage.Passkey{ID: []byte{1, 2, 3}, Subject: u.Subject, PublicKey: []byte("x"), AAGUID: make([]byte, 16), Name: "x"}), storage.ErrAlreadyExists)
	wantErr(t, "CreatePasskey unknown user", s.CreatePasskey(ctx, &storage.Passkey{ID: []byte{9}, Subject: "nobody", PublicKey: []byte("x"), AAGUID: make([]byte, 16), Name: "x"}), storage.ErrNotFound)
	got, gu, err := s.GetPasskeyUser(ctx, []byte{1, 2, 3})
	noErr(t, "GetPasskeyUser", err)
	if gu.Username != "alice" || gu.Subject != u.Subject || string(got.PublicKey) != "cose" || len(got.Transports) != 2 ||
		!got.BackupEligible || !got.BackupState || got.Name != "Phone" || !got.LastUsedAt.IsZero() || !got.DisabledAt.IsZero() {
		t.Errorf("GetPasskeyUser = %+v, %+v", got, gu)
	}
	_, _, err = s.GetPasskeyUser(ctx, []byte{7})
	wantErr(t, "GetPasskeyUser unknown", err, storage.ErrNotFound)
	noErr(t, "RenamePasskey", s.RenamePasskey(ctx, u.Subject, []byte{1, 2, 3}, "Laptop"))
	wantErr(t, "RenamePasskey other user", s.RenamePasskey(ctx, "other", []byte{1, 2, 3}, "x"), storage.ErrNotFound)
	list, err := s.ListPasskeys(ctx, u.Subject)
	noErr(t, "ListPasskeys", err)
	if len(list) != 1 || list[0].Name != "Laptop" {
		t.Errorf("ListPasskeys = %+v", list)
	}
	noErr(t, "DeletePasskey", s.DeletePasskey(ctx, u.Subject, []byte{1, 2, 3}))
	wantErr(t, "DeletePasskey again", s.DeletePasskey(ctx, u.Subject, []byte{1, 2, 3}), storage.ErrNotFound)
	// Deleting the user deletes its passkeys.
	noErr(t, "CreatePasskey", s.CreatePasskey(ctx, &storage.Passkey{ID: []byte{4}, Subject: u.Subject, PublicKey: []byte("x"), AAGUID: make([]byte, 16), Name: "x"}))
	noErr(t, "DeleteUser", s.DeleteUser(ctx, u.Subject))
	_, _, err = s.GetPasskeyUser(ctx, []byte{4})
	wantErr(t, "GetPasskeyUser after DeleteUser", err, storage.ErrNotFound)
}

func testPasskeySignCount(t *testing.T, s PasskeyStore) {
	ctx, now := t.Context(), time.Now()
	u := passkeyUser(t, s, "bob", true)
	noErr(t, "CreatePasskey", s.CreatePasskey(ctx, &storage.Passkey{ID: []byte{1}, Subject: u.Subject, PublicKey: []byte("x"), AAGUID: make([]byte, 16), Name: "a", SignCount: 5}))
	use, err := s.UsePasskey(ctx, []byte{1}, 6, true, now)
	noErr(t, "UsePasskey forward", err)
	if use != storage.PasskeyUsed {
		t.Fatalf("UsePasskey 6 after 5 = %v", use)
	}
	use, err = s.UsePasskey(ctx, []byte{1}, 6, true, now)
	noErr(t, "UsePasskey equal", err)
	if use != storage.PasskeyCloned {
		t.Fatalf("UsePasskey 6 after 6 = %v, want cloned", use)
	}
	_, err = s.UsePasskey(ctx, []byte{1}, 7, true, now)
	wantErr(t, "UsePasskey disabled", err, storage.ErrNotFound)
	p, _, err := s.GetPasskeyUser(ctx, []byte{1})
	noErr(t, "GetPasskeyUser", err)
	if p.DisabledAt.IsZero() || p.SignCount != 6 || p.LastUsedAt.IsZero() {
		t.Errorf("after clone: %+v", p)
	}
	// Zero counters (synced passkeys) stay usable.
	noErr(t, "CreatePasskey", s.CreatePasskey(ctx, &storage.Passkey{ID: []byte{2}, Subject: u.Subject, PublicKey: []byte("x"), AAGUID: make([]byte, 16), Name: "b"}))
	for range 2 {
		use, err = s.UsePasskey(ctx, []byte{2}, 0, false, now)
		noErr(t, "UsePasskey zero", err)
		if use != storage.PasskeyUsed {
			t.Fatalf("UsePasskey 0 after 0 = %v", use)
		}
	}
}

func testLastWayIn(t *testing.T, s PasskeyStore) {
	ctx, now := t.Context(), time.Now()
	u := passkeyUser(t, s, "carol", true)
	wantErr(t, "RemoveUserPassword without passkey", s.RemoveUserPassword(ctx, u.Subject), storage.ErrLastMethod)
	noErr(t, "CreatePasskey", s.CreatePasskey(ctx, &storage.Passkey{ID: []byte{1}, Subject: u.Subject, PublicKey: []byte("x"), AAGUID: make([]byte, 16), Name: "a"}))
	noErr(t, "CreatePasskey", s.CreatePasskey(ctx, &storage.Passkey{ID: []byte{2}, Subject: u.Subject, PublicKey: []byte("x"), AAGUID: make([]byte, 16), Name: "b", SignCount: 3}))
	noErr(t, "RemoveUserPassword", s.RemoveUserPassword(ctx, u.Subject))
	got, err := s.GetUserBySubject(ctx, u.Subject)
	noErr(t, "GetUserBySubject", err)
	if len(got.PasswordHash) != 0 {
		t.Fatalf("password hash %q after RemoveUserPassword", got.PasswordHash)
	}
	// A disabled passkey is no way in.
	if use, err := s.UsePasskey(ctx, []byte{2}, 1, false, now); err != nil || use != storage.PasskeyCloned {
		t.Fatalf("UsePasskey regress = %v, %v", use, err)
	}
	wantErr(t, "DeletePasskey last usable", s.DeletePasskey(ctx, u.Subject, []byte{1}), storage.ErrLastMethod)
	noErr(t, "DeletePasskey disabled one", s.DeletePasskey(ctx, u.Subject, []byte{2}))
	wantErr(t, "DeletePasskey last", s.DeletePasskey(ctx, u.Subject, []byte{1}), storage.ErrLastMethod)
	wantErr(t, "RemoveUserPassword unknown", s.RemoveUserPassword(ctx, "nobody"), storage.ErrNotFound)
	// Two passkeys removed at once: one stays.
	noErr(t, "CreatePasskey", s.CreatePasskey(ctx, &storage.Passkey{ID: []byte{3}, Subject: u.Subject, PublicKey: []byte("x"), AAGUID: make([]byte, 16), Name: "c"}))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, id := range []byte{1, 3} {
		wg.Go(func() { errs[i] = s.DeletePasskey(ctx, u.Subject, []byte{id}) })
	}
	wg.Wait()
	list, err := s.ListPasskeys(ctx, u.Subject)
	noErr(t, "ListPasskeys", err)
	if len(list) != 1 || (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("concurrent removals: %v; left %d", errs, len(list))
	}
}

func testPasskeyLinks(t *testing.T, s PasskeyStore) {
	ctx, now := t.Context(), time.Now()
	u := passkeyUser(t, s, "dave", false)
	noErr(t, "PutPasskeyLink", s.PutPasskeyLink(ctx, []byte("h"), u.Subject, now.Add(time.Minute)))
	wantErr(t, "PutPasskeyLink unknown", s.PutPasskeyLink(ctx, []byte("h2"), "nobody", now.Add(time.Minute)), storage.ErrNotFound)
	sub, err := s.GetPasskeyLink(ctx, []byte("h"), now)
	if err != nil || sub != u.Subject {
		t.Fatalf("GetPasskeyLink = %q, %v", sub, err)
	}
	_, err = s.GetPasskeyLink(ctx, []byte("h"), now.Add(2*time.Minute))
	wantErr(t, "GetPasskeyLink expired", err, storage.ErrNotFound)
	sub, err = s.TakePasskeyLink(ctx, []byte("h"), now)
	if err != nil || sub != u.Subject {
		t.Fatalf("TakePasskeyLink = %q, %v", sub, err)
	}
	_, err = s.TakePasskeyLink(ctx, []byte("h"), now)
	wantErr(t, "TakePasskeyLink again", err, storage.ErrNotFound)
}
