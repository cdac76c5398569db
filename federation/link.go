package federation

import (
	"context"
	"errors"
	"fmt"

	"github.com/authd/authd/storage"
)

// LinkStore is what linking needs of storage.
type LinkStore interface {
	GetFederatedIdentity(ctx context.Context, issuer, sub string) (*storage.FederatedIdentity, error)
	LinkFederatedIdentity(ctx context.Context, id *storage.FederatedIdentity) (bool, error)
	GetUserByVerifiedEmail(ctx context.Context, email string) (*storage.User, error)
	CreateUser(ctx context.Context, u *storage.User) error
	GetUserBySubject(ctx context.Context, subject string) (*storage.User, error)
	DeleteUser(ctx context.Context, subject string) error
}

// How a sign-in found its user.
const (
	Existing = "existing" // the identity was linked already
	Linked   = "linked"   // linked now to the user with its verified email
	Created  = "created"  // a new user, made from the token's profile
)

// ErrDisabled: the linked user is disabled.
var ErrDisabled = errors.New("federation: user disabled")

// Resolve returns the authd user of id, in ctx's transaction (the caller's:
// the native exchange's, so a first sign-in and its tokens commit
// together): the user linked to (issuer, sub); else, when the provider
// allows it and the provider says the email is verified, the one user
// with that verified email, now linked; else a new user. Never by an
// unverified email (design note 4). A disabled user is ErrDisabled.
func Resolve(ctx context.Context, s LinkStore, p *Provider, id *Identity) (*storage.User, string, error) {
	for range 2 {
		u, how, err := resolveOnce(ctx, s, p, id)
		if errors.Is(err, errLinkRace) {
			continue // linked by a concurrent sign-in meanwhile: read it
		}
		if err == nil && u.Disabled {
			return nil, how, ErrDisabled
		}
		return u, how, err
	}
	return nil, "", fmt.Errorf("federation: link of %s did not settle", p.ID)
}

var errLinkRace = errors.New("federation: linked concurrently")

func resolveOnce(ctx context.Context, s LinkStore, p *Provider, id *Identity) (*storage.User, string, error) {
	link, err := s.GetFederatedIdentity(ctx, id.Issuer, id.Sub)
	switch {
	case err == nil:
		u, err := s.GetUserBySubject(ctx, link.Subject)
		return u, Existing, err
	case !errors.Is(err, storage.ErrNotFound):
		return nil, "", err
	}
	newLink := &storage.FederatedIdentity{Issuer: id.Issuer, Sub: id.Sub, ProviderID: p.ID, Email: id.Email}
	if p.LinkByVerifiedEmail && id.EmailVerified && id.Email != "" {
		u, err := s.GetUserByVerifiedEmail(ctx, id.Email)
		switch {
		case err == nil:
			newLink.Subject = u.Subject
			ok, err := s.LinkFederatedIdentity(ctx, newLink)
			if err != nil {
				return nil, "", err
			}
			if !ok {
				return nil, "", errLinkRace
			}
			return u, Linked, nil
		case !errors.Is(err, storage.ErrNotFound):
			return nil, "", err
		}
	}
	// No password (an empty hash verifies nothing): the provider is the
	// user's way in.
	u := &storage.User{Subject: storage.NewSubject(), PasswordHash: []byte{}, Email: id.Email, EmailVerified: id.EmailVerified, Name: id.Name}
	u.Username = p.ID + "-" + u.Subject[:16]
	if err := s.CreateUser(ctx, u); err != nil {
		return nil, "", err
	}
	newLink.Subject = u.Subject
	ok, err := s.LinkFederatedIdentity(ctx, newLink)
	if err != nil {
		return nil, "", err
	}
	if !ok {
		// Another sign-in of the same identity won: drop the user made
		// for it here (nothing refers to it yet) and use the winner's.
		if err := s.DeleteUser(ctx, u.Subject); err != nil {
			return nil, "", err
		}
		return nil, "", errLinkRace
	}
	return u, Created, nil
}
