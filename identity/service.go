package identity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	fositestorage "github.com/ory/fosite/storage"
	"golang.org/x/text/secure/precis"

	"github.com/authd/authd/password"
	"github.com/authd/authd/storage"
)

// Store is what the Service needs from storage.
type Store interface {
	storage.UserStore
	storage.SessionStore
	storage.ConsentStore
	fositestorage.Transactional
	// RaiseSession is storage.FactorStore's (RaiseSession).
	RaiseSession(ctx context.Context, id string, amr []string, authTime, now time.Time) (*storage.Session, error)
	factorStore // factors.go
}

// Options configure a Service; zero values take the documented defaults.
type Options struct {
	// SessionTTL is the absolute lifetime of a browser session
	// (default 12h).
	SessionTTL time.Duration
	// SessionIdleTTL ends a session unused for that long (default 2h,
	// never more than SessionTTL).
	SessionIdleTTL time.Duration
	// Passwords hashes new passwords (argon2id) and verifies stored ones
	// (argon2id or bcrypt), holding one of its slots for each (default
	// password.Default(), shared by the process; tests pass one with cheap
	// parameters).
	Passwords *password.Hasher
	// Logger receives the warning when a sign-in's rehash cannot be
	// stored (default slog.Default()). It never receives a password or a
	// hash.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MaxSessions caps a user's browser sessions (default
	// DefaultMaxSessions): a new sign-in ends the oldest beyond it.
	MaxSessions int
}

// Default session lifetimes.
const (
	DefaultSessionTTL     = 12 * time.Hour
	DefaultSessionIdleTTL = 2 * time.Hour
	DefaultMaxSessions    = 50
)

// Service manages users, sessions and consents. It is safe for concurrent
// use.
type Service struct {
	store Store
	opts  Options
	decoy []byte // verified when the user is unknown (password.Hasher.Decoy)
}

// New returns a Service on store.
func New(store Store, opts Options) *Service {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.SessionIdleTTL <= 0 {
		opts.SessionIdleTTL = DefaultSessionIdleTTL
	}
	if opts.SessionIdleTTL > opts.SessionTTL {
		opts.SessionIdleTTL = opts.SessionTTL
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.Passwords == nil {
		opts.Passwords = password.Default()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{store: store, opts: opts, decoy: opts.Passwords.Decoy()}
}

// User is a user as the Service shows it: never the password hash.
type User struct {
	Subject       string    `json:"sub"`
	Username      string    `json:"username"`
	Email         string    `json:"email,omitempty"`
	EmailVerified bool      `json:"email_verified"`
	Name          string    `json:"name,omitempty"`
	Disabled      bool      `json:"disabled"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func view(u *storage.User) User {
	return User{Subject: u.Subject, Username: u.Username, Email: u.Email, EmailVerified: u.EmailVerified,
		Name: u.Name, Disabled: u.Disabled, CreatedAt: u.CreatedAt, UpdatedAt: u.UpdatedAt}
}

// NewUser is the input of Add. The JSON names are the request's canonical
// form under an Idempotency-Key (Admin.Create).
type NewUser struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Email         string `json:"email,omitempty"`
	EmailVerified bool   `json:"email_verified,omitempty"`
	Name          string `json:"name,omitempty"`
	// NoPassword creates a user without a password (a passkey-only user,
	// who enrols through a passkey-link; the admin API's
	// "password": null); Password must then be empty.
	NoPassword bool `json:"no_password,omitempty"`
}

// Add creates a user with a new random subject. Errors: ErrInvalidUsername,
// ErrInvalidPassword, ErrInvalidProfile, ErrUserExists.
func (s *Service) Add(ctx context.Context, in NewUser) (User, error) {
	name, err := PrepareUsername(in.Username)
	if err != nil {
		return User{}, err
	}
	var hash []byte
	switch {
	case in.NoPassword && in.Password != "":
		return User{}, fmt.Errorf("%w: a password was given for a user without one", ErrInvalidPassword)
	case !in.NoPassword:
		if hash, err = s.hash(ctx, in.Password); err != nil {
			return User{}, err
		}
	}
	if err := checkProfile(in.Email, in.Name); err != nil {
		return User{}, err
	}
	now := storage.NormalizeTime(s.opts.Now())
	u := &storage.User{Username: name, PasswordHash: hash, Email: in.Email, EmailVerified: in.EmailVerified,
		Name: in.Name, CreatedAt: now, UpdatedAt: now}
	if err := s.store.CreateUser(ctx, u); err != nil {
		if errors.Is(err, storage.ErrAlreadyExists) {
			return User{}, fmt.Errorf("%w: %q", ErrUserExists, name)
		}
		return User{}, fmt.Errorf("identity: add user: %w", err)
	}
	return view(u), nil
}

// hash prepares password and hashes it (argon2id); it waits for a hashing
// slot, so its error may be ctx's.
func (s *Service) hash(ctx context.Context, password string) ([]byte, error) {
	p, err := PreparePassword(password)
	if err != nil {
		return nil, err
	}
	hash, err := s.opts.Passwords.Hash(ctx, []byte(p))
	if err != nil {
		return nil, fmt.Errorf("identity: hash password: %w", err)
	}
	return hash, nil
}

// lookup returns the stored user named username (prepared first).
func (s *Service) lookup(ctx context.Context, username string) (*storage.User, error) {
	name, err := PrepareUsername(username)
	if err != nil {
		return nil, err
	}
	u, err := s.store.GetUser(ctx, name)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrUserNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("identity: get user: %w", err)
	}
	return u, nil
}

// Get returns the user named username (any spelling PRECIS maps to it).
// Errors: ErrInvalidUsername, ErrUserNotFound.
func (s *Service) Get(ctx context.Context, username string) (User, error) {
	u, err := s.lookup(ctx, username)
	if err != nil {
		return User{}, err
	}
	return view(u), nil
}

// GetBySubject returns the user with this subject, or ErrUserNotFound.
func (s *Service) GetBySubject(ctx context.Context, subject string) (User, error) {
	u, err := s.store.GetUserBySubject(ctx, subject)
	if errors.Is(err, storage.ErrNotFound) {
		return User{}, ErrUserNotFound
	}
	if err != nil {
		return User{}, fmt.Errorf("identity: get user: %w", err)
	}
	return view(u), nil
}

// List returns up to limit (1–200, default 50) users after the username
// after, in username order.
func (s *Service) List(ctx context.Context, after string, limit int) ([]User, error) {
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 200)
	us, err := s.store.ListUsers(ctx, after, limit)
	if err != nil {
		return nil, fmt.Errorf("identity: list users: %w", err)
	}
	out := make([]User, 0, len(us))
	for _, u := range us {
		out = append(out, view(u))
	}
	return out, nil
}

// Rename changes the username; the subject, and so every token, session
// and consent, stays. Errors: ErrInvalidUsername, ErrUserNotFound,
// ErrUserExists.
func (s *Service) Rename(ctx context.Context, oldName, newName string) (User, error) {
	u, err := s.lookup(ctx, oldName)
	if err != nil {
		return User{}, err
	}
	name, err := PrepareUsername(newName)
	if err != nil {
		return User{}, err
	}
	if err := s.store.RenameUser(ctx, u.Subject, name); err != nil {
		switch {
		case errors.Is(err, storage.ErrAlreadyExists):
			return User{}, fmt.Errorf("%w: %q", ErrUserExists, name)
		case errors.Is(err, storage.ErrNotFound):
			return User{}, fmt.Errorf("%w: %q", ErrUserNotFound, oldName)
		}
		return User{}, fmt.Errorf("identity: rename user: %w", err)
	}
	return s.GetBySubject(ctx, u.Subject)
}

// SetProfile replaces the profile fields. Errors: ErrInvalidProfile,
// ErrUserNotFound.
func (s *Service) SetProfile(ctx context.Context, username, email string, emailVerified bool, name string) (User, error) {
	if err := checkProfile(email, name); err != nil {
		return User{}, err
	}
	u, err := s.lookup(ctx, username)
	if err != nil {
		return User{}, err
	}
	u.Email, u.EmailVerified, u.Name = email, emailVerified, name
	if err := s.store.UpdateUserProfile(ctx, u); err != nil {
		return User{}, fmt.Errorf("identity: set profile: %w", err)
	}
	return s.GetBySubject(ctx, u.Subject)
}

// endAccess runs write on the user and RevokeSubject in one transaction.
func (s *Service) endAccess(ctx context.Context, op, username string, write func(ctx context.Context, subject string) error) (User, error) {
	u, err := s.lookup(ctx, username)
	if err != nil {
		return User{}, err
	}
	err = storage.InTx(ctx, s.store, func(tx context.Context) error {
		if err := write(tx, u.Subject); err != nil {
			return err
		}
		return s.store.RevokeSubject(tx, u.Subject)
	})
	if errors.Is(err, storage.ErrNotFound) {
		return User{}, fmt.Errorf("%w: %q", ErrUserNotFound, u.Username)
	}
	if err != nil {
		return User{}, fmt.Errorf("identity: %s: %w", op, err)
	}
	return view(u), nil
}

// SetPassword replaces the password and, in the same transaction, ends the
// user's sessions and revokes their codes and tokens. Errors:
// ErrInvalidPassword, ErrUserNotFound.
func (s *Service) SetPassword(ctx context.Context, username, password string) (User, error) {
	hash, err := s.hash(ctx, password)
	if err != nil {
		return User{}, err
	}
	return s.endAccess(ctx, "set password", username, func(tx context.Context, sub string) error {
		return s.store.SetUserPassword(tx, sub, hash)
	})
}

// Disable stops the user from signing in and, in the same transaction,
// ends their sessions and revokes their codes and tokens.
func (s *Service) Disable(ctx context.Context, username string) (User, error) {
	u, err := s.endAccess(ctx, "disable user", username, func(tx context.Context, sub string) error {
		return s.store.SetUserDisabled(tx, sub, true)
	})
	u.Disabled = err == nil
	return u, err
}

// Enable lets a disabled user sign in again (nothing revoked comes back).
func (s *Service) Enable(ctx context.Context, username string) (User, error) {
	u, err := s.lookup(ctx, username)
	if err != nil {
		return User{}, err
	}
	if err := s.store.SetUserDisabled(ctx, u.Subject, false); err != nil {
		return User{}, fmt.Errorf("identity: enable user: %w", err)
	}
	return s.GetBySubject(ctx, u.Subject)
}

// Delete deletes the user, their sessions and consents, and revokes their
// codes and tokens, in one transaction. The username is free again; a user
// added under it gets a new subject and none of the old grants.
func (s *Service) Delete(ctx context.Context, username string) (User, error) {
	return s.endAccess(ctx, "delete user", username, func(tx context.Context, sub string) error {
		return s.store.DeleteUser(tx, sub)
	})
}

// Authenticate checks a sign-in. Unknown user, wrong password and disabled
// user all return ErrInvalidCredentials, after the same hashing work (an
// unknown user's password is verified against the Hasher's decoy). The
// stored hash may be argon2id or bcrypt; after a successful sign-in with a
// hash that password.Hasher.NeedsRehash (bcrypt, or other argon2id
// parameters), the password is rehashed and stored only if the stored hash
// is still the one verified (storage's UpgradePasswordHash): a password
// changed meanwhile stays. A failed upgrade is logged and the sign-in still
// succeeds. Other errors: the store's (storage.ErrUnavailable), or ctx's if
// it ends while the check waits for a hashing slot.
func (s *Service) Authenticate(ctx context.Context, username, pass string) (User, error) {
	hash := s.decoy
	u, lookupErr := s.lookup(ctx, username)
	if lookupErr == nil && len(u.PasswordHash) > 0 { // none: a passkey-only user, checked against the decoy
		hash = u.PasswordHash
	} else if lookupErr != nil && !errors.Is(lookupErr, ErrUserNotFound) && !errors.Is(lookupErr, ErrInvalidUsername) {
		return User{}, lookupErr
	}
	p, perr := precis.OpaqueString.String(pass)
	if perr != nil {
		p = pass // still do the hashing work; the result is refused below
	}
	verr := s.opts.Passwords.Verify(ctx, hash, []byte(p))
	switch {
	case errors.Is(verr, context.Canceled), errors.Is(verr, context.DeadlineExceeded):
		return User{}, fmt.Errorf("identity: authenticate: %w", verr) // gave up waiting for a slot
	case lookupErr == nil && errors.Is(verr, password.ErrMalformed):
		s.opts.Logger.WarnContext(ctx, "stored password hash is not usable; the user cannot sign in until a new password is set",
			"sub", u.Subject, "error", verr)
	}
	if lookupErr != nil || perr != nil || verr != nil || u.Disabled || len(u.PasswordHash) == 0 {
		return User{}, ErrInvalidCredentials
	}
	if s.opts.Passwords.NeedsRehash(hash) {
		s.upgrade(ctx, u, []byte(p))
	}
	return view(u), nil
}

// upgrade stores a new hash of the (verified, prepared) password p in place
// of u.PasswordHash, if that is still the stored one. Failures are logged
// without the hash; the sign-in they follow stands.
func (s *Service) upgrade(ctx context.Context, u *storage.User, p []byte) {
	newHash, err := s.opts.Passwords.Hash(ctx, p)
	if err == nil {
		var ok bool
		ok, err = s.store.UpgradePasswordHash(ctx, u.Subject, u.PasswordHash, newHash)
		if err == nil && ok {
			u.PasswordHash = newHash
		}
	}
	if err != nil {
		s.opts.Logger.WarnContext(ctx, "password hash not upgraded after sign-in; retried at the next one",
			"sub", u.Subject, "error", err)
	}
}
