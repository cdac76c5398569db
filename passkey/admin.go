package passkey

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/authd/authd/idempotency"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/storage"
)

// Admin is the operator's passkey operations (the admin API's
// /admin/users/{username}/passkeys… and the CLI): every write through
// the Idempotency-Key engine, in one transaction with its key, as
// identity.Admin's are. Users are named by username (PRECIS); errors are
// identity.ErrInvalidUsername and identity.ErrUserNotFound for the user,
// this package's for the passkey, the engine's refusals.
type Admin struct {
	svc  *Service
	keys *idempotency.Engine
}

// NewAdmin returns the operator's passkey operations.
func NewAdmin(svc *Service, keys *idempotency.Engine) *Admin { return &Admin{svc: svc, keys: keys} }

// The Idempotency-Key scopes of the writes (the username and ID are added
// to the key's resource as a keyed hash). Removing the password shares
// the scope of setting one: it is the same endpoint with
// {"password": null}.
const (
	scopeRemovePasskey  = "DELETE /admin/users/*/passkeys/*"
	scopePasswordRemove = "POST /admin/users/*/password"
)

// Result is the result of a write: the answer as stored (nil for none),
// whether it is a replay, and the sub of the user concerned when known.
type Result struct {
	Outcome  int
	JSON     []byte
	Replayed bool
	Subject  string
}

// user returns the user named username.
func (a *Admin) user(ctx context.Context, username string) (*storage.User, error) {
	name, err := identity.PrepareUsername(username)
	if err != nil {
		return nil, err
	}
	u, err := a.svc.store.GetUser(ctx, name)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", identity.ErrUserNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("passkey: get user: %w", err)
	}
	return u, nil
}

// List returns the passkeys of the user named username and the user's sub.
func (a *Admin) List(ctx context.Context, username string) ([]Passkey, string, error) {
	u, err := a.user(ctx, username)
	if err != nil {
		return nil, "", err
	}
	ps, err := a.svc.List(ctx, u.Subject)
	return ps, u.Subject, err
}

// Remove deletes the user's passkey id (base64url): OutcomeDone, no
// answer. ErrNotFound, ErrLastMethod as Service.Remove.
func (a *Admin) Remove(ctx context.Context, caller idempotency.Caller, key, username, id string) (Result, error) {
	name, err := identity.PrepareUsername(username)
	if err != nil {
		return Result{}, err
	}
	var sub string
	w, err := a.keys.Run(ctx, idempotency.Write{
		Caller: caller, Endpoint: scopeRemovePasskey, Resource: name + "\x00" + id, Outcome: idempotency.OutcomeDone,
		Key: key, Request: []byte("{}"),
		Do: func(ctx context.Context) ([]byte, error) {
			u, err := a.user(ctx, name)
			if err != nil {
				return nil, err
			}
			sub = u.Subject
			return nil, a.svc.Remove(ctx, u.Subject, id)
		},
	})
	if err != nil {
		return Result{Subject: sub}, err
	}
	return Result{Outcome: w.Outcome, JSON: w.Answer, Replayed: w.Replayed, Subject: sub}, nil
}

// RemovePassword removes the user's password, if they keep an enabled
// passkey (ErrLastMethod otherwise), and in the same transaction ends
// their sessions and revokes their codes and tokens: OutcomeOK, the user.
func (a *Admin) RemovePassword(ctx context.Context, caller idempotency.Caller, key, username string) (Result, error) {
	name, err := identity.PrepareUsername(username)
	if err != nil {
		return Result{}, err
	}
	var sub string
	w, err := a.keys.Run(ctx, idempotency.Write{
		Caller: caller, Endpoint: scopePasswordRemove, Resource: name, Outcome: idempotency.OutcomeOK,
		Key: key, Request: []byte(`{"password":null}`),
		Do: func(ctx context.Context) ([]byte, error) {
			u, err := a.user(ctx, name)
			if err != nil {
				return nil, err
			}
			sub = u.Subject
			if err := a.svc.RemovePassword(ctx, u.Subject); err != nil {
				return nil, err
			}
			b, err := json.Marshal(userView(u))
			return append(b, '\n'), err
		},
	})
	if err != nil {
		return Result{Subject: sub}, err
	}
	return Result{Outcome: w.Outcome, JSON: w.Answer, Replayed: w.Replayed, Subject: sub}, nil
}
