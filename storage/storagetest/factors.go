package storagetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authd/authd/storage"
)

// factorCases check storage.FactorStore: the TOTP life cycle, each code
// accepted once (of N concurrent uses of one step or one recovery code,
// exactly one wins), the operator's requirement and the session's raise.
var factorCases = []testCase{
	{"FactorTOTPLifecycle", testTOTPLifecycle},
	{"FactorConcurrentTOTPStep", testConcurrentTOTPStep},
	{"FactorConcurrentRecoveryCode", testConcurrentRecoveryCode},
	{"FactorMFARequired", testMFARequired},
	{"FactorRaiseSession", testRaiseSession},
	{"FactorsWithSession", testFactorsWithSession},
}

func confirmedTOTP(t *testing.T, s Store, name string) *storage.User {
	t.Helper()
	ctx := t.Context()
	u := mustUser(t, s, name)
	noErr(t, "PutPendingTOTP", s.PutPendingTOTP(ctx, u.Subject, []byte("sealed-1"), time.Now()))
	noErr(t, "ConfirmTOTP", s.ConfirmTOTP(ctx, u.Subject, 100, [][]byte{[]byte("h1"), []byte("h2"), []byte("h3")}, time.Now()))
	return u
}

func testTOTPLifecycle(t *testing.T, s Store) {
	ctx := t.Context()
	u := mustUser(t, s, "alice")
	_, err := s.GetTOTP(ctx, u.Subject)
	wantErr(t, "GetTOTP none", err, storage.ErrNotFound)
	wantErr(t, "PutPendingTOTP unknown user", s.PutPendingTOTP(ctx, "no-such-sub", []byte("x"), time.Now()), storage.ErrNotFound)
	noErr(t, "PutPendingTOTP", s.PutPendingTOTP(ctx, u.Subject, []byte("sealed-1"), time.Now()))
	noErr(t, "PutPendingTOTP again", s.PutPendingTOTP(ctx, u.Subject, []byte("sealed-2"), time.Now()))
	got, err := s.GetTOTP(ctx, u.Subject)
	noErr(t, "GetTOTP", err)
	if got.Confirmed || string(got.Secret) != "sealed-2" {
		t.Fatalf("pending TOTP = %+v", got)
	}
	wantErr(t, "UseTOTPStep unconfirmed", s.UseTOTPStep(ctx, u.Subject, 5), storage.ErrNotFound)
	wantErr(t, "ReplaceRecoveryCodes unconfirmed", s.ReplaceRecoveryCodes(ctx, u.Subject, nil, time.Now()), storage.ErrNotFound)
	noErr(t, "ConfirmTOTP", s.ConfirmTOTP(ctx, u.Subject, 100, [][]byte{[]byte("h1")}, time.Now()))
	wantErr(t, "ConfirmTOTP twice", s.ConfirmTOTP(ctx, u.Subject, 101, nil, time.Now()), storage.ErrNotFound)
	wantErr(t, "PutPendingTOTP over a confirmed one", s.PutPendingTOTP(ctx, u.Subject, []byte("x"), time.Now()), storage.ErrAlreadyExists)
	got, _ = s.GetTOTP(ctx, u.Subject)
	if !got.Confirmed || got.LastStep != 100 || string(got.Secret) != "sealed-2" {
		t.Fatalf("confirmed TOTP = %+v", got)
	}
	wantErr(t, "UseTOTPStep the set-up's step", s.UseTOTPStep(ctx, u.Subject, 100), storage.ErrInactiveToken)
	wantErr(t, "UseTOTPStep an earlier step", s.UseTOTPStep(ctx, u.Subject, 99), storage.ErrInactiveToken)
	noErr(t, "UseTOTPStep a later step", s.UseTOTPStep(ctx, u.Subject, 101))
	noErr(t, "ReplaceRecoveryCodes", s.ReplaceRecoveryCodes(ctx, u.Subject, [][]byte{[]byte("n1"), []byte("n2")}, time.Now()))
	_, err = s.UseRecoveryCode(ctx, u.Subject, []byte("h1"), time.Now())
	wantErr(t, "UseRecoveryCode replaced", err, storage.ErrNotFound)
	left, err := s.UseRecoveryCode(ctx, u.Subject, []byte("n1"), time.Now())
	noErr(t, "UseRecoveryCode", err)
	if n, _ := s.RecoveryCodesLeft(ctx, u.Subject); left != 1 || n != 1 {
		t.Fatalf("codes left %d and %d, want 1", left, n)
	}
	had, err := s.DeleteFactors(ctx, u.Subject)
	noErr(t, "DeleteFactors", err)
	if !had {
		t.Fatal("DeleteFactors reported no factor")
	}
	if had, _ = s.DeleteFactors(ctx, u.Subject); had {
		t.Fatal("DeleteFactors twice reported a factor")
	}
	if n, _ := s.RecoveryCodesLeft(ctx, u.Subject); n != 0 {
		t.Fatalf("codes left after delete: %d", n)
	}
}

// raceCount runs f in n goroutines at once and counts the nil errors; any
// other error than want fails the test.
func raceCount(t *testing.T, n int, want error, f func() error) int {
	t.Helper()
	var (
		wg   sync.WaitGroup
		won  atomic.Int32
		gate = make(chan struct{})
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			switch err := f(); {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, want):
				t.Errorf("loser: %v, want %v", err, want)
			}
		}()
	}
	close(gate)
	wg.Wait()
	return int(won.Load())
}

func testConcurrentTOTPStep(t *testing.T, s Store) {
	u := confirmedTOTP(t, s, "alice")
	if n := raceCount(t, 16, storage.ErrInactiveToken, func() error { return s.UseTOTPStep(t.Context(), u.Subject, 101) }); n != 1 {
		t.Fatalf("one step accepted %d times, want 1", n)
	}
}

func testConcurrentRecoveryCode(t *testing.T, s Store) {
	u := confirmedTOTP(t, s, "alice")
	n := raceCount(t, 16, storage.ErrNotFound, func() error {
		_, err := s.UseRecoveryCode(t.Context(), u.Subject, []byte("h2"), time.Now())
		return err
	})
	if n != 1 {
		t.Fatalf("one recovery code accepted %d times, want 1", n)
	}
}

func testMFARequired(t *testing.T, s Store) {
	ctx := t.Context()
	u := mustUser(t, s, "alice")
	wantErr(t, "SetMFARequired unknown user", s.SetMFARequired(ctx, "no-such-sub", true, time.Now()), storage.ErrNotFound)
	for _, want := range []bool{true, true, false, false, true} {
		noErr(t, "SetMFARequired", s.SetMFARequired(ctx, u.Subject, want, time.Now()))
		if got, err := s.MFARequired(ctx, u.Subject); err != nil || got != want {
			t.Fatalf("MFARequired = %v, %v; want %v", got, err, want)
		}
		if has, req, err := s.FactorState(ctx, u.Subject); err != nil || has || req != want {
			t.Fatalf("FactorState = %v, %v, %v; want false, %v", has, req, err, want)
		}
	}
	noErr(t, "PutPendingTOTP", s.PutPendingTOTP(ctx, u.Subject, []byte("x"), time.Now()))
	if has, _, _ := s.FactorState(ctx, u.Subject); has {
		t.Fatal("FactorState counts an unconfirmed TOTP")
	}
	noErr(t, "ConfirmTOTP", s.ConfirmTOTP(ctx, u.Subject, 1, nil, time.Now()))
	if has, req, err := s.FactorState(ctx, u.Subject); err != nil || !has || !req {
		t.Fatalf("FactorState = %v, %v, %v; want true, true", has, req, err)
	}
}

func testRaiseSession(t *testing.T, s Store) {
	ctx := t.Context()
	u := mustUser(t, s, "alice")
	now := storage.NormalizeTime(time.Now())
	x := &storage.Session{ID: "sess-1", Subject: u.Subject, AuthTime: now.Add(-time.Hour), AMR: []string{"pwd"},
		IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(2 * time.Hour), CreatedAt: now, LastSeenAt: now}
	noErr(t, "CreateSession", s.CreateSession(ctx, x))
	got, err := s.RaiseSession(ctx, "sess-1", []string{"otp", "mfa", "pwd"}, now, now)
	noErr(t, "RaiseSession", err)
	if len(got.AMR) != 3 || got.AMR[0] != "pwd" || got.AMR[1] != "otp" || got.AMR[2] != "mfa" || !got.AuthTime.Equal(now) {
		t.Fatalf("raised session: amr %v auth_time %v", got.AMR, got.AuthTime)
	}
	got, _ = s.RaiseSession(ctx, "sess-1", []string{"otp", "mfa"}, now, now)
	if len(got.AMR) != 3 {
		t.Fatalf("raised twice: amr %v", got.AMR)
	}
	_, err = s.RaiseSession(ctx, "sess-1", []string{"otp"}, now, now.Add(3*time.Hour))
	wantErr(t, "RaiseSession expired", err, storage.ErrNotFound)
	_, err = s.RaiseSession(ctx, "no-such-session", []string{"otp"}, now, now)
	wantErr(t, "RaiseSession unknown", err, storage.ErrNotFound)
}

// testFactorsWithSession: GetSessionUserConsent's UserFactors are the
// user's, as FactorState and ListPasskeys answer them (an unconfirmed TOTP
// and a disabled passkey are none), and no other user's.
func testFactorsWithSession(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	now := time.Now().Truncate(time.Second)
	session := func(id string, u *storage.User) {
		noErr(t, "CreateSession", s.CreateSession(ctx, &storage.Session{ID: id, Subject: u.Subject, AuthTime: now,
			AMR: []string{"pwd"}, IdleExpiresAt: now.Add(30 * time.Minute), ExpiresAt: now.Add(time.Hour)}))
	}
	alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bob")
	session("hash-a", alice)
	session("hash-b", bob)
	want := func(step, id string, w storage.UserFactors) {
		t.Helper()
		_, _, _, got, err := s.GetSessionUserConsent(ctx, id, "app", now)
		noErr(t, "GetSessionUserConsent", err)
		if got != w {
			t.Errorf("%s: factors = %+v, want %+v", step, got, w)
		}
	}
	want("none", "hash-a", storage.UserFactors{})
	noErr(t, "PutPendingTOTP", s.PutPendingTOTP(ctx, alice.Subject, []byte("x"), now))
	want("unconfirmed TOTP", "hash-a", storage.UserFactors{})
	noErr(t, "ConfirmTOTP", s.ConfirmTOTP(ctx, alice.Subject, 1, nil, now))
	want("TOTP", "hash-a", storage.UserFactors{TOTP: true})
	noErr(t, "SetMFARequired", s.SetMFARequired(ctx, alice.Subject, true, now))
	want("required", "hash-a", storage.UserFactors{TOTP: true, MFARequired: true})
	want("another user", "hash-b", storage.UserFactors{})
	ps, ok := s.(storage.PasskeyStore)
	if !ok {
		return
	}
	noErr(t, "CreatePasskey", ps.CreatePasskey(ctx, &storage.Passkey{ID: []byte{1}, Subject: bob.Subject, PublicKey: []byte("x"),
		AAGUID: make([]byte, 16), Name: "a", SignCount: 5}))
	want("passkey", "hash-b", storage.UserFactors{Passkey: true})
	if _, err := ps.UsePasskey(ctx, []byte{1}, 5, false, now); err != nil {
		t.Fatalf("UsePasskey: %v", err)
	}
	want("disabled passkey", "hash-b", storage.UserFactors{})
	want("another user's passkey", "hash-a", storage.UserFactors{TOTP: true, MFARequired: true})

	// Every way a factor goes, and passkeys added and removed at once
	// (the PostgreSQL backend keeps a count on the users row).
	noErr(t, "UseTOTPStep", s.UseTOTPStep(ctx, alice.Subject, 2))
	want("TOTP used", "hash-a", storage.UserFactors{TOTP: true, MFARequired: true})
	noErr(t, "SetMFARequired false", s.SetMFARequired(ctx, alice.Subject, false, now))
	want("not required", "hash-a", storage.UserFactors{TOTP: true})
	if _, err := s.DeleteFactors(ctx, alice.Subject); err != nil {
		t.Fatalf("DeleteFactors: %v", err)
	}
	want("TOTP deleted", "hash-a", storage.UserFactors{})
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, 2*n)
	for i := range n {
		wg.Go(func() {
			errs[i] = ps.CreatePasskey(ctx, &storage.Passkey{ID: []byte{10, byte(i)}, Subject: bob.Subject, PublicKey: []byte("x"),
				AAGUID: make([]byte, 16), Name: "p", SignCount: 1})
		})
	}
	wg.Wait()
	for i := range n - 1 {
		wg.Go(func() { errs[n+i] = ps.DeletePasskey(ctx, bob.Subject, []byte{10, byte(i)}) })
	}
	wg.Wait()
	noErr(t, "concurrent CreatePasskey and DeletePasskey", errors.Join(errs...))
	want("one passkey left of eight", "hash-b", storage.UserFactors{Passkey: true})
	noErr(t, "DeletePasskey last", ps.DeletePasskey(ctx, bob.Subject, []byte{10, n - 1}))
	want("passkeys deleted", "hash-b", storage.UserFactors{})
}
