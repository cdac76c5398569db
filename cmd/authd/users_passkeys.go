package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/passkey"
	"github.com/authd/authd/revocation"
	"github.com/authd/authd/storage"
)

// The passkey commands of "authd users" (issue 24): list and remove a
// user's passkeys, make an enrolment link, remove a password
// (set-password -no-password).

// isPasskeyCommand reports whether "authd users cmd" runs here.
func isPasskeyCommand(cmd string, o usersOptions) bool {
	switch cmd {
	case "passkeys", "remove-passkey", "passkey-link":
		return true
	case "set-password":
		return o.noPassword
	}
	return false
}

// usersPasskeys builds the passkey service over store (the revoking
// store openRevokingStore returns). Listing and removing need no
// ceremony, so they work whatever the issuer; a link needs passkeys on.
func usersPasskeys(c config, store storage.Store, needRP bool) (*passkey.Service, passkey.RelyingParty, error) {
	backend := store
	if rs, ok := store.(revocation.Store); ok {
		backend = rs.Store
	}
	ps, ok := backend.(storage.PasskeyStore)
	if !ok {
		return nil, passkey.RelyingParty{}, fmt.Errorf("the store keeps no passkeys")
	}
	rp, err := c.passkeys.relyingParty(c.Issuer, c.Addr)
	if err != nil {
		return nil, rp, usagef("%v", err)
	}
	if !rp.Enabled {
		if needRP {
			return nil, rp, usagef("passkey-link needs passkeys on: set AUTHD_ISSUER to the server's public URL (a domain name), or AUTHD_WEBAUTHN_RP_ID")
		}
		rp, _ = passkey.Configure(passkey.Settings{Issuer: "http://localhost"}) // no ceremony runs here
	}
	svc, err := passkey.New(rp, struct {
		storage.PasskeyStore
		storage.Store
	}{ps, store}, passkey.Options{})
	return svc, rp, err
}

// runPasskeyUsers performs a passkey command and returns what to print.
func runPasskeyUsers(ctx context.Context, c config, store storage.Store, people *identity.Service, cmd string, pos []string) (any, error) {
	svc, _, err := usersPasskeys(c, store, cmd == "passkey-link")
	if err != nil {
		return nil, err
	}
	u, err := people.Get(ctx, pos[0])
	if err != nil {
		return nil, err
	}
	switch cmd {
	case "passkeys":
		ps, err := svc.List(ctx, u.Subject)
		return map[string]any{"username": u.Username, "sub": u.Subject, "passkeys": ps}, err
	case "remove-passkey":
		if err := svc.Remove(ctx, u.Subject, pos[1]); err != nil {
			return nil, err
		}
		return map[string]any{"username": u.Username, "id": pos[1], "removed": true}, nil
	case "passkey-link":
		if u.Disabled {
			return nil, fmt.Errorf("%w: %s is disabled; enable the user first", errUsage, u.Username)
		}
		token, expires, err := svc.NewLink(ctx, u.Subject)
		if err != nil {
			return nil, err
		}
		// The token travels in the fragment: browsers never send it, so
		// no access log records it.
		return map[string]any{"username": u.Username, "url": c.Issuer + "/account/passkey-link#" + token,
			"expires_at": expires.UTC().Format(time.RFC3339)}, nil
	case "set-password":
		if err := svc.RemovePassword(ctx, u.Subject); err != nil {
			return nil, err
		}
		return withRevoked(u, nil)
	}
	return nil, fmt.Errorf("%w: unknown command %q", errUsage, cmd)
}

// passkeyUsageErrors are the passkey errors that are the operator's input.
var passkeyUsageErrors = []error{passkey.ErrNotFound, passkey.ErrLastMethod, passkey.ErrUnknown}

func isPasskeyUsageError(err error) bool {
	for _, e := range passkeyUsageErrors {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
