package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/authd/authd/pagecursor"
	"github.com/authd/authd/storage"
)

// Session is a browser session as the Service shows it: never its
// reference (which only the browser's cookie holds).
type Session struct {
	// ID is the stored identifier (the SHA-256 of the reference); codes and
	// tokens record it as "sid".
	ID            string    `json:"id"`
	Subject       string    `json:"sub"`
	AuthTime      time.Time `json:"auth_time"`
	AMR           []string  `json:"amr"`
	IdleExpiresAt time.Time `json:"idle_expires_at"`
	ExpiresAt     time.Time `json:"expires_at"`
	CreatedAt     time.Time `json:"created_at"`
	LastSeenAt    time.Time `json:"last_seen_at"`
}

func viewSession(x *storage.Session) Session {
	return Session{ID: x.ID, Subject: x.Subject, AuthTime: x.AuthTime, AMR: x.AMR, IdleExpiresAt: x.IdleExpiresAt,
		ExpiresAt: x.ExpiresAt, CreatedAt: x.CreatedAt, LastSeenAt: x.LastSeenAt}
}

// refLen is the number of random bytes in a session reference (256 bits).
const refLen = 32

// sessionID is the stored ID of a reference: SHA-256, hex. A fast hash is
// right here: the reference has 256 bits of entropy, so it cannot be
// guessed from its hash, and a database dump yields no usable cookie.
func sessionID(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return hex.EncodeToString(sum[:])
}

// StartSession opens a session for the user who just authenticated with
// the methods amr (RFC 8176, e.g. "pwd"), and returns the reference to put
// in the cookie, and the session.
func (s *Service) StartSession(ctx context.Context, subject string, amr []string) (string, Session, error) {
	return s.StartSessionAt(ctx, subject, amr, time.Time{})
}

// StartSessionAt is StartSession for a user who authenticated at authTime
// (an upstream provider's auth_time, say); zero, or a time after now,
// means now.
func (s *Service) StartSessionAt(ctx context.Context, subject string, amr []string, authTime time.Time) (string, Session, error) {
	ref, x, err := s.openSession(ctx, subject, amr, authTime)
	if err != nil {
		return "", Session{}, err
	}
	s.TrimSessions(ctx, subject)
	return ref, x, nil
}

// OpenSession is StartSessionAt for a caller that keeps no cookie and
// holds a transaction (the authorization challenge endpoint): the session
// row only. The caller calls TrimSessions after its commit: two sign-ins
// of one user trimming each other's rows inside their transactions would
// deadlock.
func (s *Service) OpenSession(ctx context.Context, subject string, amr []string, authTime time.Time) (Session, error) {
	_, x, err := s.openSession(ctx, subject, amr, authTime)
	return x, err
}

// TrimSessions ends the user's oldest sessions beyond the cap (their apps
// are told, as for any session's end). A failure leaves more sessions for
// a while, never fewer, and the next sign-in trims again.
func (s *Service) TrimSessions(ctx context.Context, subject string) {
	if _, err := s.store.TrimSessions(ctx, subject, s.opts.MaxSessions); err != nil {
		s.opts.Logger.Warn("identity: trim sessions", "error", err)
	}
}

func (s *Service) openSession(ctx context.Context, subject string, amr []string, authTime time.Time) (string, Session, error) {
	var b [refLen]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24).
	ref := base64.RawURLEncoding.EncodeToString(b[:])
	now := storage.NormalizeTime(s.opts.Now())
	at := now
	if !authTime.IsZero() && authTime.Before(now) {
		at = storage.NormalizeTime(authTime)
	}
	x := &storage.Session{ID: sessionID(ref), Subject: subject, AuthTime: at, AMR: amr,
		IdleExpiresAt: now.Add(s.opts.SessionIdleTTL), ExpiresAt: now.Add(s.opts.SessionTTL),
		CreatedAt: now, LastSeenAt: now}
	if err := s.store.CreateSession(ctx, x); err != nil {
		return "", Session{}, fmt.Errorf("identity: start session: %w", err)
	}
	return ref, viewSession(x), nil
}

// ResumeSession returns the valid session a cookie's reference names,
// without changing it (a plain read). An unknown, ended or expired
// reference, or a disabled user, gives ErrNoSession.
func (s *Service) ResumeSession(ctx context.Context, ref string) (Session, error) {
	if len(ref) != base64.RawURLEncoding.EncodedLen(refLen) {
		return Session{}, ErrNoSession
	}
	x, err := s.store.GetSession(ctx, sessionID(ref), s.opts.Now())
	if errors.Is(err, storage.ErrNotFound) {
		return Session{}, ErrNoSession
	}
	if err != nil {
		return Session{}, fmt.Errorf("identity: resume session: %w", err)
	}
	return viewSession(x), nil
}

// ResumeSessionUser is ResumeSession with the session's user, read
// together (one round trip): ErrNoSession for no valid session (ended,
// expired, or its user disabled).
func (s *Service) ResumeSessionUser(ctx context.Context, ref string) (Session, User, error) {
	x, u, _, err := s.ResumeSessionFor(ctx, ref, "")
	return x, u, err
}

// ResumeSessionFor is ResumeSessionUser with the user's remembered consent
// for clientID (nil when there is none), read together: what an
// authorization request needs (Consent.Covers). An empty clientID reads
// no consent. Errors as ResumeSessionUser.
func (s *Service) ResumeSessionFor(ctx context.Context, ref, clientID string) (Session, User, *Consent, error) {
	x, u, c, _, err := s.ResumeSignIn(ctx, ref, clientID)
	return x, u, c, err
}

// Factors are a user's second factors and whether an operator requires
// one (RequireMFA), as the sign-in decision asks them of a session below
// two factors.
type Factors struct {
	TOTP     bool // a confirmed authenticator app
	Passkey  bool // a passkey that is not disabled
	Required bool // an operator requires a second factor
}

// ResumeSignIn is ResumeSessionFor with the user's second factors, read in
// the same query (a returning user's sign-in is one read); with an empty
// clientID the factors are not read (zero). Errors as ResumeSessionUser.
func (s *Service) ResumeSignIn(ctx context.Context, ref, clientID string) (Session, User, *Consent, Factors, error) {
	if len(ref) != base64.RawURLEncoding.EncodedLen(refLen) {
		return Session{}, User{}, nil, Factors{}, ErrNoSession
	}
	var (
		x   *storage.Session
		u   *storage.User
		c   *storage.Consent
		f   storage.UserFactors
		err error
	)
	if clientID == "" {
		x, u, err = s.store.GetSessionUser(ctx, sessionID(ref), s.opts.Now())
	} else {
		x, u, c, f, err = s.store.GetSessionUserConsent(ctx, sessionID(ref), clientID, s.opts.Now())
	}
	if errors.Is(err, storage.ErrNotFound) {
		return Session{}, User{}, nil, Factors{}, ErrNoSession
	}
	if err != nil {
		return Session{}, User{}, nil, Factors{}, fmt.Errorf("identity: resume session: %w", err)
	}
	var consent *Consent
	if c != nil {
		v := viewConsent(c)
		consent = &v
	}
	return viewSession(x), view(u), consent, Factors{TOTP: f.TOTP, Passkey: f.Passkey, Required: f.MFARequired}, nil
}

// UseSession marks the session used (its idle expiry moves forward) and
// confirms it is still valid, or returns ErrNoSession. Run it in the
// transaction that stores a code: in PostgreSQL it waits for a concurrent
// sign-out, disable or password change of the user and then fails, so a
// code is never committed for a session that ended meanwhile. A clientID
// other than "" is being issued a code with openid: the session records
// it in the same write, so that the session's end sends it a back-channel
// logout (storage.SessionStore.TouchSession).
func (s *Service) UseSession(ctx context.Context, sessionID, clientID string) error {
	_, err := s.store.TouchSession(ctx, sessionID, clientID, s.opts.Now(), s.opts.SessionIdleTTL)
	if errors.Is(err, storage.ErrNotFound) {
		return ErrNoSession
	}
	if err != nil {
		return fmt.Errorf("identity: use session: %w", err)
	}
	return nil
}

// EndSession ends the session a reference names (sign-out in this
// browser). Ending an unknown session succeeds.
func (s *Service) EndSession(ctx context.Context, ref string) error {
	if err := s.store.DeleteSession(ctx, sessionID(ref)); err != nil {
		return fmt.Errorf("identity: end session: %w", err)
	}
	return nil
}

// Sessions lists the user's valid sessions, newest first.
func (s *Service) Sessions(ctx context.Context, username string) ([]Session, error) {
	u, err := s.lookup(ctx, username)
	if err != nil {
		return nil, err
	}
	xs, err := s.store.ListSessions(ctx, u.Subject, s.opts.Now())
	if err != nil {
		return nil, fmt.Errorf("identity: list sessions: %w", err)
	}
	out := make([]Session, 0, len(xs))
	for _, x := range xs {
		out = append(out, viewSession(x))
	}
	return out, nil
}

// SessionPage is one page of a user's valid sessions, newest first, and
// the opaque cursor of the next page (absent on the last).
type SessionPage struct {
	Sessions   []Session `json:"sessions"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// SessionsPage returns up to limit (0 is DefaultPageLimit; at most
// MaxPageLimit) of the user's valid sessions after cursor, newest first.
// Errors: ErrUserNotFound, ErrInvalidLimit, ErrInvalidCursor. A user has
// at most Options.MaxSessions sessions, so the page is cut from one read.
func (s *Service) SessionsPage(ctx context.Context, username string, limit int, cursor string) (SessionPage, error) {
	if limit == 0 {
		limit = DefaultPageLimit
	}
	if limit < 1 || limit > MaxPageLimit {
		return SessionPage{}, ErrInvalidLimit
	}
	u, err := s.lookup(ctx, username)
	if err != nil {
		return SessionPage{}, err
	}
	list := "sessions:" + u.Subject
	after, ok := pagecursor.Decode(list, cursor)
	if !ok {
		return SessionPage{}, ErrInvalidCursor
	}
	xs, err := s.store.ListSessions(ctx, u.Subject, s.opts.Now())
	if err != nil {
		return SessionPage{}, fmt.Errorf("identity: list sessions: %w", err)
	}
	page := SessionPage{Sessions: []Session{}}
	var last *storage.Session
	for _, x := range xs {
		if after != "" && sessionKey(x) >= after {
			continue // on an earlier page: keys fall along the list
		}
		if len(page.Sessions) == limit {
			page.NextCursor = pagecursor.Encode(list, sessionKey(last))
			break
		}
		page.Sessions = append(page.Sessions, viewSession(x))
		last = x
	}
	return page, nil
}

// sessionKey orders sessions as ListSessions does (newest first, then
// id): a larger key comes earlier. Fixed width, so strings compare as
// the order does.
func sessionKey(x *storage.Session) string {
	return fmt.Sprintf("%020d", x.CreatedAt.UnixNano()) + "|" + invertID(x.ID)
}

// invertID maps an id so that a smaller id has a larger key (ListSessions
// puts the smaller id first among equal times).
func invertID(id string) string {
	b := []byte(id)
	for i := range b {
		b[i] = 0xff - b[i]
	}
	return fmt.Sprintf("%x", b)
}

// SignOut ends every session of the user, everywhere, and returns how many
// there were. Tokens already issued stay valid (use Disable or SetPassword
// to end those too).
func (s *Service) SignOut(ctx context.Context, username string) (int, error) {
	u, err := s.lookup(ctx, username)
	if err != nil {
		return 0, err
	}
	n, err := s.store.EndSessions(ctx, u.Subject)
	if err != nil {
		return 0, fmt.Errorf("identity: sign out: %w", err)
	}
	return n, nil
}

// RaiseSession records on a valid session that it proved more (a second
// factor: amr such as "otp" and "mfa", RFC 8176), now: the session's
// auth_time becomes now, as a factor proven is an authentication (OpenID
// Connect Core §2). ErrNoSession if it is not valid. The user's other
// sessions stay as they were.
func (s *Service) RaiseSession(ctx context.Context, sessionID string, amr []string) (Session, error) {
	now := storage.NormalizeTime(s.opts.Now())
	x, err := s.store.RaiseSession(ctx, sessionID, amr, now, now)
	if errors.Is(err, storage.ErrNotFound) {
		return Session{}, ErrNoSession
	}
	if err != nil {
		return Session{}, fmt.Errorf("identity: raise session: %w", err)
	}
	return viewSession(x), nil
}
