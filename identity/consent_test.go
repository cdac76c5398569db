package identity_test

import (
	"errors"
	"testing"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
)

// TestResumeSessionFor: the session, its user and the consent for one
// client come together, and the consent answers as ConsentCovers does.
func TestResumeSessionFor(t *testing.T) {
	ctx := t.Context()
	store := memory.New()
	if err := store.CreateClient(ctx, &storage.Client{ID: "app"}); err != nil {
		t.Fatal(err)
	}
	svc := identity.New(store, identity.Options{Passwords: cheap})
	u, err := svc.Add(ctx, identity.NewUser{Username: "alice", Password: "correct horse"})
	if err != nil {
		t.Fatal(err)
	}
	ref, _, err := svc.StartSession(ctx, u.Subject, []string{"pwd"})
	if err != nil {
		t.Fatal(err)
	}
	_, got, c, err := svc.ResumeSessionFor(ctx, ref, "app")
	if err != nil || got.Subject != u.Subject || c != nil || c.Covers([]string{"openid"}) {
		t.Fatalf("before consent: %+v %+v %v", got, c, err)
	}
	if err := svc.GrantConsent(ctx, u.Subject, "app", []string{"openid", "offline_access"}); err != nil {
		t.Fatal(err)
	}
	_, _, c, err = svc.ResumeSessionFor(ctx, ref, "app")
	if err != nil || c == nil || c.ClientID != "app" {
		t.Fatalf("after consent: %+v %v", c, err)
	}
	for _, tc := range []struct {
		scopes []string
		want   bool
	}{
		{[]string{"openid"}, true},
		{[]string{"openid", "offline_access"}, true},
		{nil, true},
		{[]string{"openid", "profile"}, false},
	} {
		covers, err := svc.ConsentCovers(ctx, u.Subject, "app", tc.scopes)
		if err != nil || covers != tc.want || c.Covers(tc.scopes) != tc.want {
			t.Errorf("%v: Covers %v, ConsentCovers %v (%v), want %v", tc.scopes, c.Covers(tc.scopes), covers, err, tc.want)
		}
	}
	if _, _, _, err := svc.ResumeSessionFor(ctx, "not-a-reference", "app"); !errors.Is(err, identity.ErrNoSession) {
		t.Errorf("bad reference: %v, want ErrNoSession", err)
	}
}
