package accounts

import (
	"context"
	"errors"
	"time"

	amail "github.com/authd/authd/mail"
	"github.com/authd/authd/storage"
)

// NeedsReauth reports whether deleting now needs the password again: the
// session's sign-in is older than ReauthWindow.
func (s *Service) NeedsReauth(authTime time.Time) bool {
	return s.cfg.Now().Sub(authTime) > ReauthWindow
}

// DeleteAccount deletes the user as `authd users delete` does, in one
// transaction: the user row with its sessions and consents (and whatever
// else the store deletes with a user), its pending flows, every code and
// token revoked (RevokeSubject, which also drops the replay cache
// entries), and a confirmation queued to the user's address (when mail
// can be sent: deletion does not depend on mail). The
// username is free afterwards. A session whose sign-in is older than
// ReauthWindow must present the password (ErrReauth without one,
// ErrWrongPassword for a wrong one, *LimitError after LimitReauth's
// budget of tries).
func (s *Service) DeleteAccount(ctx context.Context, subject string, authTime time.Time, password string) error {
	st := s.cfg.Store
	u, err := st.GetUserBySubject(ctx, subject)
	if errors.Is(err, storage.ErrNotFound) {
		return nil // already deleted: a repeated form
	}
	if err != nil {
		return err
	}
	if s.NeedsReauth(authTime) {
		if password == "" {
			return ErrReauth
		}
		// A stolen session must not become a password oracle.
		if err := s.cfg.Limits.Allow(ctx, LimitReauth, subject); err != nil {
			return err
		}
		if _, err := s.cfg.People.Authenticate(ctx, u.Username, password); err != nil {
			return ErrWrongPassword
		}
	}
	err = storage.InTx(ctx, s.cfg.Store, func(tx context.Context) error {
		if err := st.DeleteAccountFlows(tx, subject); err != nil {
			return err
		}
		if err := st.DeleteUser(tx, subject); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				return nil
			}
			return err
		}
		if err := st.RevokeSubject(tx, subject); err != nil {
			return err
		}
		if u.Email == "" || s.cfg.Outbox == nil {
			return nil
		}
		_, err := s.cfg.Outbox.Enqueue(tx, amail.Message{To: u.Email, Template: amail.TemplateAccountDeleted})
		return err
	})
	if err != nil {
		return err
	}
	s.audit(ctx, "account.delete", "sub", subject)
	return nil
}
