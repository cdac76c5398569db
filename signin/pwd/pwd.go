// Package pwd is the password sign-in method (signin.Method): a username
// and password checked by the identity service (argon2id, the hashing
// bound, a decoy for unknown users: identity.Service.Authenticate), behind
// a back-off on failures per username and per client address (limits.go).
//
// It never tells whether an account exists: unknown user, wrong password
// and disabled user are one answer after the same work. It never logs a
// password.
package pwd

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/limits"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/storage"
)

// Name is the method's name: the login form's method field ("password" is
// also what a form that names no method means).
const Name = "password"

// Authenticator checks a username and password (identity.Service).
type Authenticator interface {
	Authenticate(ctx context.Context, username, password string) (identity.User, error)
}

// Options configure the method; zero values take the defaults.
type Options struct {
	// Limits slow down failed sign-ins (oauth.Config.LoginLimits).
	Limits Limits
	// Budgets keeps the back-off (shared by every replica when it has a
	// Redis); nil keeps it in this process.
	Budgets *limits.Limiter
	// Logger receives unexpected failures (default slog.Default()).
	Logger *slog.Logger
	// Now is the back-off's clock (default time.Now).
	Now func() time.Time
}

// Method is the password method. Create it with New.
type Method struct {
	people Authenticator
	limit  *loginLimiter
	log    *slog.Logger
}

var _ signin.Method = (*Method)(nil)

// New returns the password method over people.
func New(people Authenticator, o Options) *Method {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Method{people: people, limit: newLoginLimiter(o.Limits, o.Budgets, o.Now), log: o.Logger}
}

// Name implements signin.Method.
func (m *Method) Name() string { return Name }

//go:embed form.html
var formHTML string

var form = template.Must(template.New("password").Parse(formHTML))

// Render implements signin.Method: the username and password form.
func (m *Method) Render(_ context.Context, p signin.Page) template.HTML {
	var b bytes.Buffer
	if err := form.Execute(&b, p); err != nil {
		m.log.Error("render password form", "error", err)
		return ""
	}
	return template.HTML(b.String()) // #nosec G203 -- html/template escaped it
}

// Verify implements signin.Method: the back-off first (before the slow
// hash), then the password. A failure is charged to the username (as
// identity.PrepareUsername folds it: Alice and alice share one back-off)
// and to the address; a success clears the username's.
func (m *Method) Verify(ctx context.Context, in signin.Input) (signin.Result, error) {
	username := in.Fields.Get("username")
	key := username
	if p, err := identity.PrepareUsername(username); err == nil {
		key = p
	}
	known := in.KnownDevice != nil && in.KnownDevice(username)
	if ok, wait := m.limit.allow(ctx, key, in.RemoteIP, known); !ok {
		return signin.Result{}, &signin.Failure{Status: http.StatusTooManyRequests, RetryAfter: wait, Username: username,
			Message: "Too many failed sign-in attempts. Try again in " + retryAfterWords(wait) + "."}
	}
	u, err := m.people.Authenticate(ctx, username, in.Fields.Get("password"))
	if errors.Is(err, storage.ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// Not a wrong password, and not charged to the back-off: the
		// database, or the request ended while it queued for a hashing
		// slot (password.Hasher).
		return signin.Result{}, errors.Join(signin.ErrUnavailable, err)
	}
	if err != nil {
		if !errors.Is(err, identity.ErrInvalidCredentials) {
			m.log.Error("authenticate", "error", err)
		}
		// One message for unknown user, wrong password and disabled user.
		m.limit.failed(ctx, key, in.RemoteIP)
		return signin.Result{}, &signin.Failure{Status: http.StatusUnauthorized, Message: "Wrong username or password.",
			Username: username, Invalid: true}
	}
	m.limit.succeeded(ctx, key, in.RemoteIP)
	// RFC 8176 §2: "pwd", password-based authentication.
	return signin.Result{User: u, AMR: []string{"pwd"}}, nil
}
