package totp_test

import (
	"bytes"
	"context"
	"encoding/base32"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp"
	pq "github.com/pquerna/otp/totp"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/totp"
)

const secret = "test-secret-0123456789-0123456789-abcdef"

type fixture struct {
	log   bytes.Buffer
	svc   *totp.Service
	store *memory.Store
	sub   string
	now   time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{store: memory.New(), now: time.Unix(1_800_000_000, 0)}
	u := &storage.User{Username: "alice", PasswordHash: []byte("x")}
	if err := f.store.CreateUser(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	f.sub = u.Subject
	svc, err := totp.New(f.store, totp.Options{Secret: []byte(secret), Issuer: "example.com", Now: func() time.Time { return f.now },
		Logger: slog.New(slog.NewTextHandler(&f.log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	return f
}

func code(t *testing.T, key string, at time.Time) string {
	t.Helper()
	c, err := pq.GenerateCodeCustom(key, at, pq.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSetUpSealedAndSingleUse(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	e, err := f.svc.Begin(ctx, f.sub, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.QRPNG) < 100 || !bytes.HasPrefix(e.QRPNG, []byte("\x89PNG")) {
		t.Fatal("no PNG QR code")
	}
	// Sealed at rest: neither the base32 text nor the raw key is stored.
	row, _ := f.store.GetTOTP(ctx, f.sub)
	raw, _ := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(e.Secret)
	if bytes.Contains(row.Secret, []byte(e.Secret)) || bytes.Contains(row.Secret, raw) {
		t.Fatal("the TOTP secret is stored in the clear")
	}
	// Shown again after a wrong code: the same secret.
	if again, err := f.svc.Pending(ctx, f.sub, "alice"); err != nil || again.Secret != e.Secret {
		t.Fatalf("Pending = %v, %v", again.Secret, err)
	}
	if _, err := f.svc.Confirm(ctx, f.sub, "000000x"); !errors.Is(err, totp.ErrInvalidCode) {
		t.Fatalf("wrong confirmation: %v", err)
	}
	codes, err := f.svc.Confirm(ctx, f.sub, code(t, e.Secret, f.now))
	if err != nil || len(codes) != totp.RecoveryCodes {
		t.Fatalf("Confirm = %d codes, %v", len(codes), err)
	}
	if _, err := f.svc.Begin(ctx, f.sub, "alice"); !errors.Is(err, totp.ErrAlreadySet) {
		t.Fatalf("Begin over a confirmed factor: %v", err)
	}
	// The set-up's code is used; the next step's is accepted once.
	if _, err := f.svc.Check(ctx, f.sub, code(t, e.Secret, f.now)); !errors.Is(err, totp.ErrInvalidCode) {
		t.Fatalf("set-up code reused: %v", err)
	}
	f.now = f.now.Add(30 * time.Second)
	if k, err := f.svc.Check(ctx, f.sub, code(t, e.Secret, f.now)); err != nil || k != totp.KindTOTP {
		t.Fatalf("next step: %v, %v", k, err)
	}
	if _, err := f.svc.Check(ctx, f.sub, code(t, e.Secret, f.now)); !errors.Is(err, totp.ErrInvalidCode) {
		t.Fatalf("a code accepted twice: %v", err)
	}
	// Recovery codes: once each, typed loosely; regenerating replaces.
	if k, err := f.svc.Check(ctx, f.sub, " "+codes[0][:5]+" "+codes[0][6:]+" "); err != nil || k != totp.KindRecovery {
		t.Fatalf("recovery code: %v, %v", k, err)
	}
	if _, err := f.svc.Check(ctx, f.sub, codes[0]); !errors.Is(err, totp.ErrInvalidCode) {
		t.Fatalf("recovery code used twice: %v", err)
	}
	if _, err := f.svc.RegenerateCodes(ctx, f.sub); err != nil {
		t.Fatal(err)
	}
	// Audit events, never a code or the secret.
	log := f.log.String()
	for _, ev := range []string{"event=mfa.setup", "event=mfa.recovery_code_used", "event=mfa.recovery_codes_regenerated"} {
		if !strings.Contains(log, ev) {
			t.Errorf("no %s in the audit log:\n%s", ev, log)
		}
	}
	if strings.Contains(log, codes[0]) || strings.Contains(log, e.Secret) || strings.Contains(log, codes[0][:5]) {
		t.Errorf("the audit log holds a code or the secret:\n%s", log)
	}
	if _, err := f.svc.Check(ctx, f.sub, codes[1]); !errors.Is(err, totp.ErrInvalidCode) {
		t.Fatalf("an old recovery code after regeneration: %v", err)
	}
}

// RFC 6238 §5.2, §6: one step of skew either way, not two.
func TestSkew(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	e, _ := f.svc.Begin(ctx, f.sub, "alice")
	if _, err := f.svc.Confirm(ctx, f.sub, code(t, e.Secret, f.now)); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(5 * time.Minute)
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{{-60 * time.Second, false}, {-30 * time.Second, true}, {30 * time.Second, true}, {60 * time.Second, false}} {
		_, err := f.svc.Check(ctx, f.sub, code(t, e.Secret, f.now.Add(tc.d)))
		if (err == nil) != tc.ok {
			t.Errorf("code of now%+v: %v, want ok=%v", tc.d, err, tc.ok)
		}
	}
}

func TestNoFactor(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if has, err := f.svc.Has(ctx, f.sub); has || err != nil {
		t.Fatalf("Has = %v, %v", has, err)
	}
	if _, err := f.svc.Check(ctx, f.sub, "123456"); !errors.Is(err, totp.ErrInvalidCode) {
		t.Fatalf("Check without a factor: %v", err)
	}
	if _, err := f.svc.Confirm(ctx, f.sub, "123456"); !errors.Is(err, totp.ErrNoSetup) {
		t.Fatalf("Confirm without a set-up: %v", err)
	}
	if _, err := totp.New(f.store, totp.Options{Secret: []byte("short")}); err == nil {
		t.Fatal("a short system secret was accepted")
	}
}
