package passkey_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/authd/authd/passkey"
	"github.com/authd/authd/passkey/passkeytest"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
)

const origin = "https://id.example.com"

type fixture struct {
	svc   *passkey.Service
	store *memory.Store
	user  *storage.User
	log   *bytes.Buffer
	now   time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rp, err := passkey.Configure(passkey.Settings{Issuer: origin})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: memory.New(), log: &bytes.Buffer{}, now: time.Now()}
	f.svc, err = passkey.New(rp, f.store, passkey.Options{Logger: slog.New(slog.NewJSONHandler(f.log, nil)),
		Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	f.user = &storage.User{Username: "alice", PasswordHash: []byte("x")}
	if err := f.store.CreateUser(t.Context(), f.user); err != nil {
		t.Fatal(err)
	}
	return f
}

// enrol adds a passkey made by a for the fixture's user.
func (f *fixture) enrol(t *testing.T, a *passkeytest.Authenticator) *passkeytest.Credential {
	t.Helper()
	ctx := t.Context()
	opts, err := f.svc.BeginEnrol(ctx, f.user.Subject, "session-1")
	if err != nil {
		t.Fatal(err)
	}
	c, answer, err := a.Create(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.FinishEnrol(ctx, f.user.Subject, "session-1", "", answer); err != nil {
		t.Fatalf("FinishEnrol: %v", err)
	}
	return c
}

func (f *fixture) login(ctx context.Context, a *passkeytest.Authenticator, c *passkeytest.Credential) ([]byte, error) {
	opts, err := f.svc.BeginLogin(ctx, "csrf-1")
	if err != nil {
		return nil, err
	}
	return a.Get(c, opts)
}

func TestSignIn(t *testing.T) {
	f := newFixture(t)
	a := &passkeytest.Authenticator{Origin: origin}
	c := f.enrol(t, a)
	answer, err := f.login(t.Context(), a, c)
	if err != nil {
		t.Fatal(err)
	}
	u, err := f.svc.FinishLogin(t.Context(), "csrf-1", answer)
	if err != nil || u.Subject != f.user.Subject {
		t.Fatalf("FinishLogin = %+v, %v", u, err)
	}
	// The same answer again: the challenge is used up.
	if _, err := f.svc.FinishLogin(t.Context(), "csrf-1", answer); !errors.Is(err, passkey.ErrCeremony) {
		t.Fatalf("replayed answer: %v", err)
	}
	list, err := f.svc.List(t.Context(), f.user.Subject)
	if err != nil || len(list) != 1 || list[0].SignCount != 1 || list[0].LastUsedAt == nil {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

// TestSignInRefused is the table of issue 24: each refused with its
// message, and no user signed in.
func TestSignInRefused(t *testing.T) {
	cases := []struct {
		name string
		// answer makes the answer to refuse.
		answer func(t *testing.T, f *fixture, a *passkeytest.Authenticator, c *passkeytest.Credential) []byte
		want   error
		words  string
	}{
		{"wrong origin", func(t *testing.T, f *fixture, a *passkeytest.Authenticator, c *passkeytest.Credential) []byte {
			a.Origin = "https://evil.example.net"
			return must(f.login(t.Context(), a, c))
		}, passkey.ErrOrigin, "another site"},
		{"wrong RP ID", func(t *testing.T, f *fixture, a *passkeytest.Authenticator, c *passkeytest.Credential) []byte {
			a.RPID = "evil.example.net"
			return must(f.login(t.Context(), a, c))
		}, passkey.ErrRPID, "belongs to another site"},
		{"replayed challenge", func(t *testing.T, f *fixture, a *passkeytest.Authenticator, c *passkeytest.Credential) []byte {
			answer := must(f.login(t.Context(), a, c))
			if _, err := f.svc.FinishLogin(t.Context(), "csrf-1", answer); err != nil {
				t.Fatal(err)
			}
			return answer
		}, passkey.ErrCeremony, "already used"},
		{"expired challenge", func(t *testing.T, f *fixture, a *passkeytest.Authenticator, c *passkeytest.Credential) []byte {
			answer := must(f.login(t.Context(), a, c))
			f.now = f.now.Add(61 * time.Second)
			return answer
		}, passkey.ErrCeremony, "expired"},
		{"another browser's challenge", func(t *testing.T, f *fixture, a *passkeytest.Authenticator, c *passkeytest.Credential) []byte {
			opts := must(f.svc.BeginLogin(t.Context(), "csrf-of-someone-else"))
			return must(a.Get(c, opts))
		}, passkey.ErrCeremony, "expired"},
		{"user verification off", func(t *testing.T, f *fixture, a *passkeytest.Authenticator, c *passkeytest.Credential) []byte {
			a.Flags = passkeytest.FlagUP
			return must(f.login(t.Context(), a, c))
		}, passkey.ErrUserVerification, "did not confirm"},
		{"sign count regression", func(t *testing.T, f *fixture, a *passkeytest.Authenticator, c *passkeytest.Credential) []byte {
			if _, err := f.svc.FinishLogin(t.Context(), "csrf-1", must(f.login(t.Context(), a, c))); err != nil {
				t.Fatal(err)
			}
			c.Count = 0 // a copy of the key, counting from where it was copied
			return must(f.login(t.Context(), a, c))
		}, passkey.ErrCloned, "may have been copied"},
		{"removed credential", func(t *testing.T, f *fixture, a *passkeytest.Authenticator, c *passkeytest.Credential) []byte {
			list, _ := f.svc.List(t.Context(), f.user.Subject)
			if err := f.svc.Remove(t.Context(), f.user.Subject, list[0].ID); err != nil {
				t.Fatal(err)
			}
			return must(f.login(t.Context(), a, c))
		}, passkey.ErrUnknown, "not recognised"},
		{"disabled user", func(t *testing.T, f *fixture, a *passkeytest.Authenticator, c *passkeytest.Credential) []byte {
			if err := f.store.SetUserDisabled(t.Context(), f.user.Subject, true); err != nil {
				t.Fatal(err)
			}
			return must(f.login(t.Context(), a, c))
		}, passkey.ErrUnknown, "not recognised"},
		{"deleted user", func(t *testing.T, f *fixture, a *passkeytest.Authenticator, c *passkeytest.Credential) []byte {
			if err := f.store.DeleteUser(t.Context(), f.user.Subject); err != nil {
				t.Fatal(err)
			}
			return must(f.login(t.Context(), a, c))
		}, passkey.ErrUnknown, "not recognised"},
		{"bad signature", func(t *testing.T, f *fixture, a *passkeytest.Authenticator, c *passkeytest.Credential) []byte {
			other := &passkeytest.Authenticator{Origin: origin}
			o, _, _ := other.Create(must(f.svc.BeginEnrol(t.Context(), f.user.Subject, "x")))
			c.Key = o.Key
			return must(f.login(t.Context(), a, c))
		}, passkey.ErrVerification, "could not be verified"},
		{"garbage", func(t *testing.T, f *fixture, a *passkeytest.Authenticator, c *passkeytest.Credential) []byte {
			return []byte(`{"id":"x"}`)
		}, passkey.ErrMalformed, "could not be verified"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			a := &passkeytest.Authenticator{Origin: origin}
			c := f.enrol(t, a)
			answer := tc.answer(t, f, a, c)
			u, err := f.svc.FinishLogin(t.Context(), "csrf-1", answer)
			if !errors.Is(err, tc.want) || u.Subject != "" {
				t.Fatalf("FinishLogin = %+v, %v; want %v", u, err, tc.want)
			}
			if m := passkey.Message(err); !strings.Contains(m, tc.words) {
				t.Errorf("Message = %q, want it to say %q", m, tc.words)
			}
		})
	}
}

func TestCloneDisablesCredential(t *testing.T) {
	f := newFixture(t)
	a := &passkeytest.Authenticator{Origin: origin}
	c := f.enrol(t, a)
	for range 2 {
		if _, err := f.svc.FinishLogin(t.Context(), "csrf-1", must(f.login(t.Context(), a, c))); err != nil {
			t.Fatal(err)
		}
	}
	c.Count = 1
	if _, err := f.svc.FinishLogin(t.Context(), "csrf-1", must(f.login(t.Context(), a, c))); !errors.Is(err, passkey.ErrCloned) {
		t.Fatalf("regressed count: %v", err)
	}
	if !strings.Contains(f.log.String(), `"what":"passkey.clone_suspected"`) {
		t.Errorf("no audit event: %s", f.log)
	}
	// The real authenticator, ahead again, is refused too until removed.
	c.Count = 10
	if _, err := f.svc.FinishLogin(t.Context(), "csrf-1", must(f.login(t.Context(), a, c))); !errors.Is(err, passkey.ErrCloned) {
		t.Fatalf("after clone: %v", err)
	}
	list, _ := f.svc.List(t.Context(), f.user.Subject)
	if len(list) != 1 || list[0].DisabledAt == nil {
		t.Fatalf("List = %+v", list)
	}
}

func TestEnrolRefused(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	a := &passkeytest.Authenticator{Origin: origin}
	opts := must(f.svc.BeginEnrol(ctx, f.user.Subject, "session-1"))
	_, answer, err := a.Create(opts)
	if err != nil {
		t.Fatal(err)
	}
	// Another session cannot finish it (and uses it up).
	if _, err := f.svc.FinishEnrol(ctx, f.user.Subject, "session-2", "", answer); !errors.Is(err, passkey.ErrCeremony) {
		t.Fatalf("other session: %v", err)
	}
	if _, err := f.svc.FinishEnrol(ctx, f.user.Subject, "session-1", "", answer); !errors.Is(err, passkey.ErrCeremony) {
		t.Fatalf("after use: %v", err)
	}
	// Without user verification.
	a.Flags = passkeytest.FlagUP
	_, answer, _ = a.Create(must(f.svc.BeginEnrol(ctx, f.user.Subject, "session-1")))
	if _, err := f.svc.FinishEnrol(ctx, f.user.Subject, "session-1", "", answer); !errors.Is(err, passkey.ErrUserVerification) {
		t.Fatalf("no UV: %v", err)
	}
	if list, _ := f.svc.List(ctx, f.user.Subject); len(list) != 0 {
		t.Fatalf("List = %+v", list)
	}
}

func TestManage(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	a := &passkeytest.Authenticator{Origin: origin}
	f.enrol(t, a)
	list, _ := f.svc.List(ctx, f.user.Subject)
	id := list[0].ID
	if err := f.svc.Rename(ctx, f.user.Subject, id, "Work laptop"); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Rename(ctx, f.user.Subject, id, strings.Repeat("x", 65)); !errors.Is(err, passkey.ErrInvalidName) {
		t.Fatalf("long name: %v", err)
	}
	if err := f.svc.RemovePassword(ctx, f.user.Subject); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Remove(ctx, f.user.Subject, id); !errors.Is(err, passkey.ErrLastMethod) {
		t.Fatalf("remove last: %v", err)
	}
	if err := f.svc.Remove(ctx, f.user.Subject, "AAAA"); !errors.Is(err, passkey.ErrNotFound) {
		t.Fatalf("remove unknown: %v", err)
	}
	if err := f.svc.RemovePassword(ctx, f.user.Subject); err != nil {
		t.Fatalf("remove password again: %v", err) // idempotent: still a passkey
	}
}

func TestLinkEnrol(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	token, _, err := f.svc.NewLink(ctx, f.user.Subject)
	if err != nil {
		t.Fatal(err)
	}
	a := &passkeytest.Authenticator{Origin: origin}
	_, answer, _ := a.Create(must(f.svc.BeginLinkEnrol(ctx, token)))
	opts2 := must(f.svc.BeginLinkEnrol(ctx, token))
	if _, err := f.svc.FinishLinkEnrol(ctx, token, "Phone", answer); err != nil {
		t.Fatal(err)
	}
	// The link is used up: a second ceremony begun with it fails.
	_, answer2, _ := a.Create(opts2)
	if _, err := f.svc.FinishLinkEnrol(ctx, token, "", answer2); !errors.Is(err, passkey.ErrLink) {
		t.Fatalf("second use: %v", err)
	}
	if list, _ := f.svc.List(ctx, f.user.Subject); len(list) != 1 || list[0].Name != "Phone" {
		t.Fatalf("List = %+v", list)
	}
	// Expired.
	token, _, _ = f.svc.NewLink(ctx, f.user.Subject)
	f.now = f.now.Add(16 * time.Minute)
	if _, err := f.svc.BeginLinkEnrol(ctx, token); !errors.Is(err, passkey.ErrLink) {
		t.Fatalf("expired link: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
