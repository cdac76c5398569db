package oauth

import (
	"context"
	"github.com/authd/authd/authsession"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"
	"github.com/ory/fosite/handler/pkce"
	fositestorage "github.com/ory/fosite/storage"

	"github.com/authd/authd/federation"
	"github.com/authd/authd/storage"
)

// Store is the slice of storage the server calls (Deps.Store). authd
// serve hands it the backend behind the client cache
// (storage.CachingStore) and revocation.Store, so that every revocation
// also drops the replay cache entries of what it revoked.
type Store interface {
	// fosite's handlers (provider.go, adapter.go): clients, codes,
	// tokens, the PKCE sessions of codes issued by an earlier authd, and
	// their transactions; the revocation and introspection endpoints.
	fosite.ClientManager
	oauth2.CoreStorage
	oauth2.TokenRevocationStorage
	pkce.PKCERequestStorage
	fositestorage.Transactional
	// Pushed authorization requests (par.go).
	storage.PARStore
	// The exchange (exchange.go) and a code's issue (code.go): their
	// transactions, the replay record, whether a grant is still live.
	storage.Batcher
	storage.GrantChecker
	GetReplayRecord(ctx context.Context, key string) (*storage.ReplayRecord, error)
	DeleteEndedReplayRecord(ctx context.Context, key string, now time.Time) error
	// The claims of ID tokens and UserInfo.
	GetUserBySubject(ctx context.Context, subject string) (*storage.User, error)
	// The native sign-in (grant_token_exchange.go): consuming a provider
	// ID token and linking its identity to a user, in the exchange's
	// transaction.
	federation.LinkStore
	ConsumeSubjectToken(ctx context.Context, key string, expiresAt time.Time) (bool, error)
	// The challenge endpoint's auth sessions (challenge_step.go).
	authsession.Store
	// The account page's linked providers (account.go).
	ListFederatedIdentities(ctx context.Context, subject string) ([]*storage.FederatedIdentity, error)
	UnlinkFederatedIdentity(ctx context.Context, subject, issuer, sub string) error
}
