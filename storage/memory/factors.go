package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/authd/authd/storage"
)

// factorTables are the second factors (storage.FactorStore), by subject.
// Each method is one critical section, which is what makes its
// conditional write atomic.
type factorTables struct {
	totp     map[string]storage.TOTP
	recovery map[string][]recoveryCode
	required map[string]bool
}

type recoveryCode struct {
	hash []byte
	used bool
}

// factors returns the tables, created on first use. Callers hold s.mu.
func (s *Store) factors() *factorTables {
	if s.factorT.totp == nil {
		s.factorT = factorTables{totp: map[string]storage.TOTP{}, recovery: map[string][]recoveryCode{}, required: map[string]bool{}}
	}
	return &s.factorT
}

// PutPendingTOTP implements storage.FactorStore.
func (s *Store) PutPendingTOTP(ctx context.Context, subject string, sealed []byte, now time.Time) error {
	var err error
	s.tx(func() {
		f := s.factors()
		if _, ok := s.users[subject]; !ok {
			err = fmt.Errorf("memory: put totp: user: %w", storage.ErrNotFound)
			return
		}
		old, had := f.totp[subject]
		if had && old.Confirmed {
			err = fmt.Errorf("memory: put totp: %w", storage.ErrAlreadyExists)
			return
		}
		f.totp[subject] = storage.TOTP{Subject: subject, Secret: slices.Clone(sealed), CreatedAt: storage.NormalizeTime(now)}
		s.record(ctx, func() {
			if had {
				f.totp[subject] = old
			} else {
				delete(f.totp, subject)
			}
		})
	})
	return err
}

// GetTOTP implements storage.FactorStore.
func (s *Store) GetTOTP(_ context.Context, subject string) (*storage.TOTP, error) {
	var out *storage.TOTP
	s.tx(func() {
		if t, ok := s.factors().totp[subject]; ok {
			t.Secret = slices.Clone(t.Secret)
			out = &t
		}
	})
	if out == nil {
		return nil, fmt.Errorf("memory: get totp: %w", storage.ErrNotFound)
	}
	return out, nil
}

// ConfirmTOTP implements storage.FactorStore.
func (s *Store) ConfirmTOTP(ctx context.Context, subject string, step int64, codeHashes [][]byte, now time.Time) error {
	var err error
	s.tx(func() {
		f := s.factors()
		t, ok := f.totp[subject]
		if !ok || t.Confirmed {
			err = fmt.Errorf("memory: confirm totp: %w", storage.ErrNotFound)
			return
		}
		oldCodes := f.recovery[subject]
		t.Confirmed, t.LastStep = true, step
		f.totp[subject] = t
		f.recovery[subject] = newCodes(codeHashes)
		s.record(ctx, func() {
			t.Confirmed, t.LastStep = false, 0
			f.totp[subject] = t
			f.recovery[subject] = oldCodes
		})
	})
	return err
}

func newCodes(hashes [][]byte) []recoveryCode {
	out := make([]recoveryCode, 0, len(hashes))
	for _, h := range hashes {
		out = append(out, recoveryCode{hash: slices.Clone(h)})
	}
	return out
}

// UseTOTPStep implements storage.FactorStore.
func (s *Store) UseTOTPStep(ctx context.Context, subject string, step int64) error {
	var err error
	s.tx(func() {
		f := s.factors()
		t, ok := f.totp[subject]
		switch {
		case !ok || !t.Confirmed:
			err = fmt.Errorf("memory: use totp step: %w", storage.ErrNotFound)
		case step <= t.LastStep:
			err = fmt.Errorf("memory: use totp step: %w", storage.ErrInactiveToken)
		default:
			old := t.LastStep
			t.LastStep = step
			f.totp[subject] = t
			s.record(ctx, func() {
				if x, ok := f.totp[subject]; ok {
					x.LastStep = old
					f.totp[subject] = x
				}
			})
		}
	})
	return err
}

// UseRecoveryCode implements storage.FactorStore.
func (s *Store) UseRecoveryCode(ctx context.Context, subject string, codeHash []byte, _ time.Time) (int, error) {
	remaining, found := 0, false
	s.tx(func() {
		codes := s.factors().recovery[subject]
		for i := range codes {
			if !codes[i].used && slices.Equal(codes[i].hash, codeHash) && !found {
				codes[i].used, found = true, true
				s.record(ctx, func() { codes[i].used = false })
				continue
			}
			if !codes[i].used {
				remaining++
			}
		}
	})
	if !found {
		return 0, fmt.Errorf("memory: use recovery code: %w", storage.ErrNotFound)
	}
	return remaining, nil
}

// ReplaceRecoveryCodes implements storage.FactorStore.
func (s *Store) ReplaceRecoveryCodes(ctx context.Context, subject string, codeHashes [][]byte, _ time.Time) error {
	var err error
	s.tx(func() {
		f := s.factors()
		if t, ok := f.totp[subject]; !ok || !t.Confirmed {
			err = fmt.Errorf("memory: replace recovery codes: %w", storage.ErrNotFound)
			return
		}
		old := f.recovery[subject]
		f.recovery[subject] = newCodes(codeHashes)
		s.record(ctx, func() { f.recovery[subject] = old })
	})
	return err
}

// RecoveryCodesLeft implements storage.FactorStore.
func (s *Store) RecoveryCodesLeft(_ context.Context, subject string) (int, error) {
	n := 0
	s.tx(func() {
		for _, c := range s.factors().recovery[subject] {
			if !c.used {
				n++
			}
		}
	})
	return n, nil
}

// DeleteFactors implements storage.FactorStore.
func (s *Store) DeleteFactors(ctx context.Context, subject string) (bool, error) {
	had := false
	s.tx(func() { had = s.deleteFactors(ctx, subject) })
	return had, nil
}

// deleteFactors deletes subject's TOTP and recovery codes. Callers hold
// s.mu.
func (s *Store) deleteFactors(ctx context.Context, subject string) bool {
	f := s.factors()
	t, had := f.totp[subject]
	codes := f.recovery[subject]
	delete(f.totp, subject)
	delete(f.recovery, subject)
	s.record(ctx, func() {
		if had {
			f.totp[subject] = t
		}
		f.recovery[subject] = codes
	})
	return had
}

// SetMFARequired implements storage.FactorStore.
func (s *Store) SetMFARequired(ctx context.Context, subject string, required bool, _ time.Time) error {
	var err error
	s.tx(func() {
		if _, ok := s.users[subject]; !ok {
			err = fmt.Errorf("memory: set mfa required: user: %w", storage.ErrNotFound)
			return
		}
		f := s.factors()
		old := f.required[subject]
		f.required[subject] = required
		s.record(ctx, func() { f.required[subject] = old })
	})
	return err
}

// MFARequired implements storage.FactorStore.
func (s *Store) MFARequired(_ context.Context, subject string) (bool, error) {
	var req bool
	s.tx(func() { req = s.factors().required[subject] })
	return req, nil
}

// FactorState implements storage.FactorStore.
func (s *Store) FactorState(_ context.Context, subject string) (hasTOTP, required bool, err error) {
	s.tx(func() {
		f := s.factors()
		hasTOTP = f.totp[subject].Confirmed
		required = f.required[subject]
	})
	return hasTOTP, required, nil
}

// RaiseSession implements storage.FactorStore.
func (s *Store) RaiseSession(ctx context.Context, id string, amr []string, authTime, now time.Time) (*storage.Session, error) {
	var out *storage.Session
	s.tx(func() {
		old, ok := s.sessions[id]
		if !ok || !sessionValid(old, now) || s.users[old.Subject].Disabled {
			return
		}
		x := *cloneSession(old)
		for _, v := range amr {
			if !slices.Contains(x.AMR, v) {
				x.AMR = append(x.AMR, v)
			}
		}
		x.AuthTime = storage.NormalizeTime(authTime)
		s.sessions[id] = x
		s.record(ctx, func() { s.sessions[id] = old })
		out = cloneSession(x)
	})
	if out == nil {
		return nil, fmt.Errorf("memory: raise session: %w", storage.ErrNotFound)
	}
	return out, nil
}

// userFactors is GetSessionUserConsent's storage.UserFactors.
func (s *Store) userFactors(subject string) storage.UserFactors {
	var out storage.UserFactors
	s.tx(func() {
		f := s.factors()
		out.TOTP = f.totp[subject].Confirmed
		out.MFARequired = f.required[subject]
		for _, p := range s.pk().keys {
			if p.Subject == subject && p.DisabledAt.IsZero() {
				out.Passkey = true
				break
			}
		}
	})
	return out
}
