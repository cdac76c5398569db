package accounts_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authd/authd/accounts"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/jobs"
	"github.com/authd/authd/mail"
	"github.com/authd/authd/mail/mailtest"
	"github.com/authd/authd/password"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

var (
	secret = []byte("0123456789abcdef0123456789abcdef-accounts")
	cheap  = password.New(password.Options{Params: password.Params{Memory: 64, Time: 1, Threads: 1}})
)

type env struct {
	store  *postgres.Store
	people *identity.Service
	svc    *accounts.Service
	smtp   *mailtest.Server
	now    time.Time
	mu     sync.Mutex
}

func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	e.now = e.now.Add(d)
	e.mu.Unlock()
}

func newEnv(t *testing.T, limits accounts.LimitConfig) *env {
	t.Helper()
	e := &env{store: postgres.New(pgtest.New(t)), smtp: mailtest.Start(t, nil), now: time.Now()}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	e.people = identity.New(e.store, identity.Options{Passwords: cheap, Logger: log})
	outbox, err := mail.NewOutbox(e.store, mail.OutboxConfig{Secret: secret, Domain: "example.test"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := mail.NewDeliverer(outbox, mail.DelivererConfig{From: "no-reply@example.test", Logger: log,
		Sender: mail.NewSMTP(mail.SMTPConfig{Host: e.smtp.Host, Port: e.smtp.Port, TLS: "opportunistic"})})
	if err != nil {
		t.Fatal(err)
	}
	w, err := jobs.NewWorker(e.store, jobs.Config{Poll: 30 * time.Millisecond, Logger: log, Backoff: mail.Backoff}, d.Kind())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.svc, err = accounts.New(accounts.Config{Secret: secret, Store: e.store, Outbox: outbox, People: e.people,
		Passwords: cheap, LinkBase: "https://login.example.test", Signup: true, Recovery: true,
		Limits: accounts.NewLimits(limits), Logger: log, Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) signUp(t *testing.T, form, email string) accounts.Pending {
	t.Helper()
	p, err := e.svc.SignUp(context.Background(), accounts.SignUpInput{FormToken: form, Email: email,
		Password: "a long passphrase", App: accounts.App{ClientID: "app", Name: "Example App", ReturnTo: "/oauth2/authorize?x=1"},
		Source: "192.0.2.1"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSignUpVerifyCreatesVerifiedUser(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{})
	ctx := context.Background()
	p := e.signUp(t, accounts.NewFormToken(), "Ann@Example.test")
	if _, err := e.people.Get(ctx, "ann@example.test"); !errors.Is(err, identity.ErrUserNotFound) {
		t.Fatalf("a pending sign-up is a user: %v", err)
	}
	m := e.smtp.WaitDelivered(t, "Ann@Example.test", "Your code", 10*time.Second)
	if !strings.Contains(m.Body, "Example App") || !strings.Contains(m.Body, "Ann@Example.test") {
		t.Fatalf("the mail does not name the app and the address: %s", m.Body)
	}
	if _, _, err := e.svc.VerifySignUp(ctx, p.Flow, accounts.Proof{Code: "000000"}); !errors.Is(err, accounts.ErrWrongCode) && m.Code() != "000000" {
		t.Fatalf("wrong code: %v", err)
	}
	u, app, err := e.svc.VerifySignUp(ctx, p.Flow, accounts.Proof{Code: m.Code()})
	if err != nil {
		t.Fatal(err)
	}
	if u.Username != "ann@example.test" || !u.EmailVerified || u.Email != "Ann@Example.test" || app.ReturnTo != "/oauth2/authorize?x=1" {
		t.Fatalf("user %+v app %+v", u, app)
	}
	if _, err := e.people.Authenticate(ctx, "ann@example.test", "a long passphrase"); err != nil {
		t.Fatalf("the chosen password does not sign in: %v", err)
	}
	if _, _, err := e.svc.VerifySignUp(ctx, p.Flow, accounts.Proof{Code: m.Code()}); !errors.Is(err, accounts.ErrCodeUsed) {
		t.Fatalf("a used code verified again: %v", err)
	}
	if _, app, err := e.svc.Describe(ctx, p.Flow, storage.FlowSignup); !errors.Is(err, accounts.ErrCodeUsed) || app.ReturnTo == "" {
		t.Fatalf("Describe of a used flow: %v %+v", err, app)
	}
}

func TestSignUpByLink(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{})
	p := e.signUp(t, accounts.NewFormToken(), "link@example.test")
	m := e.smtp.WaitDelivered(t, "link@example.test", "", 10*time.Second)
	link := m.Link()
	_, q, _ := strings.Cut(link, "?")
	var token string
	for _, kv := range strings.Split(q, "&") {
		if v, ok := strings.CutPrefix(kv, "token="); ok {
			token = v
		}
	}
	if !strings.HasPrefix(link, "https://login.example.test/signup/verify?flow="+p.Flow) || token == "" {
		t.Fatalf("link %q", link)
	}
	if _, _, err := e.svc.VerifySignUp(context.Background(), p.Flow, accounts.Proof{Token: token + "x"}); !errors.Is(err, accounts.ErrWrongCode) {
		t.Fatalf("a wrong token: %v", err)
	}
	if _, _, err := e.svc.VerifySignUp(context.Background(), p.Flow, accounts.Proof{Token: token}); err != nil {
		t.Fatal(err)
	}
}

// The same form posted twice, and five times at once: one flow, one mail,
// one user.
func TestSignUpRepeatedFormSendsOneMail(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{})
	form := accounts.NewFormToken()
	first := e.signUp(t, form, "dup@example.test")
	var wg sync.WaitGroup
	got := make([]accounts.Pending, 5)
	for i := range got {
		wg.Go(func() { got[i] = e.signUp(t, form, "dup@example.test") })
	}
	wg.Wait()
	for _, p := range append(got, e.signUp(t, form, "dup@example.test")) {
		if p != first {
			t.Fatalf("a repeat answered %+v, the first %+v", p, first)
		}
	}
	m := e.smtp.WaitDelivered(t, "dup@example.test", "", 10*time.Second)
	time.Sleep(500 * time.Millisecond) // any second message would be delivered by now
	if n := len(e.smtp.Delivered()); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
	if _, _, err := e.svc.VerifySignUp(context.Background(), first.Flow, accounts.Proof{Code: m.Code()}); err != nil {
		t.Fatal(err)
	}
	us, err := e.people.List(context.Background(), "", 10)
	if err != nil || len(us) != 1 {
		t.Fatalf("%d users, %v", len(us), err)
	}
}

// A sign-up with an address that has an account answers like a new one;
// the owner gets a note, and no code verifies.
func TestSignUpExistingAddressAnswersTheSame(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{})
	ctx := context.Background()
	if _, err := e.people.Add(ctx, identity.NewUser{Username: "old@example.test", Password: "another passphrase", Email: "old@example.test"}); err != nil {
		t.Fatal(err)
	}
	known := e.signUp(t, accounts.NewFormToken(), "old@example.test")
	unknown := e.signUp(t, accounts.NewFormToken(), "new@example.test")
	if len(known.Flow) != len(unknown.Flow) || known.Email != "old@example.test" {
		t.Fatalf("answers differ in shape: %+v %+v", known, unknown)
	}
	note := e.smtp.WaitDelivered(t, "old@example.test", "Someone tried", 10*time.Second)
	if note.Code() != "" {
		t.Fatal("the note carries a code")
	}
	for range accounts.MaxCodeAttempts {
		if _, _, err := e.svc.VerifySignUp(ctx, known.Flow, accounts.Proof{Code: "123456"}); err == nil {
			t.Fatal("a code verified the sign-up of a taken address")
		}
	}
}

func TestCodeAttemptsBounded(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{})
	ctx := context.Background()
	p := e.signUp(t, accounts.NewFormToken(), "guess@example.test")
	m := e.smtp.WaitDelivered(t, "guess@example.test", "", 10*time.Second)
	wrong := "000000"
	if m.Code() == wrong {
		wrong = "111111"
	}
	for i := range accounts.MaxCodeAttempts {
		_, _, err := e.svc.VerifySignUp(ctx, p.Flow, accounts.Proof{Code: wrong})
		if err == nil {
			t.Fatal("a wrong code verified")
		}
		if i < accounts.MaxCodeAttempts-1 && !errors.Is(err, accounts.ErrWrongCode) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	if _, _, err := e.svc.VerifySignUp(ctx, p.Flow, accounts.Proof{Code: m.Code()}); !errors.Is(err, accounts.ErrCodeExpired) {
		t.Fatalf("the right code after %d guesses: %v", accounts.MaxCodeAttempts, err)
	}
}

func TestCodeExpires(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{})
	p := e.signUp(t, accounts.NewFormToken(), "late@example.test")
	m := e.smtp.WaitDelivered(t, "late@example.test", "", 10*time.Second)
	e.advance(accounts.CodeTTL + time.Second)
	if _, _, err := e.svc.VerifySignUp(context.Background(), p.Flow, accounts.Proof{Code: m.Code()}); !errors.Is(err, accounts.ErrCodeExpired) {
		t.Fatalf("an expired code: %v", err)
	}
}

func TestRecoveryEndsSessionsAndAnswersTheSame(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{})
	ctx := context.Background()
	u, err := e.people.Add(ctx, identity.NewUser{Username: "rita@example.test", Password: "old passphrase", Email: "rita@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	ref, _, err := e.people.StartSession(ctx, u.Subject, []string{"pwd"})
	if err != nil {
		t.Fatal(err)
	}
	in := func(addr string) accounts.RecoveryInput {
		return accounts.RecoveryInput{FormToken: accounts.NewFormToken(), Email: addr, Source: "192.0.2.9"}
	}
	known, err := e.svc.RequestRecovery(ctx, in("rita@example.test"))
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := e.svc.RequestRecovery(ctx, in("nobody@example.test"))
	if err != nil {
		t.Fatal(err)
	}
	if len(known.Flow) != len(unknown.Flow) || known.Email != "rita@example.test" || unknown.Email != "nobody@example.test" {
		t.Fatalf("answers differ: %+v %+v", known, unknown)
	}
	m := e.smtp.WaitDelivered(t, "rita@example.test", "new password", 10*time.Second)
	if _, err := e.svc.Recover(ctx, known.Flow, accounts.Proof{Code: m.Code()}, "short", ""); !errors.Is(err, identity.ErrInvalidPassword) {
		t.Fatalf("a short password: %v", err)
	}
	if _, err := e.svc.Recover(ctx, known.Flow, accounts.Proof{Code: m.Code()}, "brand new passphrase", "App"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.people.ResumeSession(ctx, ref); !errors.Is(err, identity.ErrNoSession) {
		t.Fatalf("the old session survived: %v", err)
	}
	if _, err := e.people.Authenticate(ctx, "rita@example.test", "brand new passphrase"); err != nil {
		t.Fatal(err)
	}
	e.smtp.WaitDelivered(t, "rita@example.test", "password was changed", 10*time.Second)
	for _, msg := range e.smtp.Received() {
		if msg.To == "nobody@example.test" {
			t.Fatal("an unknown address got mail")
		}
	}
}

func TestEmailChange(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{})
	ctx := context.Background()
	u, err := e.people.Add(ctx, identity.NewUser{Username: "eli@example.test", Password: "old passphrase", Email: "eli@example.test", EmailVerified: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.svc.RequestEmailChange(ctx, u.Subject, accounts.NewFormToken(), "eli@new.example.test", "192.0.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := e.people.GetBySubject(ctx, u.Subject); got.Email != "eli@example.test" {
		t.Fatal("the address changed before it was verified")
	}
	m := e.smtp.WaitDelivered(t, "eli@new.example.test", "confirm", 10*time.Second)
	got, err := e.svc.ConfirmEmailChange(ctx, u.Subject, p.Flow, accounts.Proof{Code: m.Code()})
	if err != nil {
		t.Fatal(err)
	}
	if got.Email != "eli@new.example.test" || !got.EmailVerified || got.Username != "eli@new.example.test" {
		t.Fatalf("after the change: %+v", got)
	}
	note := e.smtp.WaitDelivered(t, "eli@example.test", "address was changed", 10*time.Second)
	if !strings.Contains(note.Body, "eli@new.example.test") {
		t.Fatal("the notice does not name the new address")
	}
}

func TestDeleteAccount(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{})
	ctx := context.Background()
	u, err := e.people.Add(ctx, identity.NewUser{Username: "del@example.test", Password: "the passphrase", Email: "del@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	old := e.clock().Add(-10 * time.Minute)
	if err := e.svc.DeleteAccount(ctx, u.Subject, old, ""); !errors.Is(err, accounts.ErrReauth) {
		t.Fatalf("an old sign-in deleted without the password: %v", err)
	}
	if err := e.svc.DeleteAccount(ctx, u.Subject, old, "wrong passphrase"); !errors.Is(err, accounts.ErrWrongPassword) {
		t.Fatalf("a wrong password: %v", err)
	}
	if err := e.svc.DeleteAccount(ctx, u.Subject, e.clock().Add(-time.Minute), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.people.Get(ctx, "del@example.test"); !errors.Is(err, identity.ErrUserNotFound) {
		t.Fatalf("the user survived: %v", err)
	}
	e.smtp.WaitDelivered(t, "del@example.test", "deleted", 10*time.Second)
	if err := e.svc.DeleteAccount(ctx, u.Subject, e.clock(), ""); err != nil {
		t.Fatalf("a repeated delete: %v", err)
	}
	// The name is free.
	p := e.signUp(t, accounts.NewFormToken(), "del@example.test")
	m := e.smtp.WaitDelivered(t, "del@example.test", "Your code", 10*time.Second)
	if _, _, err := e.svc.VerifySignUp(ctx, p.Flow, accounts.Proof{Code: m.Code()}); err != nil {
		t.Fatal(err)
	}
}

func TestLimits(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{MailAddress: accounts.Budget{N: 2, Per: time.Hour}})
	ctx := context.Background()
	for i := range 3 {
		_, err := e.svc.RequestRecovery(ctx, accounts.RecoveryInput{FormToken: accounts.NewFormToken(), Email: "lim@example.test", Source: "192.0.2.4"})
		var le *accounts.LimitError
		if i < 2 && err != nil || i == 2 && (!errors.As(err, &le) || le.RetryAfter <= 0 || le.Limit != accounts.LimitMailAddress) {
			t.Fatalf("request %d: %v", i, err)
		}
	}
}

func TestSwitches(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{})
	_ = e
	svc, err := accounts.New(accounts.Config{Secret: secret, Store: e.store, Outbox: noOutbox{}, People: e.people})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SignUp(context.Background(), accounts.SignUpInput{FormToken: accounts.NewFormToken(), Email: "x@example.test", Password: "a long passphrase"}); !errors.Is(err, accounts.ErrDisabled) {
		t.Fatalf("sign-up off: %v", err)
	}
	if _, err := svc.RequestRecovery(context.Background(), accounts.RecoveryInput{FormToken: accounts.NewFormToken(), Email: "x@example.test"}); !errors.Is(err, accounts.ErrDisabled) {
		t.Fatalf("recovery off: %v", err)
	}
}

type noOutbox struct{}

func (noOutbox) Enqueue(context.Context, mail.Message) (int64, error) {
	return 0, errors.New("no outbox")
}

var _ = storage.FlowSignup

// Re-entering the password to delete is bounded per user: a stolen
// session is no password oracle.
func TestReauthBounded(t *testing.T) {
	e := newEnv(t, accounts.LimitConfig{Reauth: accounts.Budget{N: 2, Per: time.Hour}})
	ctx := context.Background()
	u, err := e.people.Add(ctx, identity.NewUser{Username: "vic@example.test", Password: "the passphrase"})
	if err != nil {
		t.Fatal(err)
	}
	old := e.clock().Add(-time.Hour)
	for i := range 2 {
		if err := e.svc.DeleteAccount(ctx, u.Subject, old, "guess"); !errors.Is(err, accounts.ErrWrongPassword) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	var le *accounts.LimitError
	if err := e.svc.DeleteAccount(ctx, u.Subject, old, "the passphrase"); !errors.As(err, &le) || le.Limit != accounts.LimitReauth {
		t.Fatalf("a third try: %v", err)
	}
	if _, err := e.people.Get(ctx, "vic@example.test"); err != nil {
		t.Fatalf("the user was deleted past the limit: %v", err)
	}
}
