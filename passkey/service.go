package passkey

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"
	fositestorage "github.com/ory/fosite/storage"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/secevent"
	"github.com/authd/authd/storage"
)

// Store is what the Service needs from storage. RevokeSubject is the
// revoking store's (cmd/authd hands in revocation.Store), so removing a
// password drops the replay cache's entries too.
type Store interface {
	storage.PasskeyStore
	GetUser(ctx context.Context, username string) (*storage.User, error)
	GetUserBySubject(ctx context.Context, subject string) (*storage.User, error)
	RevokeSubject(ctx context.Context, subject string) error
	fositestorage.Transactional
}

// Options configure a Service; zero values take the defaults.
type Options struct {
	// CeremonyTTL is how long a challenge can be answered (default 60 s).
	CeremonyTTL time.Duration
	// LinkTTL is how long an enrolment link works (default 15 min).
	LinkTTL time.Duration
	// Logger receives the audit event passkey.clone_suspected (default
	// slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Security, when set, records a sign count that went backwards as the
	// security event sign_count_regression (its one log line and its
	// count) in place of the audit line; nil logs the audit line.
	Security *secevent.Recorder
}

// Defaults.
const (
	DefaultCeremonyTTL = 60 * time.Second
	DefaultLinkTTL     = 15 * time.Minute
	maxNameLen         = 64
	keyCacheSize       = 16384
)

// Service runs the passkey ceremonies and manages users' passkeys. It is
// safe for concurrent use.
type Service struct {
	rp    RelyingParty
	wa    *webauthn.WebAuthn
	store Store
	opts  Options
	keys  *lru.Cache[string, *verifier] // by credential ID (login.go)
}

// New returns the service for rp (which must be Enabled).
func New(rp RelyingParty, store Store, opts Options) (*Service, error) {
	if !rp.Enabled {
		return nil, ErrDisabled
	}
	if opts.CeremonyTTL <= 0 {
		opts.CeremonyTTL = DefaultCeremonyTTL
	}
	if opts.LinkTTL <= 0 {
		opts.LinkTTL = DefaultLinkTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	yes := true
	wa, err := webauthn.New(&webauthn.Config{
		RPID: rp.RPID, RPDisplayName: rp.RPID, RPOrigins: rp.Origins,
		// Issue 24: discoverable credential, user verification required,
		// attestation "none".
		AttestationPreference: protocol.PreferNoAttestation,
		AuthenticatorSelection: protocol.AuthenticatorSelection{
			RequireResidentKey: &yes, ResidentKey: protocol.ResidentKeyRequirementRequired,
			UserVerification: protocol.VerificationRequired,
		},
		Timeouts: webauthn.TimeoutsConfig{
			Login:        webauthn.TimeoutConfig{Enforce: true, Timeout: opts.CeremonyTTL, TimeoutUVD: opts.CeremonyTTL},
			Registration: webauthn.TimeoutConfig{Enforce: true, Timeout: opts.CeremonyTTL, TimeoutUVD: opts.CeremonyTTL},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("passkey: %w", err)
	}
	keys, _ := lru.New[string, *verifier](keyCacheSize)
	return &Service{rp: rp, wa: wa, store: store, opts: opts, keys: keys}, nil
}

// RelyingParty returns the configuration the service runs with.
func (s *Service) RelyingParty() RelyingParty { return s.rp }

// Passkey is a passkey as the Service shows it (the JSON of the admin API
// and the CLI). ID is the credential ID, base64url without padding.
type Passkey struct {
	ID             string     `json:"id"`
	Name           string     `json:"name"`
	AAGUID         string     `json:"aaguid"`
	Transports     []string   `json:"transports"`
	BackupEligible bool       `json:"backup_eligible"`
	BackupState    bool       `json:"backup_state"`
	SignCount      uint32     `json:"sign_count"`
	CreatedAt      time.Time  `json:"created_at"`
	LastUsedAt     *time.Time `json:"last_used_at,omitempty"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
}

func view(p *storage.Passkey) Passkey {
	v := Passkey{ID: base64.RawURLEncoding.EncodeToString(p.ID), Name: p.Name, Transports: p.Transports,
		BackupEligible: p.BackupEligible, BackupState: p.BackupState, SignCount: p.SignCount, CreatedAt: p.CreatedAt}
	if v.Transports == nil {
		v.Transports = []string{}
	}
	if id, err := uuid.FromBytes(p.AAGUID); err == nil {
		v.AAGUID = id.String()
	}
	if !p.LastUsedAt.IsZero() {
		t := p.LastUsedAt
		v.LastUsedAt = &t
	}
	if !p.DisabledAt.IsZero() {
		t := p.DisabledAt
		v.DisabledAt = &t
	}
	return v
}

// waUser is a user as go-webauthn sees it: the user handle is the subject
// (random, stable, no personal data, WebAuthn L3 §5.4.3).
type waUser struct {
	u     *storage.User
	creds []webauthn.Credential
}

func (w waUser) WebAuthnID() []byte                         { return []byte(w.u.Subject) }
func (w waUser) WebAuthnName() string                       { return w.u.Username }
func (w waUser) WebAuthnCredentials() []webauthn.Credential { return w.creds }
func (w waUser) WebAuthnDisplayName() string {
	if w.u.Name != "" {
		return w.u.Name
	}
	return w.u.Username
}

// digest is the SHA-256 of s: how challenges and bindings are stored.
func digest(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// put stores a ceremony's state under its challenge, bound to binding.
func (s *Service) put(ctx context.Context, kind, subject, binding string, sd *webauthn.SessionData) error {
	data, err := json.Marshal(sd)
	if err != nil {
		return fmt.Errorf("passkey: encode ceremony: %w", err)
	}
	err = s.store.PutCeremony(ctx, &storage.Ceremony{Key: digest(sd.Challenge), Kind: kind, Subject: subject,
		Binding: digest(binding), Data: data, ExpiresAt: s.opts.Now().Add(s.opts.CeremonyTTL)})
	if err != nil {
		return fmt.Errorf("passkey: store ceremony: %w", err)
	}
	return nil
}

// take takes the ceremony of challenge (single use) and checks its kind,
// subject and binding.
func (s *Service) take(ctx context.Context, challenge, kind, subject, binding string) (*webauthn.SessionData, error) {
	c, err := s.store.TakeCeremony(ctx, digest(challenge), s.opts.Now())
	return checkCeremony(c, err, kind, subject, binding)
}

// checkCeremony checks a taken ceremony (or the error of taking it).
func checkCeremony(c *storage.Ceremony, err error, kind, subject, binding string) (*webauthn.SessionData, error) {
	if errors.Is(err, storage.ErrNotFound) {
		return nil, ErrCeremony
	}
	if err != nil {
		return nil, fmt.Errorf("passkey: take ceremony: %w", err)
	}
	if c.Kind != kind || subtle.ConstantTimeCompare(c.Binding, digest(binding)) != 1 || (kind == kindRegister && c.Subject != subject) {
		return nil, ErrCeremony
	}
	var sd webauthn.SessionData
	if err := json.Unmarshal(c.Data, &sd); err != nil {
		return nil, fmt.Errorf("passkey: decode ceremony: %w", err)
	}
	return &sd, nil
}

const (
	kindRegister = "register"
	kindLogin    = "login"
)

// BeginEnrol starts adding a passkey for the user subject, bound to
// binding (the browser's session): the options for
// navigator.credentials.create, as JSON ({"publicKey": …}).
func (s *Service) BeginEnrol(ctx context.Context, subject, binding string) ([]byte, error) {
	u, err := s.store.GetUserBySubject(ctx, subject)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, ErrUnknown
	}
	if err != nil {
		return nil, fmt.Errorf("passkey: get user: %w", err)
	}
	existing, err := s.store.ListPasskeys(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("passkey: list: %w", err)
	}
	exclude := make([]protocol.CredentialDescriptor, 0, len(existing))
	for _, p := range existing {
		exclude = append(exclude, protocol.CredentialDescriptor{Type: protocol.PublicKeyCredentialType, CredentialID: p.ID})
	}
	creation, sd, err := s.wa.BeginRegistration(waUser{u: u}, webauthn.WithExclusions(exclude),
		webauthn.WithResidentKeyRequirement(protocol.ResidentKeyRequirementRequired))
	if err != nil {
		return nil, fmt.Errorf("passkey: begin registration: %w", err)
	}
	if err := s.put(ctx, kindRegister, subject, binding, sd); err != nil {
		return nil, err
	}
	return json.Marshal(creation)
}

// FinishEnrol checks the browser's answer to BeginEnrol's options (the
// PublicKeyCredential as JSON) and stores the passkey under name ("" for a
// default). The ceremony is used up whatever the outcome.
func (s *Service) FinishEnrol(ctx context.Context, subject, binding, name string, answer []byte) (Passkey, error) {
	return s.finishEnrol(ctx, subject, binding, name, answer, nil)
}

func (s *Service) finishEnrol(ctx context.Context, subject, binding, name string, answer []byte, inTx func(ctx context.Context) error) (Passkey, error) {
	name, err := checkName(name, s.opts.Now())
	if err != nil {
		return Passkey{}, err
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(answer)
	if err != nil {
		return Passkey{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	sd, err := s.take(ctx, parsed.Response.CollectedClientData.Challenge, kindRegister, subject, binding)
	if err != nil {
		return Passkey{}, err
	}
	u, err := s.store.GetUserBySubject(ctx, subject)
	if errors.Is(err, storage.ErrNotFound) {
		return Passkey{}, ErrUnknown
	}
	if err != nil {
		return Passkey{}, fmt.Errorf("passkey: get user: %w", err)
	}
	if err := s.checkClient(&parsed.Response.CollectedClientData, parsed.Response.AttestationObject.AuthData); err != nil {
		return Passkey{}, err
	}
	cred, err := s.wa.CreateCredential(waUser{u: u}, *sd, parsed)
	if err != nil {
		return Passkey{}, fmt.Errorf("%w: %v", ErrVerification, err)
	}
	p := &storage.Passkey{ID: cred.ID, Subject: subject, PublicKey: cred.PublicKey, SignCount: cred.Authenticator.SignCount,
		AAGUID: cred.Authenticator.AAGUID, BackupEligible: cred.Flags.BackupEligible, BackupState: cred.Flags.BackupState,
		Name: name, CreatedAt: storage.NormalizeTime(s.opts.Now())}
	if len(p.AAGUID) != 16 {
		p.AAGUID = make([]byte, 16)
	}
	for _, t := range cred.Transport {
		p.Transports = append(p.Transports, string(t))
	}
	err = storage.InTx(ctx, s.store, func(ctx context.Context) error {
		if inTx != nil {
			if err := inTx(ctx); err != nil {
				return err
			}
		}
		return s.store.CreatePasskey(ctx, p)
	})
	switch {
	case errors.Is(err, storage.ErrAlreadyExists):
		return Passkey{}, ErrExists
	case errors.Is(err, ErrLink):
		return Passkey{}, err
	case errors.Is(err, storage.ErrNotFound):
		return Passkey{}, ErrUnknown
	case err != nil:
		return Passkey{}, fmt.Errorf("passkey: store: %w", err)
	}
	return view(p), nil
}

// checkName returns the name to store: name trimmed, or a default.
func checkName(name string, now time.Time) (string, error) {
	if name == "" {
		return "Passkey added " + now.UTC().Format("2 Jan 2006"), nil
	}
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > maxNameLen {
		return "", ErrInvalidName
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return "", ErrInvalidName
		}
	}
	return name, nil
}

// parseID decodes a credential ID as shown (base64url).
func parseID(id string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(b) == 0 || len(b) > 1023 {
		return nil, ErrNotFound
	}
	return b, nil
}

// List returns the user's passkeys, oldest first.
func (s *Service) List(ctx context.Context, subject string) ([]Passkey, error) {
	ps, err := s.store.ListPasskeys(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("passkey: list: %w", err)
	}
	out := make([]Passkey, 0, len(ps))
	for _, p := range ps {
		out = append(out, view(p))
	}
	return out, nil
}

// Rename changes the name of the user's passkey id (base64url).
func (s *Service) Rename(ctx context.Context, subject, id, name string) error {
	if name == "" {
		return ErrInvalidName
	}
	name, err := checkName(name, s.opts.Now())
	if err != nil {
		return err
	}
	raw, err := parseID(id)
	if err != nil {
		return err
	}
	err = s.store.RenamePasskey(ctx, subject, raw, name)
	if errors.Is(err, storage.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// Remove deletes the user's passkey id (base64url), unless it is the
// user's last way to sign in (ErrLastMethod). Sessions stay: a session
// does not record which passkey opened it.
func (s *Service) Remove(ctx context.Context, subject, id string) error {
	raw, err := parseID(id)
	if err != nil {
		return err
	}
	err = s.store.DeletePasskey(ctx, subject, raw)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return ErrNotFound
	case errors.Is(err, storage.ErrLastMethod):
		return ErrLastMethod
	case err != nil:
		return fmt.Errorf("passkey: remove: %w", err)
	}
	s.keys.Remove(string(raw))
	return nil
}

// RemovePassword removes the user's password, if they keep an enabled
// passkey (else ErrLastMethod), and in the same transaction ends their
// sessions and revokes their codes and tokens, as a password change does
// (identity.Service.SetPassword): whoever signed in with the password is
// signed out. ErrUnknown for no such user.
func (s *Service) RemovePassword(ctx context.Context, subject string) error {
	err := storage.InTx(ctx, s.store, func(ctx context.Context) error {
		if err := s.store.RemoveUserPassword(ctx, subject); err != nil {
			return err
		}
		return s.store.RevokeSubject(ctx, subject)
	})
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return ErrUnknown
	case errors.Is(err, storage.ErrLastMethod):
		return ErrLastMethod
	case err != nil:
		return fmt.Errorf("passkey: remove password: %w", err)
	}
	return nil
}

func userView(u *storage.User) identity.User {
	return identity.User{Subject: u.Subject, Username: u.Username, Email: u.Email, EmailVerified: u.EmailVerified,
		Name: u.Name, Disabled: u.Disabled, CreatedAt: u.CreatedAt, UpdatedAt: u.UpdatedAt}
}
