package accounts

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/authd/authd/identity"
	amail "github.com/authd/authd/mail"
	"github.com/authd/authd/storage"
)

func lower(s string) string { return strings.ToLower(s) }

// RecoveryInput is a posted "forgot password" form.
type RecoveryInput struct {
	FormToken string
	Email     string
	App       App
	Source    string
}

// RequestRecovery starts a password recovery. The answer is the same
// Pending for any address: when an account (not disabled) has it, the
// code goes there in the transaction that writes the flow; otherwise the
// flow verifies nothing and no message is sent. The limits are charged
// the same for both. A repeat of the same form sends nothing more.
func (s *Service) RequestRecovery(ctx context.Context, in RecoveryInput) (Pending, error) {
	if !s.cfg.Recovery {
		return Pending{}, ErrDisabled
	}
	p, f, username, err := s.openFlow(ctx, storage.FlowRecovery, in.FormToken, in.Email)
	if f == nil {
		return p, err
	}
	u, err := s.cfg.Store.FindUserByEmail(ctx, username, f.Email)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return Pending{}, err
	}
	known := err == nil && !u.Disabled
	f.ClientID, f.ReturnTo, f.ExpiresAt = in.App.ClientID, in.App.ReturnTo, s.cfg.Now().Add(CodeTTL)
	code, token := s.secretsFor(f, known)
	var msg amail.Message
	if known {
		f.Subject = u.Subject
		msg = amail.Message{To: f.Email, Template: amail.TemplateRecoveryCode,
			Data: amail.Data{App: in.App.Name, Code: code, Link: s.link("/recover/verify", f.ID, token)}}
	}
	return s.start(ctx, f, msg, s.charge(ctx, in.Source, f.Email))
}

// Recover checks a recovery's code (or link token) and sets the new
// password; in the same transaction it uses the code, ends every session
// of the user, revokes their codes and tokens (as set-password does) and
// queues a notice. The password is checked first, so a typo there costs
// no guess. Errors: identity.ErrInvalidPassword, ErrWrongCode,
// ErrCodeExpired, *LimitError.
func (s *Service) Recover(ctx context.Context, id string, p Proof, newPassword, appName string) (App, error) {
	pw, err := identity.PreparePassword(newPassword)
	if err != nil {
		return App{}, identity.ErrInvalidPassword
	}
	f, err := s.check(ctx, id, storage.FlowRecovery, p)
	if err != nil {
		return App{}, err
	}
	if f.Subject == "" {
		return App{}, ErrCodeExpired
	}
	hash, err := s.cfg.Passwords.Hash(ctx, []byte(pw))
	if err != nil {
		return App{}, fmt.Errorf("accounts: hash password: %w", err)
	}
	err = storage.InTx(ctx, s.cfg.Store, func(tx context.Context) error {
		if err := s.use(tx, id); err != nil {
			return err
		}
		if err := s.cfg.Store.SetUserPassword(tx, f.Subject, hash); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				return ErrCodeExpired // deleted meanwhile
			}
			return err
		}
		if err := s.cfg.Store.RevokeSubject(tx, f.Subject); err != nil {
			return err
		}
		_, err := s.cfg.Outbox.Enqueue(tx, amail.Message{To: f.Email, Template: amail.TemplatePasswordChanged,
			Data: amail.Data{App: appName}})
		return err
	})
	if err != nil {
		return App{}, err
	}
	s.audit(ctx, "account.recover", "sub", f.Subject, "client_id", f.ClientID)
	return App{ClientID: f.ClientID, ReturnTo: f.ReturnTo}, nil
}
