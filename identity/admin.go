package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/authd/authd/idempotency"
	"github.com/authd/authd/pagecursor"
)

// Admin runs an operator's operations on users (the admin API's
// /admin/users…): every write through the Idempotency-Key engine (package
// idempotency), in one transaction with its key, with a typed Result that
// carries the answer as stored, so a retry with the key gets it byte for
// byte. Its errors are the Service's (ErrInvalidUsername, ErrUserNotFound,
// …), the engine's refusals (*idempotency.Error) and storage's. It is safe
// for concurrent use.
type Admin struct {
	people *Service
	keys   *idempotency.Engine
}

// NewAdmin returns the operations on people's users, writing under the
// engine's keys.
func NewAdmin(people *Service, keys *idempotency.Engine) *Admin {
	return &Admin{people: people, keys: keys}
}

// The Idempotency-Key scopes of the writes: the admin API's method and
// path, with the username as "*" (it is added as a keyed hash). Stored
// keys depend on them, so they stay.
const (
	scopeCreate        = "POST /admin/users"
	scopeUpdate        = "PUT /admin/users/*"
	scopePassword      = "POST /admin/users/*/password"
	scopeDisable       = "POST /admin/users/*/disable"
	scopeEnable        = "POST /admin/users/*/enable"
	scopeDelete        = "DELETE /admin/users/*"
	scopeSignOut       = "POST /admin/users/*/sign-out"
	scopeRevokeConsent = "DELETE /admin/users/*/consents/*"
)

// UserChange is the input of Admin.Update: the profile (a full replace:
// an empty field is cleared) and optionally a new username. The JSON
// names are the request's canonical form under an Idempotency-Key.
type UserChange struct {
	// Username, when set and different (after PRECIS) from the user's,
	// renames the user; the sub, tokens, sessions and consents stay.
	Username      string `json:"username,omitempty"`
	Email         string `json:"email,omitempty"`
	EmailVerified bool   `json:"email_verified,omitempty"`
	Name          string `json:"name,omitempty"`
}

// SignedOut is the answer of Admin.SignOut.
type SignedOut struct {
	Subject       string `json:"sub"`
	SessionsEnded int    `json:"sessions_ended"`
}

// Result is the result of a write.
type Result struct {
	// Outcome is idempotency.OutcomeCreated (Create), OutcomeOK, or
	// OutcomeDone for a write that answers nothing (Delete,
	// RevokeConsent).
	Outcome int
	// JSON is the answer (the User, or SignedOut), with a final newline;
	// nil for none.
	JSON []byte
	// Replayed reports a result replayed from an Idempotency-Key record:
	// JSON is the stored answer and the fields below are read from it.
	Replayed bool
	// User is the user the answer shows (zero for SignOut, Delete and
	// RevokeConsent).
	User User
	// SessionsEnded is how many sessions SignOut ended.
	SessionsEnded int
	// Subject is the sub of the user concerned, when known, for an audit
	// event; it is also set with an error once the user was found.
	Subject string
}

// write is one write, run by the engine.
type write struct {
	scope        string
	username     string // the prepared username of the user concerned; "" for Create
	clientID     string // RevokeConsent only
	outcome      int
	request      any  // the input, for its canonical form; nil for none
	confidential bool // the request carries a password
	// do runs the operation in the write's transaction and returns the
	// answer (nil for none) and the user's sub.
	do func(ctx context.Context) (answer any, sub string, err error)
}

// run runs w under caller's key.
func (a *Admin) run(ctx context.Context, caller idempotency.Caller, key string, w write) (Result, error) {
	canonical := []byte("{}")
	if w.request != nil {
		c, err := idempotency.Canonical(w.request)
		if err != nil {
			return Result{}, err
		}
		canonical = c
	}
	// The username is part of the key's scope, stored only as a keyed
	// hash; PRECIS refuses NUL in usernames, so the join is unambiguous.
	resource := w.username
	if w.clientID != "" {
		resource += "\x00" + w.clientID
	}
	var sub string
	written, err := a.keys.Run(ctx, idempotency.Write{
		Caller: caller, Endpoint: w.scope, Resource: resource, Outcome: w.outcome,
		Key: key, Request: canonical, Confidential: w.confidential,
		Do: func(ctx context.Context) ([]byte, error) {
			v, s, err := w.do(ctx)
			sub = s
			if err != nil || v == nil {
				return nil, err
			}
			return encodeAnswer(v)
		},
	})
	if err != nil {
		return Result{Subject: sub}, err
	}
	r := Result{Outcome: written.Outcome, JSON: written.Answer, Replayed: written.Replayed, Subject: sub}
	if len(r.JSON) > 0 {
		// The answer is a User or SignedOut that run encoded (or stored
		// from an earlier run): read it back the one way for both.
		var shown struct {
			User
			SessionsEnded int `json:"sessions_ended"`
		}
		if json.Unmarshal(r.JSON, &shown) == nil {
			if r.Subject == "" {
				r.Subject = shown.Subject
			}
			if shown.Username != "" {
				r.User = shown.User
			}
			r.SessionsEnded = shown.SessionsEnded
		}
	}
	return r, nil
}

// encodeAnswer is the JSON of an answer, with a final newline.
func encodeAnswer(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("identity: encode answer: %w", err)
	}
	return append(b, '\n'), nil
}

// Create adds a user (Service.Add) with a new sub: OutcomeCreated, the
// user (never the password or its hash). "Alice" and "alice" are one
// request under a key.
func (a *Admin) Create(ctx context.Context, caller idempotency.Caller, key string, in NewUser) (Result, error) {
	name, err := PrepareUsername(in.Username)
	if err != nil {
		return Result{}, err
	}
	in.Username = name
	return a.run(ctx, caller, key, write{
		scope: scopeCreate, outcome: idempotency.OutcomeCreated, request: in, confidential: true,
		do: func(ctx context.Context) (any, string, error) {
			u, err := a.people.Add(ctx, in)
			return u, u.Subject, err
		},
	})
}

// Update replaces the profile of the user and, if change names another
// username, renames the user, in one transaction: the user.
func (a *Admin) Update(ctx context.Context, caller idempotency.Caller, key, username string, change UserChange) (Result, error) {
	name, err := PrepareUsername(username)
	if err != nil {
		return Result{}, err
	}
	if change.Username != "" {
		if change.Username, err = PrepareUsername(change.Username); err != nil {
			return Result{}, err
		}
		if change.Username == name {
			change.Username = "" // the same name: no rename, the same request
		}
	}
	return a.run(ctx, caller, key, write{
		scope: scopeUpdate, username: name, outcome: idempotency.OutcomeOK, request: change,
		do: func(ctx context.Context) (any, string, error) {
			current := name
			if change.Username != "" {
				u, err := a.people.Rename(ctx, name, change.Username)
				if err != nil {
					return nil, "", err
				}
				current = u.Username
			}
			u, err := a.people.SetProfile(ctx, current, change.Email, change.EmailVerified, change.Name)
			return u, u.Subject, err
		},
	})
}

// SetPassword replaces the user's password and, in the same transaction,
// ends their sessions and revokes their codes and tokens: the user.
func (a *Admin) SetPassword(ctx context.Context, caller idempotency.Caller, key, username, password string) (Result, error) {
	name, err := PrepareUsername(username)
	if err != nil {
		return Result{}, err
	}
	request := struct {
		Password string `json:"password"`
	}{password}
	return a.run(ctx, caller, key, write{
		scope: scopePassword, username: name, outcome: idempotency.OutcomeOK, request: request, confidential: true,
		do: func(ctx context.Context) (any, string, error) {
			u, err := a.people.SetPassword(ctx, name, password)
			return u, u.Subject, err
		},
	})
}

// Disable stops the user from signing in and, in the same transaction,
// ends their sessions and revokes their codes and tokens: the user.
func (a *Admin) Disable(ctx context.Context, caller idempotency.Caller, key, username string) (Result, error) {
	return a.onUser(ctx, caller, key, username, scopeDisable, idempotency.OutcomeOK, func(ctx context.Context, name string) (any, string, error) {
		u, err := a.people.Disable(ctx, name)
		return u, u.Subject, err
	})
}

// Enable lets a disabled user sign in again: the user.
func (a *Admin) Enable(ctx context.Context, caller idempotency.Caller, key, username string) (Result, error) {
	return a.onUser(ctx, caller, key, username, scopeEnable, idempotency.OutcomeOK, func(ctx context.Context, name string) (any, string, error) {
		u, err := a.people.Enable(ctx, name)
		return u, u.Subject, err
	})
}

// Delete deletes the user, their sessions and consents, and revokes their
// codes and tokens, in one transaction: OutcomeDone, no answer.
func (a *Admin) Delete(ctx context.Context, caller idempotency.Caller, key, username string) (Result, error) {
	return a.onUser(ctx, caller, key, username, scopeDelete, idempotency.OutcomeDone, func(ctx context.Context, name string) (any, string, error) {
		u, err := a.people.Delete(ctx, name)
		return nil, u.Subject, err
	})
}

// SignOut ends every session of the user: SignedOut, their sub and how
// many sessions ended. Tokens already issued stay valid.
func (a *Admin) SignOut(ctx context.Context, caller idempotency.Caller, key, username string) (Result, error) {
	return a.onUser(ctx, caller, key, username, scopeSignOut, idempotency.OutcomeOK, func(ctx context.Context, name string) (any, string, error) {
		u, err := a.people.Get(ctx, name)
		if err != nil {
			return nil, "", err
		}
		n, err := a.people.SignOut(ctx, name)
		return SignedOut{Subject: u.Subject, SessionsEnded: n}, u.Subject, err
	})
}

// onUser runs a write without input on the user named username.
func (a *Admin) onUser(ctx context.Context, caller idempotency.Caller, key, username, scope string, outcome int,
	do func(ctx context.Context, name string) (any, string, error)) (Result, error) {
	name, err := PrepareUsername(username)
	if err != nil {
		return Result{}, err
	}
	return a.run(ctx, caller, key, write{
		scope: scope, username: name, outcome: outcome,
		do: func(ctx context.Context) (any, string, error) { return do(ctx, name) },
	})
}

// RevokeConsent withdraws the user's consent for clientID and revokes the
// codes and tokens issued to the user for that client: OutcomeDone, no
// answer. Without a consent it is ErrConsentNotFound and no key is kept,
// but the tokens are revoked all the same (as Service.RevokeConsent does),
// outside the key's transaction, which the error rolled back; a failure
// there is returned instead. An empty clientID is ErrInvalidClientID.
func (a *Admin) RevokeConsent(ctx context.Context, caller idempotency.Caller, key, username, clientID string) (Result, error) {
	name, err := PrepareUsername(username)
	if err != nil {
		return Result{}, err
	}
	if clientID == "" {
		return Result{}, ErrInvalidClientID
	}
	r, err := a.run(ctx, caller, key, write{
		scope: scopeRevokeConsent, username: name, clientID: clientID, outcome: idempotency.OutcomeDone,
		do: func(ctx context.Context) (any, string, error) {
			return nil, "", a.people.RevokeConsent(ctx, name, clientID)
		},
	})
	if errors.Is(err, ErrConsentNotFound) {
		if again := a.people.RevokeConsent(ctx, name, clientID); again != nil && !errors.Is(again, ErrConsentNotFound) {
			return r, again
		}
	}
	return r, err
}

// UserPage is one page of users ordered by username, and the opaque cursor
// of the next page (absent on the last).
type UserPage struct {
	Users      []User `json:"users"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Page bounds.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 200
)

// Page returns up to limit users (0 is DefaultPageLimit; at most
// MaxPageLimit) after cursor ("" for the first page, else a NextCursor),
// ordered by username. Errors: ErrInvalidLimit, ErrInvalidCursor.
func (a *Admin) Page(ctx context.Context, limit int, cursor string) (UserPage, error) {
	if limit == 0 {
		limit = DefaultPageLimit
	}
	if limit < 1 || limit > MaxPageLimit {
		return UserPage{}, ErrInvalidLimit
	}
	after, ok := pagecursor.Decode("users", cursor)
	if !ok {
		return UserPage{}, ErrInvalidCursor
	}
	users, err := a.people.List(ctx, after, limit)
	if err != nil {
		return UserPage{}, err
	}
	page := UserPage{Users: users}
	if len(users) == limit {
		// A full page: is there another? (List caps a page at
		// MaxPageLimit, so no limit+1 read.)
		last := users[len(users)-1].Username
		more, err := a.people.List(ctx, last, 1)
		if err != nil {
			return UserPage{}, err
		}
		if len(more) > 0 {
			page.NextCursor = pagecursor.Encode("users", last)
		}
	}
	return page, nil
}
