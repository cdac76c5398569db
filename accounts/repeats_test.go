package accounts_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authd/authd/accounts"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/mail/mailtest"
)

// Repeated forms and addresses in use: one charge, one account per address.

// Sixteen identical submits at once (a double click, a retry after a
// timeout) are one sign-up: one answer for all, none charged again or
// refused (the address's budget is 5 messages), one mail, one user.
func TestSignUpConcurrentRepeatsChargedOnce(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{})
	form := accounts.NewFormToken()
	got := make([]accounts.Pending, 16)
	errs := make([]error, len(got))
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			got[i], errs[i] = e.svc.SignUp(context.Background(), accounts.SignUpInput{FormToken: form, Email: "many@example.test",
				Password: "a long passphrase", Source: "192.0.2.7"})
		})
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != got[0] || got[i].Flow == "" {
			t.Fatalf("submit %d: %+v %v (the first %+v)", i, got[i], errs[i], got[0])
		}
	}
	m := e.smtp.WaitDelivered(t, "many@example.test", "", 10*time.Second)
	time.Sleep(500 * time.Millisecond) // any second message would be delivered by now
	if n := len(e.smtp.Delivered()); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
	if _, _, err := e.svc.VerifySignUp(context.Background(), got[0].Flow, accounts.Proof{Code: m.Code()}); err != nil {
		t.Fatal(err)
	}
	if us, err := e.people.List(context.Background(), "", 10); err != nil || len(us) != 1 {
		t.Fatalf("%d users, %v", len(us), err)
	}
	// The address's budget was charged once: four more sign-ups pass.
	for i := range 4 {
		if _, err := e.svc.SignUp(context.Background(), accounts.SignUpInput{FormToken: accounts.NewFormToken(), Email: "many@example.test",
			Password: "a long passphrase", Source: "192.0.2.7"}); err != nil {
			t.Fatalf("sign-up %d after the repeats: %v", i, err)
		}
	}
}

// A sign-up whose address another account got meanwhile (an email change
// verified after the sign-up began) creates no second account with it.
func TestSignUpAddressClaimedMeanwhile(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{})
	ctx := context.Background()
	p := e.signUp(t, accounts.NewFormToken(), "late@example.test")
	m := e.smtp.WaitDelivered(t, "late@example.test", "Your code", 10*time.Second)
	other, err := e.people.Add(ctx, identity.NewUser{Username: "ops-gil", Password: "gil passphrase"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.ClaimUserEmail(ctx, other.Subject, "Late@example.test", "late@example.test"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.svc.VerifySignUp(ctx, p.Flow, accounts.Proof{Code: m.Code()}); !errors.Is(err, accounts.ErrAddressTaken) {
		t.Fatalf("verifying a sign-up whose address another account has: %v", err)
	}
	if _, err := e.people.Get(ctx, "late@example.test"); !errors.Is(err, identity.ErrUserNotFound) {
		t.Fatalf("a second account with the address: %v", err)
	}
}

// An email change to an address another account has is refused at
// verification (the mailbox is proved: this tells its owner nothing
// recovery would not); the old address stays and no notice is sent.
func TestEmailChangeToAnAddressInUse(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{})
	ctx := context.Background()
	if _, err := e.people.Add(ctx, identity.NewUser{Username: "ops-owner", Password: "owner passphrase", Email: "Shared@Example.test"}); err != nil {
		t.Fatal(err)
	}
	u, err := e.people.Add(ctx, identity.NewUser{Username: "fay", Password: "fay passphrase", Email: "fay@example.test", EmailVerified: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.svc.RequestEmailChange(ctx, u.Subject, accounts.NewFormToken(), "shared@example.test", "192.0.2.3")
	if err != nil {
		t.Fatal(err)
	}
	m := e.smtp.WaitDelivered(t, "shared@example.test", "confirm", 10*time.Second)
	if _, err := e.svc.ConfirmEmailChange(ctx, u.Subject, p.Flow, accounts.Proof{Code: m.Code()}); !errors.Is(err, accounts.ErrEmailInUse) {
		t.Fatalf("confirming an address another account has: %v", err)
	}
	if got, _ := e.people.GetBySubject(ctx, u.Subject); got.Email != "fay@example.test" || !got.EmailVerified {
		t.Fatalf("the old address did not stay: %+v", got)
	}
	time.Sleep(300 * time.Millisecond)
	if n := countTo(e.smtp, "fay@example.test"); n != 0 {
		t.Fatalf("%d notices to the old address of a refused change", n)
	}
}

func countTo(s *mailtest.Server, to string) int {
	n := 0
	for _, m := range s.Delivered() {
		if strings.EqualFold(m.To, to) {
			n++
		}
	}
	return n
}
