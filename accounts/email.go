package accounts

import (
	"context"
	"errors"
	"strings"

	"github.com/authd/authd/identity"
	amail "github.com/authd/authd/mail"
	"github.com/authd/authd/storage"
)

// RequestEmailChange starts a change of the signed-in user's address to
// newEmail: a code goes to the new address; nothing changes until it is
// used (ConfirmEmailChange). A repeat of the same form sends nothing more.
// ErrDisabled without mail.
func (s *Service) RequestEmailChange(ctx context.Context, subject, formToken, newEmail, source string) (Pending, error) {
	if !s.MailEnabled() {
		return Pending{}, ErrDisabled
	}
	p, f, _, err := s.openFlow(ctx, storage.FlowEmailChange, formToken, newEmail)
	if f == nil {
		return p, err
	}
	f.Subject, f.ExpiresAt = subject, s.cfg.Now().Add(CodeTTL)
	code, token := s.secretsFor(f, true)
	return s.start(ctx, f, amail.Message{To: f.Email, Template: amail.TemplateEmailChangeCode,
		Data: amail.Data{Code: code, Link: s.link("/account/email/verify", f.ID, token)}}, s.charge(ctx, source, f.Email))
}

// ConfirmEmailChange checks the code sent to the new address and, in the
// transaction that uses it, makes it the user's verified address (and
// their username, when the username was the old address and the new one
// is free) and queues a notice to the old address. Errors: ErrWrongCode,
// ErrCodeExpired, ErrEmailInUse (another account has the address; the old
// one stays), *LimitError.
func (s *Service) ConfirmEmailChange(ctx context.Context, subject, id string, p Proof) (identity.User, error) {
	if !s.MailEnabled() {
		return identity.User{}, ErrDisabled
	}
	f, err := s.check(ctx, id, storage.FlowEmailChange, p)
	if err != nil {
		return identity.User{}, err
	}
	if f.Subject != subject {
		return identity.User{}, ErrCodeExpired
	}
	st := s.cfg.Store
	err = storage.InTx(ctx, s.cfg.Store, func(tx context.Context) error {
		if err := s.use(tx, id); err != nil {
			return err
		}
		u, err := st.GetUserBySubject(tx, subject)
		if err != nil {
			return err
		}
		old := u.Email
		_, newName, err := prepareEmail(f.Email)
		if err != nil {
			return ErrCodeExpired
		}
		// The address is proved (the code came from its mailbox), so
		// saying another account uses it tells nothing "Forgot password?"
		// would not; two accounts with one address would make recovery
		// ambiguous. The refusal rolls back the use of the code.
		if err := st.ClaimUserEmail(tx, subject, f.Email, newName); err != nil {
			if errors.Is(err, storage.ErrAlreadyExists) {
				return ErrEmailInUse
			}
			return err
		}
		if _, oldName, err := prepareEmail(old); err == nil && oldName == u.Username && newName != u.Username {
			if err := st.RenameUser(tx, subject, newName); err != nil {
				if errors.Is(err, storage.ErrAlreadyExists) {
					return ErrEmailInUse
				}
				return err
			}
		}
		if old == "" || strings.EqualFold(old, f.Email) {
			return nil
		}
		_, err = s.cfg.Outbox.Enqueue(tx, amail.Message{To: old, Template: amail.TemplateEmailChanged,
			Data: amail.Data{Address: f.Email}})
		return err
	})
	if err != nil {
		return identity.User{}, err
	}
	s.audit(ctx, "account.email_change", "sub", subject)
	return s.cfg.People.GetBySubject(ctx, subject)
}
