package identity_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/storage/memory"
)

func TestPrepareUsername(t *testing.T) {
	tests := []struct {
		name, in, want string
		err            error
	}{
		{"lower", "alice", "alice", nil},
		{"case folded", "Alice", "alice", nil},
		{"full width mapped", "ａｌｉｃｅ", "alice", nil},
		{"email form", "Bob.Smith@Example.com", "bob.smith@example.com", nil},
		{"NFC", "e\u0301lise", "\u00e9lise", nil},
		{"zero width joiner refused", "ali\u200dce", "", identity.ErrInvalidUsername},
		{"space refused", "alice smith", "", identity.ErrInvalidUsername},
		{"empty", "", "", identity.ErrInvalidUsername},
		{"control refused", "al\x00ice", "", identity.ErrInvalidUsername},
		{"too long", string(make([]byte, 200)), "", identity.ErrInvalidUsername},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := identity.PrepareUsername(tt.in)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Errorf("PrepareUsername(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestPreparePassword(t *testing.T) {
	tests := []struct {
		name, in, want string
		err            error
	}{
		{"ascii kept", "correct horse", "correct horse", nil},
		{"case kept", "Correct Horse", "Correct Horse", nil},
		{"non-ascii space mapped", "correct\u00a0horse", "correct horse", nil},
		{"too short", "short", "", identity.ErrInvalidPassword},
		{"too long", strings.Repeat("p", identity.MaxPasswordLen+1), "", identity.ErrInvalidPassword},
		{"longest", strings.Repeat("p", identity.MaxPasswordLen), strings.Repeat("p", identity.MaxPasswordLen), nil},
		{"control refused", "correct\x07horse", "", identity.ErrInvalidPassword},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := identity.PreparePassword(tt.in)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Errorf("PreparePassword(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	ctx := t.Context()
	svc := identity.New(memory.New(), identity.Options{Passwords: cheap})
	u, err := svc.Add(ctx, identity.NewUser{Username: "Alice", Password: "correct horse", Email: "a@example.com", Name: "Alice A"})
	if err != nil {
		t.Fatal(err)
	}
	if u.Username != "alice" || len(u.Subject) != 32 {
		t.Fatalf("Add = %+v", u)
	}
	if _, err := svc.Add(ctx, identity.NewUser{Username: "ALICE", Password: "correct horse"}); !errors.Is(err, identity.ErrUserExists) {
		t.Errorf("Add ALICE: %v, want ErrUserExists", err)
	}
	if _, err := svc.Add(ctx, identity.NewUser{Username: "bob", Password: "correct horse", Email: "not an email"}); !errors.Is(err, identity.ErrInvalidProfile) {
		t.Errorf("Add bad email: %v, want ErrInvalidProfile", err)
	}
	if got, err := svc.Authenticate(ctx, "ALICE", "correct horse"); err != nil || got.Subject != u.Subject {
		t.Errorf("Authenticate ALICE = %+v, %v", got, err)
	}
	for _, tc := range []struct{ user, pw string }{{"alice", "wrong password"}, {"nobody", "correct horse"}, {"al\u200dice", "correct horse"}} {
		if _, err := svc.Authenticate(ctx, tc.user, tc.pw); !errors.Is(err, identity.ErrInvalidCredentials) {
			t.Errorf("Authenticate(%q, %q) = %v, want ErrInvalidCredentials", tc.user, tc.pw, err)
		}
	}
	r, err := svc.Rename(ctx, "alice", "Alicia")
	if err != nil || r.Subject != u.Subject || r.Username != "alicia" {
		t.Fatalf("Rename = %+v, %v", r, err)
	}
	if _, err := svc.Disable(ctx, "alicia"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Authenticate(ctx, "alicia", "correct horse"); !errors.Is(err, identity.ErrInvalidCredentials) {
		t.Errorf("Authenticate disabled = %v, want ErrInvalidCredentials", err)
	}
	if _, err := svc.Enable(ctx, "alicia"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetPassword(ctx, "alicia", "a new passphrase"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Authenticate(ctx, "alicia", "a new passphrase"); err != nil {
		t.Errorf("Authenticate new password: %v", err)
	}
	ref, _, err := svc.StartSession(ctx, u.Subject, []string{"pwd"})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := svc.ResumeSession(ctx, ref)
	if err != nil {
		t.Errorf("ResumeSession: %v", err)
	}
	if err := svc.UseSession(ctx, bs.ID, ""); err != nil {
		t.Errorf("UseSession: %v", err)
	}
	if n, err := svc.SignOut(ctx, "alicia"); err != nil || n != 1 {
		t.Errorf("SignOut = %d, %v", n, err)
	}
	if _, err := svc.ResumeSession(ctx, ref); !errors.Is(err, identity.ErrNoSession) {
		t.Errorf("ResumeSession after SignOut = %v", err)
	}
	if err := svc.UseSession(ctx, bs.ID, ""); !errors.Is(err, identity.ErrNoSession) {
		t.Errorf("UseSession after SignOut = %v", err)
	}
	if _, err := svc.ResumeSession(ctx, "garbage"); !errors.Is(err, identity.ErrNoSession) {
		t.Errorf("ResumeSession garbage = %v", err)
	}
	if err := svc.RevokeConsent(ctx, "alicia", "app"); !errors.Is(err, identity.ErrConsentNotFound) {
		t.Errorf("RevokeConsent none = %v", err)
	}
	if _, err := svc.Delete(ctx, "alicia"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Get(ctx, "alicia"); !errors.Is(err, identity.ErrUserNotFound) {
		t.Errorf("Get after Delete = %v", err)
	}
	again, err := svc.Add(ctx, identity.NewUser{Username: "alicia", Password: "correct horse"})
	if err != nil || again.Subject == u.Subject {
		t.Errorf("re-Add = %+v, %v; want a new subject", again, err)
	}
}
