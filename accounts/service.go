package accounts

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/mail"
	"strings"
	"time"

	fositestorage "github.com/ory/fosite/storage"

	"github.com/authd/authd/identity"
	amail "github.com/authd/authd/mail"
	"github.com/authd/authd/password"
	"github.com/authd/authd/secrets"
	"github.com/authd/authd/storage"
)

// Store is what the Service needs. RevokeSubject must be the one that also
// drops replay cache entries (revocation.Store), as for identity.
type Store interface {
	storage.UserStore
	storage.AccountFlowStore
	fositestorage.Transactional
}

// Outbox is where messages go: in the caller's transaction.
type Outbox interface {
	Enqueue(ctx context.Context, m amail.Message) (int64, error)
}

// Defaults.
const (
	CodeTTL         = 15 * time.Minute
	MaxCodeAttempts = 5
	ReauthWindow    = 5 * time.Minute
	formTokenMinLen = 16
	linkTokenBytes  = 32
)

// Config configures a Service.
type Config struct {
	Secret []byte
	Store  Store
	// Outbox is nil when no mail can be sent: deletion works without its
	// confirmation; sign-up, recovery and email change, which prove an
	// address by a code sent to it, are off (MailEnabled).
	Outbox Outbox
	// People authenticates a re-authentication (deletion); Passwords
	// hashes new passwords (the process's shared hasher).
	People    *identity.Service
	Passwords *password.Hasher
	// LinkBase is the absolute URL the links in mail start with (the
	// issuer): a link is LinkBase + "/signup/verify?…".
	LinkBase string
	// Signup enables sign-up (AUTHD_SIGNUP); Recovery enables password
	// recovery (AUTHD_PASSWORD_RECOVERY).
	Signup, Recovery bool
	// Limits bound mail, sign-ups and guesses; nil is NewLimits(LimitConfig{}).
	Limits *Limits
	Logger *slog.Logger
	Now    func() time.Time
}

// Service runs the self-service steps. It is safe for concurrent use.
type Service struct {
	cfg     Config
	codeKey []byte
	formKey []byte
	decoy   []byte // a hash that no code matches (flows that must not verify)
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if len(cfg.Secret) < secrets.MinLen || cfg.Store == nil || cfg.People == nil {
		return nil, errors.New("accounts: secret, store and people are required")
	}
	if cfg.Outbox == nil && (cfg.Signup || cfg.Recovery) {
		return nil, errors.New("accounts: sign-up and recovery send a code by mail: they need an outbox")
	}
	if cfg.Passwords == nil {
		cfg.Passwords = password.Default()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Limits == nil {
		cfg.Limits = NewLimits(LimitConfig{})
	}
	cfg.LinkBase = strings.TrimRight(cfg.LinkBase, "/")
	return &Service{cfg: cfg, codeKey: secrets.Derive(cfg.Secret, "accounts/code"),
		formKey: secrets.Derive(cfg.Secret, "accounts/form")}, nil
}

// SignupEnabled and RecoveryEnabled report the switches; MailEnabled
// reports whether mail can be sent (an Outbox), which email change needs.
func (s *Service) SignupEnabled() bool   { return s.cfg.Signup }
func (s *Service) RecoveryEnabled() bool { return s.cfg.Recovery }
func (s *Service) MailEnabled() bool     { return s.cfg.Outbox != nil }

// Errors. Compare with errors.Is; the pages (package accountweb) put
// them in words.
var (
	// ErrDisabled: the step is switched off.
	ErrDisabled = errors.New("accounts: switched off")
	// ErrInvalidEmail: not one address.
	ErrInvalidEmail = errors.New("accounts: not one email address")
	// ErrInvalidForm: the form's one-time token is missing or malformed
	// (a page from elsewhere).
	ErrInvalidForm = errors.New("accounts: invalid form token")
	// ErrWrongCode: the code or link does not match (and guesses remain).
	ErrWrongCode = errors.New("accounts: wrong code")
	// ErrCodeExpired: no guesses left, too old, or unknown.
	ErrCodeExpired = errors.New("accounts: code expired")
	// ErrCodeUsed: the flow's code was used already (a repeated form).
	ErrCodeUsed = errors.New("accounts: code already used")
	// ErrAddressTaken: at verification, the address has an account (it was
	// created meanwhile): told only to whoever holds the code.
	ErrAddressTaken = errors.New("accounts: address taken")
	// ErrEmailInUse: at an email change's verification, another account
	// has the address (as its email or username): the old address stays.
	ErrEmailInUse = errors.New("accounts: address used by another account")
	// ErrReauth: deletion needs a sign-in within ReauthWindow: the
	// password must be entered again.
	ErrReauth = errors.New("accounts: re-authentication required")
	// ErrWrongPassword: the re-authentication failed.
	ErrWrongPassword = errors.New("accounts: wrong password")
)

// Pending is the answer to a step that sent a code: the flow to verify
// and the address it went to. It is the same whether or not an account
// has the address.
type Pending struct {
	Flow  string
	Email string
}

// App names the app a step came from, for the mail and the return.
type App struct {
	ClientID string
	Name     string
	// ReturnTo is the authorization request to continue (a local path).
	ReturnTo string
}

// prepareEmail checks that addr is one address and returns it and the
// username it maps to (PRECIS, as an operator's users).
func prepareEmail(addr string) (email, username string, err error) {
	addr = strings.TrimSpace(addr)
	a, perr := mail.ParseAddress(addr)
	if perr != nil || a.Name != "" || a.Address != addr || len(addr) > 254 || strings.ContainsAny(addr, " \t<>") {
		return "", "", ErrInvalidEmail
	}
	u, err := identity.PrepareUsername(addr)
	if err != nil {
		return "", "", ErrInvalidEmail
	}
	return addr, u, nil
}

// formFlowID is the flow ID of a form's one-time token: a keyed hash, so
// the same form posted twice names the same row and a forged token names
// nobody's.
func (s *Service) formFlowID(purpose, token string) (string, error) {
	if len(token) < formTokenMinLen || len(token) > 128 {
		return "", ErrInvalidForm
	}
	return hex.EncodeToString(secrets.MAC(s.formKey, []byte(purpose), []byte(token))[:20]), nil
}

// NewFormToken returns a one-time token for a form that starts a flow.
func NewFormToken() string { return randomToken(24) }

// newFlowID returns a random flow ID (flows not started by a form).
func newFlowID() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24).
	return base64.RawURLEncoding.EncodeToString(b)
}

// newCode returns a uniform 6-digit code.
func newCode() string {
	n, _ := rand.Int(rand.Reader, big.NewInt(1_000_000))
	return fmt.Sprintf("%06d", n.Int64())
}

// hash is the keyed hash of a code or link token of flow id.
func (s *Service) hash(id, kind, value string) []byte {
	return secrets.MAC(s.codeKey, []byte(id), []byte(kind), []byte(value))
}

// secretsFor returns a fresh code and link token for flow id and their
// hashes; live is false for a flow that must never verify (its hashes
// are of values nobody gets).
func (s *Service) secretsFor(f *storage.AccountFlow, live bool) (code, token string) {
	code, token = newCode(), randomToken(linkTokenBytes)
	f.CodeHash, f.LinkHash = s.hash(f.ID, "code", code), s.hash(f.ID, "link", token)
	if !live {
		f.CodeHash, f.LinkHash = s.hash(f.ID, "code", randomToken(16)), s.hash(f.ID, "link", randomToken(32))
		code, token = "", ""
	}
	return code, token
}

// link is the URL of a flow's link in mail.
func (s *Service) link(path, id, token string) string {
	return s.cfg.LinkBase + path + "?flow=" + id + "&token=" + token
}

// Proof is what a person presents for a flow: the code typed, or the
// link's token.
type Proof struct {
	Code  string
	Token string
}

// check counts a guess at flow id and compares the proof with the stored
// hashes in constant time. It returns the flow when it matches.
func (s *Service) check(ctx context.Context, id, purpose string, p Proof) (*storage.AccountFlow, error) {
	if id == "" || len(id) > 64 || (p.Code == "" && p.Token == "") {
		return nil, ErrWrongCode
	}
	f, err := s.cfg.Store.AttemptAccountFlow(ctx, id, s.cfg.Now(), MaxCodeAttempts)
	if errors.Is(err, storage.ErrNotFound) {
		// Only the message differs: a used code is a repeated form, which
		// the page answers with where to go on.
		if g, gerr := s.cfg.Store.GetAccountFlow(ctx, id); gerr == nil && !g.UsedAt.IsZero() {
			return nil, ErrCodeUsed
		}
		return nil, ErrCodeExpired
	}
	if err != nil {
		return nil, err
	}
	if f.Purpose != purpose {
		return nil, ErrCodeExpired
	}
	// Guesses per account (address), across its flows.
	if err := s.cfg.Limits.Allow(ctx, LimitCodeAccount, strings.ToLower(f.Email)); err != nil {
		return nil, err
	}
	var ok bool
	if p.Token != "" {
		ok = hmac.Equal(s.hash(id, "link", p.Token), f.LinkHash)
	} else {
		ok = hmac.Equal(s.hash(id, "code", strings.TrimSpace(p.Code)), f.CodeHash)
	}
	if !ok {
		if f.Attempts >= MaxCodeAttempts {
			return nil, ErrCodeExpired
		}
		return nil, ErrWrongCode
	}
	return f, nil
}

// use marks the flow used inside tx, or fails with ErrCodeUsed (a
// concurrent use won).
func (s *Service) use(tx context.Context, id string) error {
	ok, err := s.cfg.Store.UseAccountFlow(tx, id, s.cfg.Now())
	if err != nil {
		return err
	}
	if !ok {
		return ErrCodeUsed // a concurrent use won
	}
	return nil
}

// audit logs an audit event; never a code, token or password.
func (s *Service) audit(ctx context.Context, event string, attrs ...any) {
	s.cfg.Logger.InfoContext(ctx, "audit", append([]any{"event", event}, attrs...)...)
}
