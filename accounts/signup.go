package accounts

import (
	"context"
	"errors"
	"fmt"

	"github.com/authd/authd/identity"
	amail "github.com/authd/authd/mail"
	"github.com/authd/authd/storage"
)

// SignUpInput is a posted sign-up form.
type SignUpInput struct {
	// FormToken is the form's one-time token (NewFormToken, put in the
	// form when it was shown): the same form posted twice is one sign-up.
	FormToken string
	Email     string
	Password  string
	App       App
	// Source is the client's address, for the limits.
	Source string
}

// SignUp starts a sign-up: a pending flow and, in the same transaction,
// the message with its code, or, when the address already has an account,
// a note to its owner instead (and a flow no code verifies): the answer
// is the same Pending either way. A repeat of the same form (FormToken)
// writes and sends nothing more and answers the same Pending. Errors:
// ErrDisabled, ErrInvalidEmail, identity.ErrInvalidPassword,
// ErrInvalidForm, *LimitError, and storage's.
func (s *Service) SignUp(ctx context.Context, in SignUpInput) (Pending, error) {
	if !s.cfg.Signup {
		return Pending{}, ErrDisabled
	}
	p, f, username, err := s.openFlow(ctx, storage.FlowSignup, in.FormToken, in.Email)
	if f == nil {
		return p, err
	}
	pw, err := identity.PreparePassword(in.Password)
	if err != nil {
		return Pending{}, identity.ErrInvalidPassword
	}
	charge := s.charge(ctx, in.Source, f.Email, LimitSignupSource)
	f.ClientID, f.ReturnTo, f.ExpiresAt = in.App.ClientID, in.App.ReturnTo, s.cfg.Now().Add(CodeTTL)
	// A source or address out of budget costs no hashing: only the check
	// that this is not a repeat of a form already answered (start, whose
	// charge then refuses; a repeat gets its first answer).
	if over := s.exhausted(ctx, in.Source, f.Email, LimitSignupSource); over != nil {
		s.secretsFor(f, false)
		return s.start(ctx, f, amail.Message{}, func() error { return over })
	}
	// The same hashing work whether or not the address has an account.
	hash, err := s.cfg.Passwords.Hash(ctx, []byte(pw))
	if err != nil {
		return Pending{}, fmt.Errorf("accounts: hash password: %w", err)
	}
	_, ferr := s.cfg.Store.FindUserByEmail(ctx, username, f.Email)
	exists := ferr == nil
	if ferr != nil && !errors.Is(ferr, storage.ErrNotFound) {
		return Pending{}, ferr
	}
	f.PasswordHash = hash
	code, token := s.secretsFor(f, !exists)
	msg := amail.Message{To: f.Email, Template: amail.TemplateSignupCode,
		Data: amail.Data{App: in.App.Name, Code: code, Link: s.link("/signup/verify", f.ID, token)}}
	if exists {
		f.PasswordHash = nil
		msg = amail.Message{To: f.Email, Template: amail.TemplateSignupExists, Data: amail.Data{App: in.App.Name}}
	}
	return s.start(ctx, f, msg, charge)
}

// openFlow names the flow a form starts (formFlowID) and checks the
// address it is for. A repeat of the same form gets the Pending of the
// flow it already started and a nil flow: nothing more is written or sent.
// Otherwise the flow has its ID, purpose and address, and username is the
// one the address maps to.
func (s *Service) openFlow(ctx context.Context, purpose, formToken, addr string) (Pending, *storage.AccountFlow, string, error) {
	id, err := s.formFlowID(purpose, formToken)
	if err != nil {
		return Pending{}, nil, "", err
	}
	if p, ok := s.repeated(ctx, id); ok {
		return p, nil, "", nil
	}
	email, username, err := prepareEmail(addr)
	if err != nil {
		return Pending{}, nil, "", err
	}
	return Pending{}, &storage.AccountFlow{ID: id, Purpose: purpose, Email: email}, username, nil
}

// repeated returns the Pending of a flow that a form already started.
// It only saves work: the insert's unique key is what decides.
func (s *Service) repeated(ctx context.Context, id string) (Pending, bool) {
	f, err := s.cfg.Store.GetAccountFlow(ctx, id)
	if err != nil {
		return Pending{}, false
	}
	return Pending{Flow: f.ID, Email: f.Email}, true
}

// budgets are the limits of a step that sends a message, with their keys.
func budgets(source, email string, extra ...string) [][2]string {
	var b [][2]string
	for _, l := range extra {
		b = append(b, [2]string{l, source})
	}
	return append(b, [2]string{LimitMailSource, source}, [2]string{LimitMailAddress, lower(email)})
}

// charge returns the charge of a step that sends a message, for start:
// it spends the budgets, and start runs it only for the request that
// created the flow, so a repeated form (sequential or concurrent) is
// never charged again nor refused.
func (s *Service) charge(ctx context.Context, source, email string, extra ...string) func() error {
	return func() error {
		for _, b := range budgets(source, email, extra...) {
			if err := s.cfg.Limits.Allow(ctx, b[0], b[1]); err != nil {
				return err
			}
		}
		return nil
	}
}

// exhausted returns the refusal of a step whose budgets have no unit left
// now (spending nothing), or nil.
func (s *Service) exhausted(ctx context.Context, source, email string, extra ...string) error {
	for _, b := range budgets(source, email, extra...) {
		if err := s.cfg.Limits.Check(ctx, b[0], b[1]); err != nil {
			return err
		}
	}
	return nil
}

// start writes the flow and, if this call created it, charges the step's
// budgets (charge: a refusal rolls the flow back) and writes its message
// (nil To: none), in one transaction. A flow that existed (a repeated
// form; a concurrent one waits on the unique key for the first to commit)
// sends nothing, is not charged, and answers the stored flow.
func (s *Service) start(ctx context.Context, f *storage.AccountFlow, msg amail.Message, charge func() error) (Pending, error) {
	var created bool
	err := storage.InTx(ctx, s.cfg.Store, func(tx context.Context) error {
		var err error
		if created, err = s.cfg.Store.CreateAccountFlow(tx, f); err != nil || !created {
			return err
		}
		if err := charge(); err != nil {
			return err
		}
		if msg.To == "" {
			return nil
		}
		_, err = s.cfg.Outbox.Enqueue(tx, msg)
		return err
	})
	if err != nil {
		return Pending{}, err
	}
	if !created {
		if p, ok := s.repeated(ctx, f.ID); ok {
			return p, nil
		}
	}
	return Pending{Flow: f.ID, Email: f.Email}, nil
}

// Describe returns the pending flow id names, for its page: ErrCodeExpired
// if it is unknown or expired, ErrCodeUsed (with the App to go on to) if
// its code was used.
func (s *Service) Describe(ctx context.Context, id, purpose string) (Pending, App, error) {
	if id == "" || len(id) > 64 {
		return Pending{}, App{}, ErrCodeExpired
	}
	f, err := s.cfg.Store.GetAccountFlow(ctx, id)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return Pending{}, App{}, ErrCodeExpired
	case err != nil:
		return Pending{}, App{}, err
	case f.Purpose != purpose:
		return Pending{}, App{}, ErrCodeExpired
	case !f.UsedAt.IsZero():
		return Pending{}, App{ClientID: f.ClientID, ReturnTo: f.ReturnTo}, ErrCodeUsed
	case !s.cfg.Now().Before(f.ExpiresAt):
		return Pending{}, App{}, ErrCodeExpired
	}
	return Pending{Flow: f.ID, Email: f.Email}, App{ClientID: f.ClientID, ReturnTo: f.ReturnTo}, nil
}

// VerifySignUp checks the code (or the link's token) of a sign-up and
// creates the user (email_verified), in the transaction that uses the
// code. It returns the user and the app the sign-up started from, whose
// authorization request the caller continues, signed in. Errors:
// ErrWrongCode, ErrCodeExpired, ErrAddressTaken, *LimitError.
func (s *Service) VerifySignUp(ctx context.Context, id string, p Proof) (identity.User, App, error) {
	f, err := s.check(ctx, id, storage.FlowSignup, p)
	if err != nil {
		return identity.User{}, App{}, err
	}
	_, username, err := prepareEmail(f.Email)
	if err != nil || len(f.PasswordHash) == 0 {
		return identity.User{}, App{}, ErrCodeExpired
	}
	now := storage.NormalizeTime(s.cfg.Now())
	u := &storage.User{Username: username, PasswordHash: f.PasswordHash, CreatedAt: now, UpdatedAt: now}
	err = storage.InTx(ctx, s.cfg.Store, func(tx context.Context) error {
		if err := s.use(tx, id); err != nil {
			return err
		}
		if err := s.cfg.Store.CreateUser(tx, u); err != nil {
			if errors.Is(err, storage.ErrAlreadyExists) {
				return ErrAddressTaken
			}
			return err
		}
		// The address, as an email change claims it: refused if another
		// account got it since the sign-up began (one address, one
		// account, or "Forgot password?" would name two).
		if err := s.cfg.Store.ClaimUserEmail(tx, u.Subject, f.Email, username); err != nil {
			if errors.Is(err, storage.ErrAlreadyExists) {
				return ErrAddressTaken
			}
			return err
		}
		return nil
	})
	if err != nil {
		return identity.User{}, App{}, err
	}
	s.audit(ctx, "account.signup", "sub", u.Subject, "client_id", f.ClientID)
	user, err := s.cfg.People.GetBySubject(ctx, u.Subject)
	return user, App{ClientID: f.ClientID, ReturnTo: f.ReturnTo}, err
}
