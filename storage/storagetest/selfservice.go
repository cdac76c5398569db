package storagetest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fositestorage "github.com/ory/fosite/storage"

	"github.com/authd/authd/storage"
)

// SelfServiceStore is what RunSelfService tests: the mail outbox, the
// self-service flows, users and transactions.
type SelfServiceStore interface {
	storage.MailStore
	storage.AccountFlowStore
	storage.UserStore
	fositestorage.Transactional
}

var selfServiceCases = []struct {
	name string
	run  func(t *testing.T, s SelfServiceStore)
}{
	{"MailLifecycle", testMailLifecycle},
	{"MailRolledBack", testMailRolledBack},
	{"FlowCreatedOnce", testFlowCreatedOnce},
	{"FlowAttemptsBounded", testFlowAttempts},
	{"FlowUsedOnce", testFlowUsedOnce},
	{"FindUserByEmail", testFindUserByEmail},
	{"ClaimUserEmail", testClaimUserEmail},
	{"ClaimUserEmailConcurrent", testClaimUserEmailConcurrent},
	{"Cleanup", testSelfServiceCleanup},
}

// RunSelfService runs the storage.MailStore and storage.AccountFlowStore
// conformance cases. newStore must return a fresh, empty store per case.
func RunSelfService(t *testing.T, newStore func(t *testing.T) SelfServiceStore) {
	for _, tc := range selfServiceCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t))
		})
	}
}

func testMailLifecycle(t *testing.T, s SelfServiceStore) {
	ctx := t.Context()
	m := &storage.Mail{MessageID: "a@example.test", Recipient: "r@example.test", Template: "t", Sealed: []byte("sealed"),
		GiveUpAt: time.Now().Add(time.Hour)}
	noErr(t, "InsertMail", s.InsertMail(ctx, m))
	if m.ID == 0 || m.Status != storage.MailPending {
		t.Fatalf("inserted %+v", m)
	}
	noErr(t, "RecordMailAttempt", s.RecordMailAttempt(ctx, m.ID, "451"))
	got, err := s.GetMail(ctx, m.ID)
	noErr(t, "GetMail", err)
	if got.Attempts != 1 || got.LastError != "451" || !bytes.Equal(got.Sealed, []byte("sealed")) || got.MessageID != m.MessageID {
		t.Fatalf("after an attempt: %+v", got)
	}
	ok, err := s.FinishMail(ctx, m.ID, storage.MailSent, "")
	noErr(t, "FinishMail", err)
	again, err := s.FinishMail(ctx, m.ID, storage.MailGivenUp, "late")
	noErr(t, "FinishMail again", err)
	if !ok || again {
		t.Fatalf("FinishMail = %v then %v, want true then false", ok, again)
	}
	got, _ = s.GetMail(ctx, m.ID)
	if got.Status != storage.MailSent || got.Sealed != nil || got.FinishedAt.IsZero() {
		t.Fatalf("after sending: %+v", got)
	}
	noErr(t, "RecordMailAttempt after the end", s.RecordMailAttempt(ctx, m.ID, "x"))
	if got, _ = s.GetMail(ctx, m.ID); got.LastError == "x" {
		t.Fatal("a finished row recorded an attempt")
	}
	_, err = s.GetMail(ctx, m.ID+1000)
	wantErr(t, "GetMail unknown", err, storage.ErrNotFound)
}

func testMailRolledBack(t *testing.T, s SelfServiceStore) {
	ctx := t.Context()
	tx, err := s.BeginTX(ctx)
	noErr(t, "BeginTX", err)
	m := &storage.Mail{MessageID: "b@example.test", Recipient: "r@example.test", Template: "t", GiveUpAt: time.Now().Add(time.Hour)}
	noErr(t, "InsertMail", s.InsertMail(tx, m))
	f := &storage.AccountFlow{ID: "flow-rb", Purpose: storage.FlowSignup, Email: "r@example.test", CodeHash: []byte{1}, LinkHash: []byte{2},
		ExpiresAt: time.Now().Add(time.Hour)}
	_, err = s.CreateAccountFlow(tx, f)
	noErr(t, "CreateAccountFlow", err)
	noErr(t, "Rollback", s.Rollback(tx))
	_, err = s.GetMail(ctx, m.ID)
	wantErr(t, "GetMail after rollback", err, storage.ErrNotFound)
	_, err = s.GetAccountFlow(ctx, "flow-rb")
	wantErr(t, "GetAccountFlow after rollback", err, storage.ErrNotFound)
}

func newFlow(id string) *storage.AccountFlow {
	return &storage.AccountFlow{ID: id, Purpose: storage.FlowRecovery, Email: "p@example.test", Subject: "sub-1",
		CodeHash: []byte("code"), LinkHash: []byte("link"), ClientID: "app", ReturnTo: "/oauth2/authorize?x=1",
		ExpiresAt: time.Now().Add(time.Hour)}
}

func testFlowCreatedOnce(t *testing.T, s SelfServiceStore) {
	ctx := t.Context()
	var created atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ok, err := s.CreateAccountFlow(ctx, newFlow("same"))
			if err != nil {
				t.Error(err)
			}
			if ok {
				created.Add(1)
			}
		})
	}
	wg.Wait()
	if created.Load() != 1 {
		t.Fatalf("%d of 8 concurrent creations reported created, want 1", created.Load())
	}
	f, err := s.GetAccountFlow(ctx, "same")
	noErr(t, "GetAccountFlow", err)
	if f.Subject != "sub-1" || f.ReturnTo != "/oauth2/authorize?x=1" || !bytes.Equal(f.CodeHash, []byte("code")) || f.Attempts != 0 {
		t.Fatalf("stored %+v", f)
	}
}

func testFlowAttempts(t *testing.T, s SelfServiceStore) {
	ctx := t.Context()
	_, err := s.CreateAccountFlow(ctx, newFlow("guess"))
	noErr(t, "CreateAccountFlow", err)
	now := time.Now()
	for i := 1; i <= 3; i++ {
		f, err := s.AttemptAccountFlow(ctx, "guess", now, 3)
		noErr(t, "AttemptAccountFlow", err)
		if f.Attempts != i {
			t.Fatalf("attempt %d counted %d", i, f.Attempts)
		}
	}
	_, err = s.AttemptAccountFlow(ctx, "guess", now, 3)
	wantErr(t, "a fourth guess", err, storage.ErrNotFound)
	_, err = s.CreateAccountFlow(ctx, newFlow("late"))
	noErr(t, "CreateAccountFlow", err)
	_, err = s.AttemptAccountFlow(ctx, "late", now.Add(2*time.Hour), 3)
	wantErr(t, "a guess after expiry", err, storage.ErrNotFound)
	_, err = s.AttemptAccountFlow(ctx, "nobody", now, 3)
	wantErr(t, "a guess at no flow", err, storage.ErrNotFound)
}

func testFlowUsedOnce(t *testing.T, s SelfServiceStore) {
	ctx := t.Context()
	_, err := s.CreateAccountFlow(ctx, newFlow("once"))
	noErr(t, "CreateAccountFlow", err)
	var used atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if ok, err := s.UseAccountFlow(ctx, "once", time.Now()); err != nil {
				t.Error(err)
			} else if ok {
				used.Add(1)
			}
		})
	}
	wg.Wait()
	if used.Load() != 1 {
		t.Fatalf("%d of 8 concurrent uses won, want 1", used.Load())
	}
	_, err = s.AttemptAccountFlow(ctx, "once", time.Now(), 5)
	wantErr(t, "a guess at a used flow", err, storage.ErrNotFound)
	noErr(t, "DeleteAccountFlows", s.DeleteAccountFlows(ctx, "sub-1"))
	_, err = s.GetAccountFlow(ctx, "once")
	wantErr(t, "GetAccountFlow after DeleteAccountFlows", err, storage.ErrNotFound)
}

func testFindUserByEmail(t *testing.T, s SelfServiceStore) {
	ctx := t.Context()
	now := time.Now().UTC()
	noErr(t, "CreateUser", s.CreateUser(ctx, &storage.User{Username: "ops-alice", Email: "Alice@Example.test", PasswordHash: []byte("x"), CreatedAt: now}))
	noErr(t, "CreateUser", s.CreateUser(ctx, &storage.User{Username: "bob@example.test", Email: "other@example.test", PasswordHash: []byte("x"), CreatedAt: now}))
	u, err := s.FindUserByEmail(ctx, "alice@example.test", "alice@example.test")
	noErr(t, "FindUserByEmail by email", err)
	if u.Username != "ops-alice" {
		t.Fatalf("found %q", u.Username)
	}
	if u, err = s.FindUserByEmail(ctx, "bob@example.test", "bob@example.test"); err != nil || u.Username != "bob@example.test" {
		t.Fatalf("FindUserByEmail by username: %v %v", u, err)
	}
	_, err = s.FindUserByEmail(ctx, "carol@example.test", "carol@example.test")
	wantErr(t, "FindUserByEmail unknown", err, storage.ErrNotFound)
}

// A verified address is claimed only when no other user has it, as email
// (case-insensitive) or username; a refusal changes nothing.
func testClaimUserEmail(t *testing.T, s SelfServiceStore) {
	ctx := t.Context()
	now := time.Now().UTC()
	users := []*storage.User{{Username: "ops-alice", Email: "Alice@Example.test"}, {Username: "bob@example.test"},
		{Username: "carol", Email: "carol@example.test"}}
	for _, u := range users {
		u.PasswordHash, u.CreatedAt = []byte("x"), now
		noErr(t, "CreateUser", s.CreateUser(ctx, u))
	}
	carol := users[2].Subject
	wantErr(t, "claim another user's email", s.ClaimUserEmail(ctx, carol, "alice@EXAMPLE.test", "alice@example.test"), storage.ErrAlreadyExists)
	wantErr(t, "claim another user's username", s.ClaimUserEmail(ctx, carol, "bob@example.test", "bob@example.test"), storage.ErrAlreadyExists)
	if u, err := s.GetUserBySubject(ctx, carol); err != nil || u.Email != "carol@example.test" || u.EmailVerified {
		t.Fatalf("after refused claims: %+v %v", u, err)
	}
	noErr(t, "claim one's own address", s.ClaimUserEmail(ctx, carol, "Carol@example.test", "carol@example.test"))
	noErr(t, "claim a free address", s.ClaimUserEmail(ctx, carol, "new@example.test", "new@example.test"))
	if u, err := s.GetUserBySubject(ctx, carol); err != nil || u.Email != "new@example.test" || !u.EmailVerified {
		t.Fatalf("after a claim: %+v %v", u, err)
	}
	wantErr(t, "claim for nobody", s.ClaimUserEmail(ctx, "no-such-subject", "free@example.test", "free@example.test"), storage.ErrNotFound)
}

// Users claiming one address at once, each in a transaction: one gets it.
func testClaimUserEmailConcurrent(t *testing.T, s SelfServiceStore) {
	ctx := t.Context()
	subjects := make([]string, 8)
	for i := range subjects {
		u := &storage.User{Username: "racer" + string(rune('a'+i)), PasswordHash: []byte("x"), CreatedAt: time.Now().UTC()}
		noErr(t, "CreateUser", s.CreateUser(ctx, u))
		subjects[i] = u.Subject
	}
	var won, lost atomic.Int32
	var wg sync.WaitGroup
	for _, sub := range subjects {
		wg.Go(func() {
			err := storage.InTx(ctx, s, func(tx context.Context) error {
				if err := s.ClaimUserEmail(tx, sub, "race@example.test", "race@example.test"); err != nil {
					return err
				}
				time.Sleep(20 * time.Millisecond) // the transaction stays open while the others try
				return nil
			})
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, storage.ErrAlreadyExists):
				lost.Add(1)
			default:
				t.Errorf("claim: %v", err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 || lost.Load() != int32(len(subjects)-1) {
		t.Fatalf("%d claims won and %d lost, want 1 and %d", won.Load(), lost.Load(), len(subjects)-1)
	}
}

func testSelfServiceCleanup(t *testing.T, s SelfServiceStore) {
	c, ok := s.(storage.Cleaner)
	if !ok {
		t.Skip("the store does not clean")
	}
	ctx := t.Context()
	old := newFlow("old")
	old.ExpiresAt = time.Now().Add(-time.Hour)
	for _, f := range []*storage.AccountFlow{old, newFlow("live")} {
		_, err := s.CreateAccountFlow(ctx, f)
		noErr(t, "CreateAccountFlow", err)
	}
	var ids []int64
	for _, id := range []string{"sent@x", "pending@x"} {
		m := &storage.Mail{MessageID: id, Recipient: "r@example.test", Template: "t", GiveUpAt: time.Now().Add(time.Hour)}
		noErr(t, "InsertMail", s.InsertMail(ctx, m))
		ids = append(ids, m.ID)
	}
	_, err := s.FinishMail(ctx, ids[0], storage.MailSent, "")
	noErr(t, "FinishMail", err)
	later := time.Now().Add(time.Minute)
	for kind, want := range map[string]int{storage.CleanupAccountFlows: 1, storage.CleanupMailOutbox: 1} {
		n, err := c.DeleteExpired(ctx, kind, later, 10)
		noErr(t, "DeleteExpired "+kind, err)
		if n != want {
			t.Errorf("DeleteExpired(%s) = %d, want %d", kind, n, want)
		}
	}
	if _, err := s.GetAccountFlow(ctx, "live"); err != nil {
		t.Errorf("a live flow was deleted: %v", err)
	}
	if _, err := s.GetMail(ctx, ids[1]); err != nil {
		t.Errorf("a pending message was deleted: %v", err)
	}
}
