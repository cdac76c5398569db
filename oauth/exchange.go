package oauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/secevent"
	"github.com/authd/authd/signing"
	"github.com/authd/authd/storage"
)

// exchanger runs a token request that passed the pipeline's checks (client
// authenticated, rate limit, grant checks) to its answer. grantExchanger is
// the real one; replayCache decorates it with the replay cache.
type exchanger interface {
	exchange(ctx context.Context, req *tokenRequest) (*answer, error)
}

// Answer paths, for metrics and logs.
const (
	pathFresh  = "fresh"  // tokens issued by this request
	pathReplay = "replay" // original response, from the replay cache
	pathRecord = "record" // original response, from the durable record
)

// answer is a successful token response (RFC 6749 §5.1).
type answer struct {
	body tokenBody
	path string
	// sealed is the sealed response as stored in the replay record, and
	// windowEnd the end of its replay window; nil for grants without
	// replay. The replay cache stores the same bytes.
	sealed    []byte
	windowEnd time.Time
	// superseded are the keys of the grant's earlier replay records that
	// this rotation superseded; their cache entries must go.
	superseded []string
	// reply is the challenge endpoint's answer (challenge.go) instead of
	// body; sealed and windowEnd as for a token response.
	reply *challengeReply
}

// tokenBody is the JSON body of a token response (RFC 6749 §5.1).
type tokenBody struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	Scope        string `json:"scope,omitempty"`
	RefreshToken string `json:"refresh_token,omitempty"`
	// IDToken is the OpenID Connect ID token (Core §3.1.3.3), when the
	// granted scope includes openid. It is sealed with the rest, so a
	// replay returns the same ID token byte for byte.
	IDToken string `json:"id_token,omitempty"`
	// IssuedTokenType is RFC 8693 §2.2.1's, for the token exchange grant
	// only; not sealed (it follows from the grant).
	IssuedTokenType string `json:"issued_token_type,omitempty"`
}

// exchangeStore is what grantExchanger needs of storage.
type exchangeStore interface {
	BeginDeferredTX(ctx context.Context) (context.Context, error)
	CommitWithReplayRecord(ctx context.Context, rec *storage.ReplayRecord) ([]string, error)
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
	GetReplayRecord(ctx context.Context, key string) (*storage.ReplayRecord, error)
	RevokeAccessToken(ctx context.Context, requestID string) error
	RevokeRefreshToken(ctx context.Context, requestID string) error
	GrantActive(ctx context.Context, requestID string) (bool, error)
}

// grantExchanger runs a token request through fosite and keeps the durable
// replay record (docs/architecture.md, "The exchange"). PostgreSQL is the
// arbiter:
//
//  1. fosite validates the request (the code handler, PKCE, the refresh
//     handler) and reads the code or refresh token;
//  2. in one transaction of its own, fosite redeems the code (or rotates
//     the refresh token) with a conditional write and stores the new
//     tokens, and the exchanger stores the response sealed under the
//     presented code_verifier (or refresh token): the replay record.
//     Nothing can fail between the redemption and the record: they commit
//     together or not at all;
//  3. a code or refresh token found already redeemed (step 1, or the loser
//     of a race at step 2, which waits on the winner's row lock and so sees
//     its commit) is answered from the record when the fingerprint matches,
//     the window is open and the grant was not revoked; otherwise it is
//     reuse: the grant is revoked (RFC 6749 §4.1.2, RFC 9700 §4.14.2) and
//     the answer is invalid_grant.
type grantExchanger struct {
	provider *provider
	store    exchangeStore
	sealKey  []byte
	window   time.Duration // 0: no replay record
	now      func() time.Time
	log      *slog.Logger
	// afterCommit is Deps.AfterExchangeCommit (crash tests only).
	afterCommit func()
	// keys signs ID tokens (idtoken.go); issuer and idTokenTTL are their
	// iss and lifetime; users reads the profile claims.
	keys       *signing.Manager
	issuer     string
	idTokenTTL time.Duration
	users      interface {
		GetUserBySubject(ctx context.Context, subject string) (*storage.User, error)
	}
	// security records reuse and replays of revoked grants.
	security *secevent.Recorder
}

func (x *grantExchanger) exchange(ctx context.Context, req *tokenRequest) (*answer, error) {
	// The ID token signing keys are loaded first, not in the transaction:
	// signing in it then does no I/O and cannot fail for want of a key.
	// (Whether one is needed is known only once fosite has granted the
	// code's scopes; in the steady state this is a memory read.)
	if x.keys != nil {
		if err := x.keys.Prepare(ctx); err != nil {
			return nil, fosite.ErrServerError.WithWrap(err).WithHint("The ID token signing keys are unavailable; nothing was used up, retry.")
		}
	}
	// One transaction from the first read to the commit (storage.Batcher):
	// BEGIN travels with the read of the code (locked; its row is also
	// its PKCE session), the token writes and the replay record with
	// COMMIT. A
	// concurrent exchange of the same code waits on the lock and then finds
	// it redeemed, with this one's record committed.
	tctx, err := x.store.BeginDeferredTX(ctx)
	if err != nil {
		return nil, fosite.ErrServerError.WithWrap(err)
	}
	a, rec, err := x.issue(withExchangeTx(withBinding(withCodeMemo(tctx), req.jkt)), req)
	if err != nil {
		_ = x.store.Rollback(tctx)
		return x.redeemed(ctx, req, err)
	}
	if rec != nil {
		a.superseded, err = x.store.CommitWithReplayRecord(tctx, rec)
	} else {
		err = x.store.Commit(tctx)
	}
	if err != nil {
		// Whether it committed is unknown; a retry finds out (the record
		// answers it, or the code is still unused).
		return nil, fosite.ErrServerError.WithWrap(err)
	}
	if x.afterCommit != nil {
		x.afterCommit()
	}
	return a, nil
}

// issue runs fosite's validation and token issuance inside the exchange
// transaction and returns the answer with the replay record to commit with
// it (nil for grants without replay).
func (x *grantExchanger) issue(ctx context.Context, req *tokenRequest) (*answer, *storage.ReplayRecord, error) {
	ar, err := x.provider.NewAccessRequest(ctx, req.r, newSession(""))
	if err != nil {
		return nil, nil, err
	}
	if err := checkRefreshScope(req.id.scope, ar); req.id.scope != nil && err != nil {
		return nil, nil, err
	}
	if err := bind(req, ar); err != nil {
		return nil, nil, err
	}
	resp, err := x.provider.NewAccessResponse(ctx, ar)
	if err != nil {
		return nil, nil, err
	}
	exp := ar.GetSession().GetExpiresAt(fosite.AccessToken)
	if exp.IsZero() {
		exp = x.now().Add(x.provider.config.AccessTokenLifespan)
	}
	a := &answer{path: pathFresh, body: tokenBody{
		AccessToken: resp.GetAccessToken(),
		TokenType:   resp.GetTokenType(),
		ExpiresIn:   expiresIn(exp, x.now()),
		Scope:       strings.Join(ar.GetGrantedScopes(), " "),
	}}
	a.body.RefreshToken, _ = resp.GetExtra("refresh_token").(string)
	if req.jkt != "" {
		// RFC 9449 §5: a DPoP-bound access token is of type DPoP; the
		// type is sealed with the rest, so a replay answers it as sent.
		a.body.TokenType = "DPoP"
	}
	// Signed here, inside the transaction and before the replay record is
	// sealed: a failure rolls back (the code stays unused), and a replay
	// returns this very ID token.
	if a.body.IDToken, err = x.idToken(ctx, req, ar, a.body.AccessToken); err != nil {
		return nil, nil, err
	}
	if req.id.key == "" || x.window <= 0 {
		return a, nil, nil
	}
	plain := (&sealedResponse{Body: a.body, ExpiresAt: exp, Scope: req.id.scope}).marshal()
	a.sealed, err = exchangecache.Seal(x.sealKey, req.id.presented, req.id.key, plain)
	if err != nil {
		return nil, nil, fosite.ErrServerError.WithWrap(err)
	}
	a.windowEnd = x.now().Add(x.window)
	subject := ""
	if s, ok := ar.GetSession().(*fosite.DefaultSession); ok {
		subject = s.Subject
	}
	return a, &storage.ReplayRecord{
		Key: req.id.key, RequestID: ar.GetID(), ClientID: req.client.GetID(), Subject: subject,
		Fingerprint: req.id.fingerprint, Sealed: a.sealed, WindowEnd: a.windowEnd,
	}, nil
}

// redeemed handles an error from fosite. A code or refresh token that is
// no longer active (*errGrantUsed) is a retry answered from the replay
// record, or reuse; any other error is returned as it is.
func (x *grantExchanger) redeemed(ctx context.Context, req *tokenRequest, err error) (*answer, error) {
	var used *errGrantUsed
	if !errors.As(err, &used) {
		return nil, err
	}
	// A refresh asking for a scope never granted is refused as such (RFC
	// 6749 §6: invalid_scope), whether or not the token was rotated since;
	// it is not a use of the token.
	if used.refresh && used.granted != nil {
		for _, sc := range req.id.scope {
			if !slices.Contains(used.granted, sc) {
				return nil, fosite.ErrInvalidScope.WithHintf("The scope %s was not granted to this refresh token (RFC 6749 Section 6).", truncate(sc, 40))
			}
		}
	}
	event := secevent.Event{ClientID: req.client.GetID(), Subject: used.subject, GrantID: used.requestID, Source: clientIP(req.r)}
	if req.id.key != "" {
		a, rerr := x.fromRecord(ctx, req)
		if errors.Is(rerr, errRevokedReplay) {
			event.Kind = secevent.RevokedGrantReplay
			x.security.Record(ctx, event)
			return nil, fosite.ErrInvalidGrant.WithHint("The tokens issued for this request have been revoked or superseded.")
		}
		if a != nil || rerr != nil {
			return a, rerr
		}
	}
	if used.subjectToken {
		return nil, errSubjectTokenUsed // nothing to revoke: it is the user's own sign-in
	}
	// A refresh token whose whole family is inactive was revoked (RFC
	// 7009, sign-out, or an earlier reuse detection): say so, and there is
	// nothing left to revoke.
	if used.refresh && used.requestID != "" {
		if live, err := x.store.GrantActive(ctx, used.requestID); err == nil && !live {
			event.Kind = secevent.RevokedGrantReplay
			x.security.Record(ctx, event)
			return nil, fosite.ErrInvalidGrant.WithHint("The refresh token has been revoked.")
		}
	}
	event.Kind = secevent.CodeReuse
	if used.refresh {
		event.Kind = secevent.RefreshTokenReuse
	}
	x.security.Record(ctx, event)
	// Reuse: RFC 6749 §4.1.2 (a code used twice: revoke the tokens issued
	// from it) and RFC 9700 §4.14.2 (a rotated refresh token used again:
	// revoke the family). Detached from the request: the revocation must
	// not be abandoned because the client hung up.
	if used.requestID != "" {
		rctx := context.WithoutCancel(ctx)
		for _, revoke := range []func(context.Context, string) error{x.store.RevokeRefreshToken, x.store.RevokeAccessToken} {
			if rerr := revoke(rctx, used.requestID); rerr != nil && !errors.Is(rerr, storage.ErrNotFound) {
				x.log.Error("revoke after reuse", "error", rerr)
			}
		}
	}
	if used.refresh {
		return nil, fosite.ErrInvalidGrant.WithHint("The refresh token was already used (it rotates on every use); as a precaution its whole family of tokens has been revoked.")
	}
	return nil, fosite.ErrInvalidGrant.WithHint("The authorization code has already been used. The tokens issued from it have been revoked.")
}

// fromRecord answers a retry from the durable replay record. It returns
// (nil, nil) when the record cannot answer (none, another fingerprint,
// window closed, another scope): that is reuse. A database that cannot be
// reached is an error (503), never reuse. A matching record of a
// grant revoked since is invalid_grant without revoking anything more.
func (x *grantExchanger) fromRecord(ctx context.Context, req *tokenRequest) (*answer, error) {
	rec, err := x.store.GetReplayRecord(ctx, req.id.key)
	if errors.Is(err, storage.ErrUnavailable) || (err != nil && ctx.Err() != nil) {
		// Not reuse: the database did not answer. 503, and the client's
		// retry finds the record (found by the scale-out test: a
		// concurrent duplicate during an outage got invalid_grant). Nor
		// is a read that the client's hang-up canceled: taken for "no
		// record", it revoked the grant of the client's own first attempt.
		return nil, fosite.ErrServerError.WithWrap(err)
	}
	if err != nil {
		if !errors.Is(err, storage.ErrNotFound) {
			x.log.Warn("replay record unreadable; treating the request as reuse", "error", err)
		}
		return nil, nil
	}
	if subtle.ConstantTimeCompare([]byte(rec.Fingerprint), []byte(req.id.fingerprint)) != 1 ||
		!x.now().Before(rec.WindowEnd) {
		return nil, nil
	}
	a, ok := openAnswer(x.sealKey, req, rec.Sealed, x.now())
	if !ok {
		return nil, nil
	}
	if rec.Revoked {
		return nil, errRevokedReplay
	}
	a.path, a.windowEnd = pathRecord, rec.WindowEnd
	return a, nil
}

// errRevokedReplay is fromRecord's answer to a retry whose record matches
// but whose grant was revoked since (a security event:
// revoked_grant_replay); redeemed turns it into invalid_grant.
var errRevokedReplay = errors.New("oauth: the grant of this replay record was revoked")

// openAnswer opens a sealed response for req: ok is false when it does not
// open with the presented code_verifier (or refresh token), or when a
// refresh request asks for another scope than the first (not the same
// request).
func openAnswer(sealKey []byte, req *tokenRequest, sealed []byte, now time.Time) (*answer, bool) {
	plain, err := exchangecache.Open(sealKey, req.id.presented, req.id.key, sealed)
	if err != nil {
		return nil, false
	}
	var sr sealedResponse
	if err := sr.unmarshal(plain); err != nil || sr.Body.AccessToken == "" {
		return nil, false
	}
	if strings.HasPrefix(req.id.key, "r:") && !sameRefreshScope(req.id.scope, sr.Body.Scope) {
		return nil, false
	}
	// expires_in counts the remaining lifetime (RFC 6749 §5.1).
	sr.Body.ExpiresIn = expiresIn(sr.ExpiresAt, now)
	return &answer{body: sr.Body, sealed: sealed}, true
}

// expiresIn is the access token's remaining lifetime in whole seconds.
func expiresIn(exp, now time.Time) int64 {
	return int64(math.Max(0, math.Round(exp.Sub(now).Seconds())))
}
