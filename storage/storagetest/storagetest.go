// Package storagetest is the conformance suite every storage.Store backend
// must pass. It is imported only from backends' _test.go files:
//
//	func TestStore(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) Store { return memory.New() })
//	}
//
// Every case gets a fresh, empty store from newStore and runs in parallel
// with the others, using t.Context() for all calls.
package storagetest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

// Store is what Run tests: storage.Store and the backend's own methods
// the suite also checks.
type Store interface {
	storage.Store
	BackendMethods
}

// BackendMethods are the methods every backend has that authd calls only
// inside a backend (CommitWithReplayRecord's insert, the memory janitor's
// deletions) or only here: not part of storage.Store, checked directly.
type BackendMethods interface {
	// NoteSessionClient records clientID on the session as TouchSession
	// does, without touching it (a no-op for an unknown session).
	NoteSessionClient(ctx context.Context, sessionID, clientID string) error
	// PutReplayRecord is CommitWithReplayRecord's insert, in ctx's
	// transaction when there is one, without the commit.
	PutReplayRecord(ctx context.Context, rec *storage.ReplayRecord) (superseded []string, err error)
	// GetIdempotencyKey returns the stored record, expired or not, or
	// storage.ErrNotFound.
	GetIdempotencyKey(ctx context.Context, k storage.IdempotencyKey) (*storage.IdempotencyRecord, error)
	// DeleteExpiredIdempotencyKeys deletes up to limit records (all, if
	// limit <= 0) whose ExpiresAt is not after now, and returns how many it
	// deleted. Records in flight are deleted too once expired.
	DeleteExpiredIdempotencyKeys(ctx context.Context, now time.Time, limit int) (int, error)
	// DeleteExpiredSessions deletes up to limit sessions invalid at now and
	// returns how many it deleted.
	DeleteExpiredSessions(ctx context.Context, now time.Time, limit int) (int, error)
}

// Concurrency is the number of goroutines the race cases start.
const Concurrency = 32

type testCase struct {
	name string
	run  func(t *testing.T, s Store)
}

var cases = []testCase{
	{"ClientCRUD", testClientCRUD},
	{"ClientList", testClientList},
	{"ClientTimesUTCMicro", testClientTimes},
	{"ClientAssertionJWT", testClientAssertionJWT},
	{"AuthorizeCode", testAuthorizeCode},
	{"AccessToken", testAccessToken},
	{"RefreshToken", testRefreshToken},
	{"RotateRefreshToken", testRotateRefreshToken},
	{"RevokeByRequestID", testRevokeByRequestID},
	{"PKCE", testPKCE},
	{"MissingRowsNotFound", testMissingRows},
	{"CreateDuplicateAndUnknownClient", testCreateConflicts},
	{"SessionRoundTrip", testSessionRoundTrip},
	{"SecretFormValuesNotStored", testSecretForm},
	{"TxRollbackDiscards", testTxRollback},
	{"TxCommitPersists", testTxCommit},
	{"TxNestedRollback", testTxNested},
	{"DeleteClientRevokesTokens", testDeleteClient},
	{"ConcurrentInvalidateAuthorizeCode", testConcurrentInvalidate},
	{"ConcurrentRotateRefreshToken", testConcurrentRotate},
	{"RevokeDuringRotation", testRevokeDuringRotation},
	{"LockClient", testLockClient},
	{"ReplayRecordRoundTrip", testReplayRecordRoundTrip},
	{"ReplayRecordRevokedWithGrant", testReplayRecordRevoked},
	{"ReplayRecordSupersededAndDeletedWithClient", testReplayRecordSuperseded},
	{"ReplayRecordDeleteEnded", testReplayRecordDeleteEnded},
	{"RedemptionLoserSeesWinnersRecord", testRedemptionLoserSeesRecord},
	{"GrantActive", testGrantActive},
	{"DeferredTx", testDeferredTx},
	{"CodeRecord", testCodeRecord},
	{"DeferredRedeem", testDeferredRedeem},
	{"ConcurrentDeletePKCE", testConcurrentDeletePKCE},
	{"Ping", testPing},
}

// Run runs the conformance suite. newStore must return a fresh, empty store
// for each case, and register its own cleanup with t.Cleanup.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	for _, tc := range slices.Concat(cases, idempotencyCases, peopleCases, parCases, logoutCases, factorCases, authSessionCases) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t))
		})
	}
}

// ---- fixtures ----

// nonUTC is a zone that makes a missing UTC conversion visible.
var nonUTC = time.FixedZone("UTC+5:30", 5*3600+30*60)

func mustClient(t *testing.T, s Store, id string) *storage.Client {
	t.Helper()
	c := &storage.Client{
		ID:                      id,
		SecretHash:              []byte("hash-" + id),
		Name:                    "Client " + id,
		RedirectURIs:            []string{"https://app.example/cb", "http://127.0.0.1/cb"},
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		Scopes:                  []string{"openid", "offline_access"},
		TokenEndpointAuthMethod: "client_secret_basic",
		ClientURI:               "https://app.example",
		LogoURI:                 "https://app.example/logo.png",
		Contacts:                []string{"ops@app.example"},
		SkipConsent:             true,
	}
	if err := s.CreateClient(t.Context(), c); err != nil {
		t.Fatalf("CreateClient(%q) = %v", id, err)
	}
	return c
}

// newRequest returns a request of clientID with a fully populated
// *fosite.DefaultSession whose times carry nanoseconds and a non-UTC zone.
func newRequest(clientID, requestID string) *fosite.Request {
	now := time.Now().In(nonUTC)
	sess := &fosite.DefaultSession{
		Subject:  "alice-sub",
		Username: "alice",
		ExpiresAt: map[fosite.TokenType]time.Time{
			fosite.AuthorizeCode: now.Add(10 * time.Minute),
			fosite.AccessToken:   now.Add(time.Hour),
			fosite.RefreshToken:  now.Add(30 * 24 * time.Hour),
		},
		Extra: map[string]any{"amr": "pwd"},
	}
	return &fosite.Request{
		ID:                requestID,
		RequestedAt:       time.Date(2025, 3, 4, 5, 6, 7, 123456789, nonUTC),
		Client:            &storage.Client{ID: clientID},
		RequestedScope:    fosite.Arguments{"openid", "offline_access", "profile"},
		GrantedScope:      fosite.Arguments{"openid", "offline_access"},
		RequestedAudience: fosite.Arguments{"https://api.example"},
		GrantedAudience:   fosite.Arguments{"https://api.example"},
		Form: url.Values{
			"redirect_uri": {"https://app.example/cb"},
			"scope":        {"openid offline_access profile"},
		},
		Session: sess,
	}
}

// checkRequest asserts that got round-tripped want.
func checkRequest(t *testing.T, got fosite.Requester, want *fosite.Request) {
	t.Helper()
	if got == nil {
		t.Fatal("requester is nil")
	}
	if got.GetID() != want.ID {
		t.Errorf("ID = %q, want %q", got.GetID(), want.ID)
	}
	wantAt := want.RequestedAt.UTC().Truncate(time.Microsecond)
	if at := got.GetRequestedAt(); !at.Equal(wantAt) || at.Location() != time.UTC {
		t.Errorf("RequestedAt = %v, want %v (UTC, microseconds)", at, wantAt)
	}
	c, ok := got.GetClient().(*storage.Client)
	if !ok || c.GetID() != want.Client.GetID() {
		t.Errorf("client = %#v, want *storage.Client %q", got.GetClient(), want.Client.GetID())
	} else if c.Name == "" {
		t.Errorf("client %q not rehydrated from the store", c.ID)
	}
	for _, f := range []struct {
		name      string
		got, want []string
	}{
		{"RequestedScopes", got.GetRequestedScopes(), want.RequestedScope},
		{"GrantedScopes", got.GetGrantedScopes(), want.GrantedScope},
		{"RequestedAudience", got.GetRequestedAudience(), want.RequestedAudience},
		{"GrantedAudience", got.GetGrantedAudience(), want.GrantedAudience},
	} {
		if !slices.Equal(f.got, f.want) {
			t.Errorf("%s = %q, want %q", f.name, f.got, f.want)
		}
	}
	if g, w := got.GetRequestForm().Encode(), want.Form.Encode(); g != w {
		t.Errorf("Form = %q, want %q", g, w)
	}
	gs, ok := got.GetSession().(*fosite.DefaultSession)
	if !ok {
		t.Fatalf("session = %T, want *fosite.DefaultSession", got.GetSession())
	}
	ws := want.Session.(*fosite.DefaultSession)
	if gs.Subject != ws.Subject || gs.Username != ws.Username {
		t.Errorf("session subject/username = %q/%q, want %q/%q", gs.Subject, gs.Username, ws.Subject, ws.Username)
	}
	for k, w := range ws.ExpiresAt {
		if g := gs.ExpiresAt[k]; !g.Equal(w) {
			t.Errorf("session ExpiresAt[%s] = %v, want %v", k, g, w)
		}
	}
	if len(gs.ExpiresAt) != len(ws.ExpiresAt) {
		t.Errorf("session ExpiresAt = %v, want %v", gs.ExpiresAt, ws.ExpiresAt)
	}
	if fmt.Sprint(gs.Extra) != fmt.Sprint(ws.Extra) {
		t.Errorf("session Extra = %v, want %v", gs.Extra, ws.Extra)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

func noErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func sess() *fosite.DefaultSession { return &fosite.DefaultSession{} }

// ---- clients and users ----

func testClientCRUD(t *testing.T, s Store) {
	ctx := t.Context()
	c := mustClient(t, s, "app")
	if c.CreatedAt.IsZero() || c.UpdatedAt.IsZero() {
		t.Errorf("CreateClient left CreatedAt/UpdatedAt zero: %v/%v", c.CreatedAt, c.UpdatedAt)
	}
	got, err := s.GetClient(ctx, "app")
	noErr(t, "GetClient", err)
	gc := got.(*storage.Client)
	if fmt.Sprintf("%#v", *gc) != fmt.Sprintf("%#v", *c) {
		t.Errorf("GetClient =\n%#v\nwant\n%#v", *gc, *c)
	}
	gc.Scopes[0] = "mutated"
	again, _ := s.GetClient(ctx, "app")
	if again.GetScopes()[0] != "openid" {
		t.Error("mutating a returned client changed the stored one")
	}

	wantErr(t, "CreateClient duplicate", s.CreateClient(ctx, &storage.Client{ID: "app"}), storage.ErrAlreadyExists)

	upd := *c
	upd.Name, upd.Scopes, upd.Contacts, upd.SecretHash = "Renamed", []string{"openid"}, nil, nil
	upd.TokenEndpointAuthMethod = "none"
	upd.UpdatedAt = time.Time{}
	noErr(t, "UpdateClient", s.UpdateClient(ctx, &upd))
	got, err = s.GetClient(ctx, "app")
	noErr(t, "GetClient after update", err)
	gc = got.(*storage.Client)
	if gc.Name != "Renamed" || !slices.Equal(gc.Scopes, []string{"openid"}) || len(gc.Contacts) != 0 ||
		len(gc.SecretHash) != 0 || !gc.IsPublic() {
		t.Errorf("after update: %#v", gc)
	}
	if !gc.CreatedAt.Equal(c.CreatedAt) {
		t.Errorf("UpdateClient changed CreatedAt: %v, want %v", gc.CreatedAt, c.CreatedAt)
	}
	wantErr(t, "UpdateClient missing", s.UpdateClient(ctx, &storage.Client{ID: "nope"}), storage.ErrNotFound)

	noErr(t, "DeleteClient", s.DeleteClient(ctx, "app"))
	_, err = s.GetClient(ctx, "app")
	wantErr(t, "GetClient after delete", err, storage.ErrNotFound)
	wantErr(t, "DeleteClient again", s.DeleteClient(ctx, "app"), storage.ErrNotFound)
}

func testClientList(t *testing.T, s Store) {
	ctx := t.Context()
	for _, id := range []string{"c3", "c1", "B", "c2", "c5", "c4", "a"} {
		mustClient(t, s, id)
	}
	ids := func(cs []*storage.Client) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	// Byte order: "B" < "a" < "c1".
	var pages [][]string
	after := ""
	for {
		page, err := s.ListClients(ctx, after, 3)
		noErr(t, "ListClients", err)
		if len(page) == 0 {
			break
		}
		pages = append(pages, ids(page))
		after = page[len(page)-1].ID
	}
	if got, want := fmt.Sprint(pages), "[[B a c1] [c2 c3 c4] [c5]]"; got != want {
		t.Errorf("pages = %s, want %s", got, want)
	}
	all, err := s.ListClients(ctx, "", 0)
	noErr(t, "ListClients no limit", err)
	if len(all) != 7 {
		t.Errorf("ListClients(limit 0) returned %d clients, want 7", len(all))
	}
	if all[0].Name == "" || len(all[0].RedirectURIs) != 2 {
		t.Errorf("ListClients returned incomplete client %#v", all[0])
	}
}

func testClientTimes(t *testing.T, s Store) {
	ctx := t.Context()
	at := time.Date(2024, 12, 31, 23, 59, 59, 999999999, nonUTC)
	c := &storage.Client{ID: "t", TokenEndpointAuthMethod: "none", CreatedAt: at, UpdatedAt: at}
	noErr(t, "CreateClient", s.CreateClient(ctx, c))
	got, err := s.GetClient(ctx, "t")
	noErr(t, "GetClient", err)
	gc := got.(*storage.Client)
	want := at.UTC().Truncate(time.Microsecond)
	for name, v := range map[string]time.Time{"CreatedAt": gc.CreatedAt, "UpdatedAt": gc.UpdatedAt} {
		if !v.Equal(want) || v.Location() != time.UTC || v != want {
			t.Errorf("%s = %v, want %v (UTC, microseconds)", name, v, want)
		}
	}
}

func testClientAssertionJWT(t *testing.T, s Store) {
	ctx := t.Context()
	noErr(t, "ClientAssertionJWTValid unknown", s.ClientAssertionJWTValid(ctx, "jti-1"))
	noErr(t, "SetClientAssertionJWT", s.SetClientAssertionJWT(ctx, "jti-1", time.Now().Add(time.Hour)))
	wantErr(t, "ClientAssertionJWTValid known", s.ClientAssertionJWTValid(ctx, "jti-1"), fosite.ErrJTIKnown)
	wantErr(t, "SetClientAssertionJWT again", s.SetClientAssertionJWT(ctx, "jti-1", time.Now().Add(time.Hour)), fosite.ErrJTIKnown)
	// An expired JTI is forgotten and may be set again.
	noErr(t, "SetClientAssertionJWT expired", s.SetClientAssertionJWT(ctx, "jti-2", time.Now().Add(-time.Minute)))
	noErr(t, "ClientAssertionJWTValid expired", s.ClientAssertionJWTValid(ctx, "jti-2"))
	noErr(t, "SetClientAssertionJWT after expiry", s.SetClientAssertionJWT(ctx, "jti-2", time.Now().Add(time.Hour)))
}

// ---- codes, tokens, PKCE ----

func testAuthorizeCode(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	req := newRequest("app", "req-1")
	noErr(t, "CreateAuthorizeCodeSession", s.CreateAuthorizeCodeSession(ctx, "code-sig", req))

	got, err := s.GetAuthorizeCodeSession(ctx, "code-sig", sess())
	noErr(t, "GetAuthorizeCodeSession", err)
	checkRequest(t, got, req)

	noErr(t, "InvalidateAuthorizeCodeSession", s.InvalidateAuthorizeCodeSession(ctx, "code-sig"))
	got, err = s.GetAuthorizeCodeSession(ctx, "code-sig", sess())
	wantErr(t, "GetAuthorizeCodeSession after invalidate", err, storage.ErrInvalidatedAuthorizeCode)
	checkRequest(t, got, req) // fosite needs the requester to revoke the grant's tokens

	wantErr(t, "InvalidateAuthorizeCodeSession again", s.InvalidateAuthorizeCodeSession(ctx, "code-sig"), storage.ErrInvalidatedAuthorizeCode)
	wantErr(t, "InvalidateAuthorizeCodeSession missing", s.InvalidateAuthorizeCodeSession(ctx, "nope"), storage.ErrNotFound)
}

func testAccessToken(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	req := newRequest("app", "req-1")
	noErr(t, "CreateAccessTokenSession", s.CreateAccessTokenSession(ctx, "at-sig", req))
	got, err := s.GetAccessTokenSession(ctx, "at-sig", sess())
	noErr(t, "GetAccessTokenSession", err)
	checkRequest(t, got, req)

	noErr(t, "DeleteAccessTokenSession", s.DeleteAccessTokenSession(ctx, "at-sig"))
	_, err = s.GetAccessTokenSession(ctx, "at-sig", sess())
	wantErr(t, "GetAccessTokenSession after delete", err, storage.ErrNotFound)
}

func testRefreshToken(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	req := newRequest("app", "req-1")
	noErr(t, "CreateRefreshTokenSession", s.CreateRefreshTokenSession(ctx, "rt-sig", "at-sig", req))
	got, err := s.GetRefreshTokenSession(ctx, "rt-sig", sess())
	noErr(t, "GetRefreshTokenSession", err)
	checkRequest(t, got, req)

	noErr(t, "DeleteRefreshTokenSession", s.DeleteRefreshTokenSession(ctx, "rt-sig"))
	_, err = s.GetRefreshTokenSession(ctx, "rt-sig", sess())
	wantErr(t, "GetRefreshTokenSession after delete", err, storage.ErrNotFound)
}

func testRotateRefreshToken(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	req := newRequest("app", "req-1")
	other := newRequest("app", "req-2")
	noErr(t, "create at-1", s.CreateAccessTokenSession(ctx, "at-1", req))
	noErr(t, "create rt-1", s.CreateRefreshTokenSession(ctx, "rt-1", "at-1", req))
	noErr(t, "create at-2", s.CreateAccessTokenSession(ctx, "at-2", other))
	noErr(t, "create rt-2", s.CreateRefreshTokenSession(ctx, "rt-2", "at-2", other))

	noErr(t, "RotateRefreshToken", s.RotateRefreshToken(ctx, "req-1", "rt-1"))

	got, err := s.GetRefreshTokenSession(ctx, "rt-1", sess())
	wantErr(t, "GetRefreshTokenSession after rotate", err, storage.ErrInactiveToken)
	checkRequest(t, got, req)
	got, err = s.GetAccessTokenSession(ctx, "at-1", sess())
	wantErr(t, "GetAccessTokenSession of rotated grant", err, storage.ErrInactiveToken)
	checkRequest(t, got, req)

	_, err = s.GetRefreshTokenSession(ctx, "rt-2", sess())
	noErr(t, "other grant's refresh token", err)
	_, err = s.GetAccessTokenSession(ctx, "at-2", sess())
	noErr(t, "other grant's access token", err)

	// The new pair of the same grant (fosite keeps the request ID).
	noErr(t, "create at-3", s.CreateAccessTokenSession(ctx, "at-3", req))
	noErr(t, "create rt-3", s.CreateRefreshTokenSession(ctx, "rt-3", "at-3", req))
	_, err = s.GetRefreshTokenSession(ctx, "rt-3", sess())
	noErr(t, "new refresh token", err)

	wantErr(t, "RotateRefreshToken again", s.RotateRefreshToken(ctx, "req-1", "rt-1"), storage.ErrInactiveToken)
	_, err = s.GetAccessTokenSession(ctx, "at-3", sess())
	noErr(t, "a lost rotation leaves the new access token alone", err)
	wantErr(t, "RotateRefreshToken missing", s.RotateRefreshToken(ctx, "req-1", "nope"), storage.ErrNotFound)
}

func testRevokeByRequestID(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	req := newRequest("app", "req-1")
	other := newRequest("app", "req-2")
	for _, sig := range []string{"a", "b"} {
		noErr(t, "create access "+sig, s.CreateAccessTokenSession(ctx, "at-"+sig, req))
		noErr(t, "create refresh "+sig, s.CreateRefreshTokenSession(ctx, "rt-"+sig, "at-"+sig, req))
	}
	noErr(t, "create other access", s.CreateAccessTokenSession(ctx, "at-o", other))
	noErr(t, "create other refresh", s.CreateRefreshTokenSession(ctx, "rt-o", "at-o", other))

	noErr(t, "RevokeAccessToken", s.RevokeAccessToken(ctx, "req-1"))
	noErr(t, "RevokeRefreshToken", s.RevokeRefreshToken(ctx, "req-1"))
	for _, sig := range []string{"a", "b"} {
		got, err := s.GetAccessTokenSession(ctx, "at-"+sig, sess())
		wantErr(t, "revoked access token", err, storage.ErrInactiveToken)
		checkRequest(t, got, req)
		got, err = s.GetRefreshTokenSession(ctx, "rt-"+sig, sess())
		wantErr(t, "revoked refresh token", err, storage.ErrInactiveToken)
		checkRequest(t, got, req)
	}
	_, err := s.GetAccessTokenSession(ctx, "at-o", sess())
	noErr(t, "other grant's access token", err)
	_, err = s.GetRefreshTokenSession(ctx, "rt-o", sess())
	noErr(t, "other grant's refresh token", err)

	noErr(t, "RevokeAccessToken unknown request", s.RevokeAccessToken(ctx, "nope"))
	noErr(t, "RevokeRefreshToken unknown request", s.RevokeRefreshToken(ctx, "nope"))
	noErr(t, "RevokeRefreshToken twice", s.RevokeRefreshToken(ctx, "req-1"))
}

func testPKCE(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	req := newRequest("app", "req-1")
	req.Form.Set("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
	req.Form.Set("code_challenge_method", "S256")
	noErr(t, "CreatePKCERequestSession", s.CreatePKCERequestSession(ctx, "code-sig", req))
	got, err := s.GetPKCERequestSession(ctx, "code-sig", sess())
	noErr(t, "GetPKCERequestSession", err)
	checkRequest(t, got, req)

	noErr(t, "DeletePKCERequestSession", s.DeletePKCERequestSession(ctx, "code-sig"))
	wantErr(t, "DeletePKCERequestSession again", s.DeletePKCERequestSession(ctx, "code-sig"), storage.ErrNotFound)
	_, err = s.GetPKCERequestSession(ctx, "code-sig", sess())
	wantErr(t, "GetPKCERequestSession after delete", err, storage.ErrNotFound)
}

func testMissingRows(t *testing.T, s Store) {
	ctx := t.Context()
	_, err := s.GetClient(ctx, "nope")
	wantErr(t, "GetClient", err, storage.ErrNotFound)
	_, err = s.GetUser(ctx, "nope")
	wantErr(t, "GetUser", err, storage.ErrNotFound)
	_, err = s.GetAuthorizeCodeSession(ctx, "nope", sess())
	wantErr(t, "GetAuthorizeCodeSession", err, storage.ErrNotFound)
	_, err = s.GetAccessTokenSession(ctx, "nope", sess())
	wantErr(t, "GetAccessTokenSession", err, storage.ErrNotFound)
	_, err = s.GetRefreshTokenSession(ctx, "nope", sess())
	wantErr(t, "GetRefreshTokenSession", err, storage.ErrNotFound)
	_, err = s.GetPKCERequestSession(ctx, "nope", sess())
	wantErr(t, "GetPKCERequestSession", err, storage.ErrNotFound)
	wantErr(t, "DeleteClient", s.DeleteClient(ctx, "nope"), storage.ErrNotFound)
	wantErr(t, "DeletePKCERequestSession", s.DeletePKCERequestSession(ctx, "nope"), storage.ErrNotFound)
	// Deleting a missing token is idempotent (fosite's reuse handling).
	noErr(t, "DeleteAccessTokenSession", s.DeleteAccessTokenSession(ctx, "nope"))
	noErr(t, "DeleteRefreshTokenSession", s.DeleteRefreshTokenSession(ctx, "nope"))
}

func testCreateConflicts(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	req := newRequest("app", "req-1")
	noErr(t, "CreateAuthorizeCodeSession", s.CreateAuthorizeCodeSession(ctx, "sig", req))
	wantErr(t, "CreateAuthorizeCodeSession duplicate", s.CreateAuthorizeCodeSession(ctx, "sig", req), storage.ErrAlreadyExists)
	noErr(t, "CreateAccessTokenSession", s.CreateAccessTokenSession(ctx, "sig", req))
	wantErr(t, "CreateAccessTokenSession duplicate", s.CreateAccessTokenSession(ctx, "sig", req), storage.ErrAlreadyExists)

	ghost := newRequest("ghost", "req-2")
	wantErr(t, "CreateAuthorizeCodeSession unknown client", s.CreateAuthorizeCodeSession(ctx, "g", ghost), storage.ErrNotFound)
	wantErr(t, "CreateAccessTokenSession unknown client", s.CreateAccessTokenSession(ctx, "g", ghost), storage.ErrNotFound)
	wantErr(t, "CreateRefreshTokenSession unknown client", s.CreateRefreshTokenSession(ctx, "g", "g", ghost), storage.ErrNotFound)
	wantErr(t, "CreatePKCERequestSession unknown client", s.CreatePKCERequestSession(ctx, "g", ghost), storage.ErrNotFound)
}

func testSessionRoundTrip(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	req := newRequest("app", "req-1")
	noErr(t, "CreateAccessTokenSession", s.CreateAccessTokenSession(ctx, "at", req))

	// The stored request is a copy: later changes by the caller don't leak in.
	req.Session.(*fosite.DefaultSession).Subject = "mallory"
	req.GrantedScope[0] = "mutated"

	into := sess()
	got, err := s.GetAccessTokenSession(ctx, "at", into)
	noErr(t, "GetAccessTokenSession", err)
	if got.GetSession() != into {
		t.Error("the returned request does not carry the session passed in")
	}
	if into.Subject != "alice-sub" || into.Username != "alice" {
		t.Errorf("session = %+v, want subject alice-sub, username alice", into)
	}
	if got.GetGrantedScopes()[0] != "openid" {
		t.Errorf("GrantedScopes = %q: the store aliased the caller's slice", got.GetGrantedScopes())
	}
	wantExp := req.Session.GetExpiresAt(fosite.AccessToken)
	if !into.GetExpiresAt(fosite.AccessToken).Equal(wantExp) {
		t.Errorf("ExpiresAt[access_token] = %v, want %v", into.GetExpiresAt(fosite.AccessToken), wantExp)
	}
}

func testSecretForm(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	req := newRequest("app", "req-1")
	for _, k := range []string{"code", "code_verifier", "refresh_token", "client_secret", "password"} {
		req.Form.Set(k, "secret")
	}
	noErr(t, "CreateAuthorizeCodeSession", s.CreateAuthorizeCodeSession(ctx, "sig", req))
	got, err := s.GetAuthorizeCodeSession(ctx, "sig", sess())
	noErr(t, "GetAuthorizeCodeSession", err)
	for k := range got.GetRequestForm() {
		if got.GetRequestForm().Get(k) == "secret" {
			t.Errorf("form value %q was persisted", k)
		}
	}
	if got.GetRequestForm().Get("redirect_uri") != "https://app.example/cb" {
		t.Errorf("redirect_uri lost: %v", got.GetRequestForm())
	}
}

// ---- transactions ----

func testTxRollback(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	req := newRequest("app", "req-1")
	noErr(t, "create code", s.CreateAuthorizeCodeSession(ctx, "code", req))
	noErr(t, "create refresh", s.CreateRefreshTokenSession(ctx, "rt", "at", req))
	noErr(t, "create pkce", s.CreatePKCERequestSession(ctx, "code", req))

	tx, err := s.BeginTX(ctx)
	noErr(t, "BeginTX", err)
	noErr(t, "invalidate in tx", s.InvalidateAuthorizeCodeSession(tx, "code"))
	noErr(t, "rotate in tx", s.RotateRefreshToken(tx, "req-1", "rt"))
	noErr(t, "create access in tx", s.CreateAccessTokenSession(tx, "at-new", req))
	noErr(t, "delete pkce in tx", s.DeletePKCERequestSession(tx, "code"))
	noErr(t, "create client in tx", s.CreateClient(tx, &storage.Client{ID: "tx-client", TokenEndpointAuthMethod: "none"}))
	_, err = s.GetAccessTokenSession(tx, "at-new", sess())
	noErr(t, "read own write in tx", err)
	noErr(t, "Rollback", s.Rollback(tx))

	_, err = s.GetAuthorizeCodeSession(ctx, "code", sess())
	noErr(t, "code active after rollback", err)
	_, err = s.GetAccessTokenSession(ctx, "at-new", sess())
	wantErr(t, "access token after rollback", err, storage.ErrNotFound)
	_, err = s.GetRefreshTokenSession(ctx, "rt", sess())
	noErr(t, "refresh token active after rollback", err)
	_, err = s.GetPKCERequestSession(ctx, "code", sess())
	noErr(t, "pkce session back after rollback", err)
	_, err = s.GetClient(ctx, "tx-client")
	wantErr(t, "client after rollback", err, storage.ErrNotFound)
}

func testTxCommit(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	req := newRequest("app", "req-1")
	noErr(t, "create code", s.CreateAuthorizeCodeSession(ctx, "code", req))
	noErr(t, "create pkce", s.CreatePKCERequestSession(ctx, "code", req))

	tx, err := s.BeginTX(ctx)
	noErr(t, "BeginTX", err)
	noErr(t, "invalidate in tx", s.InvalidateAuthorizeCodeSession(tx, "code"))
	noErr(t, "delete pkce in tx", s.DeletePKCERequestSession(tx, "code"))
	noErr(t, "create access in tx", s.CreateAccessTokenSession(tx, "at", req))
	noErr(t, "create refresh in tx", s.CreateRefreshTokenSession(tx, "rt", "at", req))
	noErr(t, "Commit", s.Commit(tx))

	_, err = s.GetAuthorizeCodeSession(ctx, "code", sess())
	wantErr(t, "code after commit", err, storage.ErrInvalidatedAuthorizeCode)
	_, err = s.GetPKCERequestSession(ctx, "code", sess())
	wantErr(t, "pkce after commit", err, storage.ErrNotFound)
	_, err = s.GetAccessTokenSession(ctx, "at", sess())
	noErr(t, "access token after commit", err)
	_, err = s.GetRefreshTokenSession(ctx, "rt", sess())
	noErr(t, "refresh token after commit", err)
}

func testTxNested(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	req := newRequest("app", "req-1")

	outer, err := s.BeginTX(ctx)
	noErr(t, "BeginTX outer", err)
	noErr(t, "create at-outer", s.CreateAccessTokenSession(outer, "at-outer", req))
	inner, err := s.BeginTX(outer)
	noErr(t, "BeginTX inner", err)
	noErr(t, "create at-inner", s.CreateAccessTokenSession(inner, "at-inner", req))
	noErr(t, "Rollback inner", s.Rollback(inner))
	inner2, err := s.BeginTX(outer)
	noErr(t, "BeginTX inner2", err)
	noErr(t, "create at-inner2", s.CreateAccessTokenSession(inner2, "at-inner2", req))
	noErr(t, "Commit inner2", s.Commit(inner2))
	noErr(t, "Commit outer", s.Commit(outer))

	_, err = s.GetAccessTokenSession(ctx, "at-outer", sess())
	noErr(t, "at-outer", err)
	_, err = s.GetAccessTokenSession(ctx, "at-inner2", sess())
	noErr(t, "at-inner2", err)
	_, err = s.GetAccessTokenSession(ctx, "at-inner", sess())
	wantErr(t, "at-inner (rolled back)", err, storage.ErrNotFound)
}

// ---- client deletion ----

func testDeleteClient(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "gone")
	mustClient(t, s, "kept")
	for _, id := range []string{"gone", "kept"} {
		req := newRequest(id, "req-"+id)
		noErr(t, "create code", s.CreateAuthorizeCodeSession(ctx, "code-"+id, req))
		noErr(t, "create access", s.CreateAccessTokenSession(ctx, "at-"+id, req))
		noErr(t, "create refresh", s.CreateRefreshTokenSession(ctx, "rt-"+id, "at-"+id, req))
		noErr(t, "create pkce", s.CreatePKCERequestSession(ctx, "code-"+id, req))
	}
	noErr(t, "DeleteClient", s.DeleteClient(ctx, "gone"))

	// A deleted client's codes and tokens are unusable: a backend may keep
	// them inactive or delete them, but never return them as valid.
	unusable := func(what string, err error) {
		t.Helper()
		if err == nil || !(errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrInactiveToken) ||
			errors.Is(err, storage.ErrInvalidatedAuthorizeCode)) {
			t.Errorf("%s of deleted client: err = %v, want not found or inactive", what, err)
		}
	}
	_, err := s.GetAuthorizeCodeSession(ctx, "code-gone", sess())
	unusable("authorize code", err)
	_, err = s.GetAccessTokenSession(ctx, "at-gone", sess())
	unusable("access token", err)
	_, err = s.GetRefreshTokenSession(ctx, "rt-gone", sess())
	unusable("refresh token", err)
	if err := s.InvalidateAuthorizeCodeSession(ctx, "code-gone"); err == nil {
		t.Error("InvalidateAuthorizeCodeSession of a deleted client's code succeeded")
	}
	if err := s.RotateRefreshToken(ctx, "req-gone", "rt-gone"); err == nil {
		t.Error("RotateRefreshToken of a deleted client's token succeeded")
	}

	// Re-creating the client ID does not revive anything.
	mustClient(t, s, "gone")
	_, err = s.GetRefreshTokenSession(ctx, "rt-gone", sess())
	unusable("refresh token after re-creating the client", err)

	_, err = s.GetAuthorizeCodeSession(ctx, "code-kept", sess())
	noErr(t, "other client's code", err)
	_, err = s.GetAccessTokenSession(ctx, "at-kept", sess())
	noErr(t, "other client's access token", err)
	_, err = s.GetRefreshTokenSession(ctx, "rt-kept", sess())
	noErr(t, "other client's refresh token", err)
	_, err = s.GetPKCERequestSession(ctx, "code-kept", sess())
	noErr(t, "other client's pkce session", err)
}

// ---- concurrency ----

// race runs op Concurrency times in parallel, each in its own transaction
// (committed on success, rolled back on error), and returns the errors.
func race(t *testing.T, s storage.Store, op func(ctx context.Context) error) []error {
	t.Helper()
	ctx := t.Context()
	errs := make([]error, Concurrency)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range Concurrency {
		wg.Go(func() {
			<-start
			tx, err := s.BeginTX(ctx)
			if err != nil {
				errs[i] = fmt.Errorf("BeginTX: %w", err)
				return
			}
			if err := op(tx); err != nil {
				errs[i] = err
				if rbErr := s.Rollback(tx); rbErr != nil {
					errs[i] = fmt.Errorf("%w; rollback: %w", err, rbErr)
				}
				return
			}
			errs[i] = s.Commit(tx)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// exactlyOneWinner asserts one nil error and all others matching lost.
func exactlyOneWinner(t *testing.T, errs []error, lost error) {
	t.Helper()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, lost):
			t.Errorf("loser's err = %v, want %v", err, lost)
		}
	}
	if wins != 1 {
		t.Errorf("%d of %d concurrent calls succeeded, want exactly 1", wins, len(errs))
	}
}

func testConcurrentInvalidate(t *testing.T, s Store) {
	mustClient(t, s, "app")
	req := newRequest("app", "req-1")
	noErr(t, "create code", s.CreateAuthorizeCodeSession(t.Context(), "code", req))
	var n sync.Mutex
	created := 0
	errs := race(t, s, func(ctx context.Context) error {
		if err := s.InvalidateAuthorizeCodeSession(ctx, "code"); err != nil {
			return err
		}
		// The winner issues tokens in the same transaction, as fosite does.
		n.Lock()
		created++
		sig := fmt.Sprint("at-", created)
		n.Unlock()
		return s.CreateAccessTokenSession(ctx, sig, req)
	})
	exactlyOneWinner(t, errs, storage.ErrInvalidatedAuthorizeCode)
	_, err := s.GetAuthorizeCodeSession(t.Context(), "code", sess())
	wantErr(t, "code after race", err, storage.ErrInvalidatedAuthorizeCode)
}

func testConcurrentRotate(t *testing.T, s Store) {
	mustClient(t, s, "app")
	req := newRequest("app", "req-1")
	noErr(t, "create access", s.CreateAccessTokenSession(t.Context(), "at", req))
	noErr(t, "create refresh", s.CreateRefreshTokenSession(t.Context(), "rt", "at", req))
	var n sync.Mutex
	created := 0
	errs := race(t, s, func(ctx context.Context) error {
		if err := s.RotateRefreshToken(ctx, "req-1", "rt"); err != nil {
			return err
		}
		n.Lock()
		created++
		i := created
		n.Unlock()
		if err := s.CreateAccessTokenSession(ctx, fmt.Sprint("at-", i), req); err != nil {
			return err
		}
		return s.CreateRefreshTokenSession(ctx, fmt.Sprint("rt-", i), fmt.Sprint("at-", i), req)
	})
	exactlyOneWinner(t, errs, storage.ErrInactiveToken)
	_, err := s.GetRefreshTokenSession(t.Context(), "rt-1", sess())
	noErr(t, "the winner's new refresh token", err)
}

func testConcurrentDeletePKCE(t *testing.T, s Store) {
	mustClient(t, s, "app")
	noErr(t, "create pkce", s.CreatePKCERequestSession(t.Context(), "code", newRequest("app", "req-1")))
	errs := race(t, s, func(ctx context.Context) error {
		return s.DeletePKCERequestSession(ctx, "code")
	})
	exactlyOneWinner(t, errs, storage.ErrNotFound)
}

func testPing(t *testing.T, s Store) {
	noErr(t, "Ping", s.Ping(t.Context()))
}
