package totp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"image/png"
	"log/slog"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/authd/authd/secrets"
	"github.com/authd/authd/storage"
)

// Store is what the Service needs from storage.
type Store interface {
	storage.FactorStore
}

// Options configure a Service.
type Options struct {
	// Secret is the system secret (sealing and code hashes).
	Secret []byte
	// Issuer is the name the authenticator app shows (the otpauth URI's
	// issuer), e.g. the server's host.
	Issuer string
	Logger *slog.Logger
	Now    func() time.Time
}

// RFC 6238 parameters: what every authenticator app supports.
const (
	period = 30 // seconds (RFC 6238 §5.2 recommends 30)
	skew   = 1  // steps accepted either side of now (§5.2, §6)
	digits = otp.DigitsSix
	// RecoveryCodes is how many recovery codes a set-up gives.
	RecoveryCodes = 10
)

// Errors.
var (
	// ErrInvalidCode: the code is not a valid TOTP or unused recovery
	// code (a wrong one, or a TOTP code whose step was already accepted).
	ErrInvalidCode = errors.New("totp: invalid code")
	// ErrNoSetup: no set-up in progress to confirm.
	ErrNoSetup = errors.New("totp: no set-up in progress")
	// ErrAlreadySet: the user already has an authenticator app.
	ErrAlreadySet = errors.New("totp: an authenticator app is already set up")
)

// Service keeps users' TOTP factors and recovery codes. Safe for
// concurrent use.
type Service struct {
	store   Store
	opts    Options
	codeKey []byte
}

// New returns a Service.
func New(store Store, o Options) (*Service, error) {
	if len(o.Secret) < secrets.MinLen {
		return nil, fmt.Errorf("totp: the system secret must have at least %d bytes", secrets.MinLen)
	}
	if o.Issuer == "" {
		o.Issuer = "authd"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{store: store, opts: o,
		codeKey: secrets.Derive(o.Secret, "totp-recovery-code")}, nil
}

// Enrolment is a set-up in progress, to show: the otpauth URI as a QR code
// (a PNG) and as text, and the secret for typing by hand.
type Enrolment struct {
	URI    string
	Secret string
	QRPNG  []byte
}

// Begin starts (or restarts) setting up an authenticator app for the user:
// a new secret, stored sealed and unconfirmed. ErrAlreadySet if one is
// confirmed.
func (s *Service) Begin(ctx context.Context, subject, account string) (Enrolment, error) {
	key, err := totp.Generate(totp.GenerateOpts{Issuer: s.opts.Issuer, AccountName: account,
		Period: period, Digits: digits, Algorithm: otp.AlgorithmSHA1, SecretSize: 20})
	if err != nil {
		return Enrolment{}, fmt.Errorf("totp: generate: %w", err)
	}
	sealed := s.seal(subject, []byte(key.Secret()))
	if err := s.store.PutPendingTOTP(ctx, subject, sealed, s.opts.Now()); err != nil {
		if errors.Is(err, storage.ErrAlreadyExists) {
			return Enrolment{}, ErrAlreadySet
		}
		return Enrolment{}, fmt.Errorf("totp: begin: %w", err)
	}
	return enrolment(key)
}

// Pending returns the set-up in progress (to show again after a wrong
// code). ErrNoSetup if there is none; ErrAlreadySet if it is confirmed.
func (s *Service) Pending(ctx context.Context, subject, account string) (Enrolment, error) {
	t, err := s.store.GetTOTP(ctx, subject)
	if errors.Is(err, storage.ErrNotFound) {
		return Enrolment{}, ErrNoSetup
	}
	if err != nil {
		return Enrolment{}, fmt.Errorf("totp: pending: %w", err)
	}
	if t.Confirmed {
		return Enrolment{}, ErrAlreadySet
	}
	secret, err := s.open(subject, t.Secret)
	if err != nil {
		return Enrolment{}, err
	}
	key, err := otp.NewKeyFromURL(keyURL(s.opts.Issuer, account, string(secret)))
	if err != nil {
		return Enrolment{}, fmt.Errorf("totp: pending: %w", err)
	}
	return enrolment(key)
}

func keyURL(issuer, account, secret string) string {
	k, _ := totp.Generate(totp.GenerateOpts{Issuer: issuer, AccountName: account, Period: period, Digits: digits,
		Algorithm: otp.AlgorithmSHA1, Secret: mustDecode(secret)})
	return k.URL()
}

func mustDecode(secret string) []byte {
	b, _ := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret)
	return b
}

func enrolment(key *otp.Key) (Enrolment, error) {
	img, err := key.Image(240, 240)
	if err != nil {
		return Enrolment{}, fmt.Errorf("totp: QR code: %w", err)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return Enrolment{}, fmt.Errorf("totp: QR code: %w", err)
	}
	return Enrolment{URI: key.URL(), Secret: key.Secret(), QRPNG: buf.Bytes()}, nil
}

// Confirm checks code against the set-up in progress; when it is valid
// the factor is confirmed (that step counts as used) and the returned
// recovery codes, shown once, replace any earlier ones. ErrInvalidCode for
// a wrong code, ErrNoSetup when nothing is in progress.
func (s *Service) Confirm(ctx context.Context, subject, code string) ([]string, error) {
	t, err := s.store.GetTOTP(ctx, subject)
	if errors.Is(err, storage.ErrNotFound) || (err == nil && t.Confirmed) {
		return nil, ErrNoSetup
	}
	if err != nil {
		return nil, fmt.Errorf("totp: confirm: %w", err)
	}
	secret, err := s.open(subject, t.Secret)
	if err != nil {
		return nil, err
	}
	step, ok := s.match(string(secret), normalize(code))
	if !ok {
		return nil, ErrInvalidCode
	}
	codes, hashes := s.newCodes(subject)
	if err := s.store.ConfirmTOTP(ctx, subject, step, hashes, s.opts.Now()); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil, ErrNoSetup // a concurrent confirmation won
		}
		return nil, fmt.Errorf("totp: confirm: %w", err)
	}
	s.opts.Logger.Info("audit", "event", "mfa.setup", "factor", "totp", "sub", subject)
	return codes, nil
}

// Kind is what a code was.
type Kind int

// The kinds of code Check accepts.
const (
	KindTOTP Kind = iota + 1
	KindRecovery
)

// Check accepts a code of the user's confirmed factor: six digits are a
// TOTP code (accepted if its step is within the skew and later than the
// last accepted one: RFC 6238 §5.2, never twice), anything else a recovery
// code (accepted once). ErrInvalidCode otherwise, including for a user
// without a factor.
func (s *Service) Check(ctx context.Context, subject, code string) (Kind, error) {
	code = normalize(code)
	if len(code) == int(digits) && isDigits(code) {
		t, err := s.store.GetTOTP(ctx, subject)
		if errors.Is(err, storage.ErrNotFound) || (err == nil && !t.Confirmed) {
			return 0, ErrInvalidCode
		}
		if err != nil {
			return 0, fmt.Errorf("totp: check: %w", err)
		}
		secret, err := s.open(subject, t.Secret)
		if err != nil {
			return 0, err
		}
		step, ok := s.match(string(secret), code)
		if !ok || step <= t.LastStep {
			return 0, ErrInvalidCode
		}
		// The conditional write decides between concurrent uses.
		switch err := s.store.UseTOTPStep(ctx, subject, step); {
		case errors.Is(err, storage.ErrInactiveToken), errors.Is(err, storage.ErrNotFound):
			return 0, ErrInvalidCode
		case err != nil:
			return 0, fmt.Errorf("totp: check: %w", err)
		}
		return KindTOTP, nil
	}
	if len(code) != recoveryLen {
		return 0, ErrInvalidCode
	}
	left, err := s.store.UseRecoveryCode(ctx, subject, s.codeHash(subject, code), s.opts.Now())
	if errors.Is(err, storage.ErrNotFound) {
		return 0, ErrInvalidCode
	}
	if err != nil {
		return 0, fmt.Errorf("totp: check: %w", err)
	}
	s.opts.Logger.Info("audit", "event", "mfa.recovery_code_used", "sub", subject, "left", left)
	return KindRecovery, nil
}

// match returns the step of now-skew..now+skew whose code is code.
func (s *Service) match(secret, code string) (int64, bool) {
	now := s.opts.Now()
	cur := now.Unix() / period
	found, step := 0, int64(0)
	for d := int64(-skew); d <= skew; d++ {
		want, err := totp.GenerateCodeCustom(secret, time.Unix((cur+d)*period, 0),
			totp.ValidateOpts{Period: period, Digits: digits, Algorithm: otp.AlgorithmSHA1})
		if err != nil {
			return 0, false
		}
		// Constant time, and no early exit: every step is compared.
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 && found == 0 {
			found, step = 1, cur+d
		}
	}
	return step, found == 1
}

// Has reports whether the user has a confirmed authenticator app.
func (s *Service) Has(ctx context.Context, subject string) (bool, error) {
	t, err := s.store.GetTOTP(ctx, subject)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("totp: has: %w", err)
	}
	return t.Confirmed, nil
}

// RecoveryCodesLeft returns how many unused recovery codes the user has.
func (s *Service) RecoveryCodesLeft(ctx context.Context, subject string) (int, error) {
	return s.store.RecoveryCodesLeft(ctx, subject)
}

// RegenerateCodes replaces the user's recovery codes with new ones, shown
// once. ErrNoSetup without a confirmed factor.
func (s *Service) RegenerateCodes(ctx context.Context, subject string) ([]string, error) {
	codes, hashes := s.newCodes(subject)
	if err := s.store.ReplaceRecoveryCodes(ctx, subject, hashes, s.opts.Now()); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil, ErrNoSetup
		}
		return nil, fmt.Errorf("totp: regenerate codes: %w", err)
	}
	s.opts.Logger.Info("audit", "event", "mfa.recovery_codes_regenerated", "sub", subject)
	return codes, nil
}

// Remove deletes the user's authenticator app and recovery codes (the
// caller has checked a fresh second factor, or is an operator: reason
// says which, for the audit event) and reports whether there was one.
func (s *Service) Remove(ctx context.Context, subject, reason string) (bool, error) {
	had, err := s.store.DeleteFactors(ctx, subject)
	if err != nil {
		return false, fmt.Errorf("totp: remove: %w", err)
	}
	s.opts.Logger.Info("audit", "event", "mfa.reset", "reason", reason, "sub", subject, "had_factor", had)
	return had, nil
}

// Required reports whether an operator requires the user to have a
// second factor.
func (s *Service) Required(ctx context.Context, subject string) (bool, error) {
	return s.store.MFARequired(ctx, subject)
}

// State reports, in one read, whether the user has a confirmed
// authenticator app and whether an operator requires a second factor.
func (s *Service) State(ctx context.Context, subject string) (has, required bool, err error) {
	has, required, err = s.store.FactorState(ctx, subject)
	if err != nil {
		return false, false, fmt.Errorf("totp: state: %w", err)
	}
	return has, required, nil
}

// SetRequired records whether an operator requires it.
func (s *Service) SetRequired(ctx context.Context, subject string, required bool) error {
	if err := s.store.SetMFARequired(ctx, subject, required, s.opts.Now()); err != nil {
		return fmt.Errorf("totp: require: %w", err)
	}
	s.opts.Logger.Info("audit", "event", "mfa.require", "sub", subject, "required", required)
	return nil
}

// ---- sealing and codes ----

func (s *Service) seal(subject string, secret []byte) []byte {
	aead := secrets.NewAEAD(s.opts.Secret, "totp-secret")
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, secret, []byte("totp:"+subject))
}

func (s *Service) open(subject string, sealed []byte) ([]byte, error) {
	aead := secrets.NewAEAD(s.opts.Secret, "totp-secret")
	if len(sealed) < aead.NonceSize() {
		return nil, errors.New("totp: sealed secret too short")
	}
	b, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte("totp:"+subject))
	if err != nil {
		return nil, fmt.Errorf("totp: open sealed secret (system secret changed?): %w", err)
	}
	return b, nil
}

// recoveryLen is a normalized recovery code's length: ten characters of
// lower-case base32 (50 bits), shown as two groups of five.
const recoveryLen = 10

var codeAlphabet = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newCodes returns RecoveryCodes new codes (for the user, "xxxxx-xxxxx")
// and their keyed hashes (for storage).
func (s *Service) newCodes(subject string) (codes []string, hashes [][]byte) {
	for range RecoveryCodes {
		var b [7]byte
		_, _ = rand.Read(b[:])
		c := codeAlphabet.EncodeToString(b[:])[:recoveryLen]
		codes = append(codes, c[:5]+"-"+c[5:])
		hashes = append(hashes, s.codeHash(subject, c))
	}
	return codes, hashes
}

func (s *Service) codeHash(subject, normalized string) []byte {
	return secrets.MAC(s.codeKey, []byte(subject), []byte(normalized))
}

// normalize drops spaces and dashes and lower-cases: what people type.
func normalize(code string) string {
	code = strings.ToLower(strings.TrimSpace(code))
	if len(code) > 64 {
		return ""
	}
	return strings.NewReplacer(" ", "", "-", "").Replace(code)
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
