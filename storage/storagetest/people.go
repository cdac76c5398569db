package storagetest

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

// peopleCases are the user, session and consent cases of the suite.
var peopleCases = []testCase{
	{"Users", testUsers},
	{"UpgradePasswordHashIsConditional", testUpgradePasswordHash},
	{"UserRenameKeepsSubject", testUserRename},
	{"UserList", testUserList},
	{"UserDeleteCascades", testUserDelete},
	{"Sessions", testSessions},
	{"SessionOfDisabledUser", testSessionDisabled},
	{"RevokeSubject", testRevokeSubject},
	{"RevokeSubjectInTxRollsBack", testRevokeSubjectRollback},
	{"RevokeSubjectDuringRotation", testRevokeSubjectDuringRotation},
	{"Consents", testConsents},
	{"SessionUserConsent", testSessionUserConsent},
	{"RevokeConsentRevokesTokens", testRevokeConsent},
}

func mustUser(t *testing.T, s Store, name string) *storage.User {
	t.Helper()
	u := &storage.User{Username: name, PasswordHash: []byte("$2a$hash-" + name), Email: name + "@example.com", Name: "User " + name}
	noErr(t, "CreateUser "+name, s.CreateUser(t.Context(), u))
	return u
}

// subjectRequest is newRequest with the session's subject set to sub.
func subjectRequest(clientID, requestID, sub string) *fosite.Request {
	r := newRequest(clientID, requestID)
	r.Session.(*fosite.DefaultSession).Subject = sub
	return r
}

func testUsers(t *testing.T, s Store) {
	ctx := t.Context()
	u := &storage.User{Username: "alice", PasswordHash: []byte("$2a$hash"), Email: "a@example.com", EmailVerified: true, Name: "Alice"}
	noErr(t, "CreateUser", s.CreateUser(ctx, u))
	if u.CreatedAt.IsZero() || len(u.Subject) != 32 {
		t.Errorf("CreateUser left CreatedAt %v, Subject %q", u.CreatedAt, u.Subject)
	}
	wantErr(t, "CreateUser duplicate name", s.CreateUser(ctx, &storage.User{Username: "alice", PasswordHash: []byte("x")}), storage.ErrAlreadyExists)
	wantErr(t, "CreateUser duplicate subject", s.CreateUser(ctx, &storage.User{Subject: u.Subject, Username: "other", PasswordHash: []byte("x")}), storage.ErrAlreadyExists)
	got, err := s.GetUser(ctx, "alice")
	noErr(t, "GetUser", err)
	if got.Subject != u.Subject || got.Username != "alice" || string(got.PasswordHash) != "$2a$hash" || got.Email != "a@example.com" ||
		!got.EmailVerified || got.Name != "Alice" || got.Disabled || !got.CreatedAt.Equal(u.CreatedAt) || got.CreatedAt.Location() != time.UTC {
		t.Errorf("GetUser = %#v, want %#v", got, u)
	}
	bySub, err := s.GetUserBySubject(ctx, u.Subject)
	noErr(t, "GetUserBySubject", err)
	if bySub.Username != "alice" {
		t.Errorf("GetUserBySubject = %#v", bySub)
	}
	noErr(t, "SetUserPassword", s.SetUserPassword(ctx, u.Subject, []byte("$2a$new")))
	noErr(t, "SetUserDisabled", s.SetUserDisabled(ctx, u.Subject, true))
	noErr(t, "UpdateUserProfile", s.UpdateUserProfile(ctx, &storage.User{Subject: u.Subject, Email: "b@example.com", Name: "B"}))
	got, _ = s.GetUser(ctx, "alice")
	if string(got.PasswordHash) != "$2a$new" || !got.Disabled || got.Email != "b@example.com" || got.EmailVerified || got.Name != "B" {
		t.Errorf("after updates GetUser = %#v", got)
	}
	_, err = s.GetUser(ctx, "Alice")
	wantErr(t, "GetUser compares exactly", err, storage.ErrNotFound)
	_, err = s.GetUserBySubject(ctx, "nobody")
	wantErr(t, "GetUserBySubject missing", err, storage.ErrNotFound)
	for name, err := range map[string]error{
		"SetUserPassword":   s.SetUserPassword(ctx, "nobody", []byte("x")),
		"SetUserDisabled":   s.SetUserDisabled(ctx, "nobody", true),
		"RenameUser":        s.RenameUser(ctx, "nobody", "x"),
		"DeleteUser":        s.DeleteUser(ctx, "nobody"),
		"UpdateUserProfile": s.UpdateUserProfile(ctx, &storage.User{Subject: "nobody"}),
	} {
		wantErr(t, name+" missing", err, storage.ErrNotFound)
	}
	noErr(t, "RevokeSubject of nobody", s.RevokeSubject(ctx, "nobody"))
}

// testUpgradePasswordHash: the rehash after a sign-in replaces exactly the
// hash it read, so a password set in between is never overwritten.
func testUpgradePasswordHash(t *testing.T, s Store) {
	ctx := t.Context()
	u := &storage.User{Username: "alice", PasswordHash: []byte("$2a$old"), CreatedAt: time.Now().Add(-time.Hour)}
	noErr(t, "CreateUser", s.CreateUser(ctx, u))
	ok, err := s.UpgradePasswordHash(ctx, u.Subject, []byte("$2a$old"), []byte("$argon2id$new"))
	noErr(t, "UpgradePasswordHash", err)
	if !ok {
		t.Fatal("UpgradePasswordHash of the current hash = false")
	}
	got, _ := s.GetUserBySubject(ctx, u.Subject)
	if string(got.PasswordHash) != "$argon2id$new" || !got.UpdatedAt.Equal(u.UpdatedAt) {
		t.Errorf("after upgrade: hash %q, updated %v (want %v, unchanged)", got.PasswordHash, got.UpdatedAt, u.UpdatedAt)
	}
	// A second upgrade from the old hash (a concurrent sign-in) loses.
	ok, err = s.UpgradePasswordHash(ctx, u.Subject, []byte("$2a$old"), []byte("$argon2id$other"))
	if err != nil || ok {
		t.Errorf("UpgradePasswordHash from a stale hash = %v, %v; want false, nil", ok, err)
	}
	// A password set between the read and the upgrade stays.
	noErr(t, "SetUserPassword", s.SetUserPassword(ctx, u.Subject, []byte("$argon2id$set-by-admin")))
	ok, err = s.UpgradePasswordHash(ctx, u.Subject, []byte("$argon2id$new"), []byte("$argon2id$rehash"))
	if err != nil || ok {
		t.Errorf("UpgradePasswordHash after SetUserPassword = %v, %v; want false, nil", ok, err)
	}
	got, _ = s.GetUserBySubject(ctx, u.Subject)
	if string(got.PasswordHash) != "$argon2id$set-by-admin" {
		t.Errorf("hash = %q, want the one SetUserPassword set", got.PasswordHash)
	}
	ok, err = s.UpgradePasswordHash(ctx, "nobody", []byte("x"), []byte("y"))
	if err != nil || ok {
		t.Errorf("UpgradePasswordHash of nobody = %v, %v; want false, nil", ok, err)
	}
}

func testUserRename(t *testing.T, s Store) {
	ctx := t.Context()
	a, b := mustUser(t, s, "alice"), mustUser(t, s, "bob")
	noErr(t, "RenameUser", s.RenameUser(ctx, a.Subject, "alicia"))
	got, err := s.GetUser(ctx, "alicia")
	noErr(t, "GetUser new name", err)
	if got.Subject != a.Subject {
		t.Errorf("subject after rename = %q, want %q", got.Subject, a.Subject)
	}
	_, err = s.GetUser(ctx, "alice")
	wantErr(t, "GetUser old name", err, storage.ErrNotFound)
	wantErr(t, "RenameUser to a taken name", s.RenameUser(ctx, b.Subject, "alicia"), storage.ErrAlreadyExists)
	noErr(t, "RenameUser to itself", s.RenameUser(ctx, a.Subject, "alicia"))
}

func testUserList(t *testing.T, s Store) {
	ctx := t.Context()
	for _, n := range []string{"carol", "alice", "bob", "dave"} {
		mustUser(t, s, n)
	}
	page, err := s.ListUsers(ctx, "", 3)
	noErr(t, "ListUsers", err)
	var names []string
	for _, u := range page {
		names = append(names, u.Username)
	}
	if !slices.Equal(names, []string{"alice", "bob", "carol"}) {
		t.Errorf("ListUsers page 1 = %v", names)
	}
	page, err = s.ListUsers(ctx, "carol", 3)
	noErr(t, "ListUsers page 2", err)
	if len(page) != 1 || page[0].Username != "dave" {
		t.Errorf("ListUsers page 2 = %v", page)
	}
}

func testUserDelete(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	u := mustUser(t, s, "alice")
	now := time.Now()
	noErr(t, "CreateSession", s.CreateSession(ctx, &storage.Session{ID: "s1", Subject: u.Subject, AuthTime: now,
		IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(2 * time.Hour)}))
	noErr(t, "GrantConsent", s.GrantConsent(ctx, u.Subject, "app", []string{"openid"}))
	noErr(t, "DeleteUser", s.DeleteUser(ctx, u.Subject))
	_, err := s.GetUserBySubject(ctx, u.Subject)
	wantErr(t, "GetUserBySubject after delete", err, storage.ErrNotFound)
	_, err = s.TouchSession(ctx, "s1", "", now, time.Hour)
	wantErr(t, "TouchSession after delete", err, storage.ErrNotFound)
	_, err = s.GetConsent(ctx, u.Subject, "app")
	wantErr(t, "GetConsent after delete", err, storage.ErrNotFound)
	// The username is free again and the new user has a new subject.
	again := mustUser(t, s, "alice")
	if again.Subject == u.Subject {
		t.Error("re-created user got the old subject")
	}
}

func testSessions(t *testing.T, s Store) {
	ctx := t.Context()
	u := mustUser(t, s, "alice")
	now := time.Now().Truncate(time.Second)
	x := &storage.Session{ID: "hash-1", Subject: u.Subject, AuthTime: now.In(nonUTC), AMR: []string{"pwd"},
		IdleExpiresAt: now.Add(30 * time.Minute), ExpiresAt: now.Add(time.Hour)}
	noErr(t, "CreateSession", s.CreateSession(ctx, x))
	wantErr(t, "CreateSession duplicate", s.CreateSession(ctx, x), storage.ErrAlreadyExists)
	wantErr(t, "CreateSession unknown user", s.CreateSession(ctx, &storage.Session{ID: "h2", Subject: "nobody",
		AuthTime: now, IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)}), storage.ErrNotFound)

	got, err := s.GetSession(ctx, "hash-1", now.Add(time.Minute))
	noErr(t, "GetSession", err)
	if got.Subject != u.Subject || !got.IdleExpiresAt.Equal(now.Add(30*time.Minute)) {
		t.Errorf("GetSession = %#v", got)
	}
	gs, gu, err := s.GetSessionUser(ctx, "hash-1", now.Add(time.Minute))
	noErr(t, "GetSessionUser", err)
	wantUser, _ := s.GetUserBySubject(ctx, u.Subject)
	if !reflect.DeepEqual(gs, got) || !reflect.DeepEqual(gu, wantUser) {
		t.Errorf("GetSessionUser = %#v, %#v; want %#v, %#v", gs, gu, got, wantUser)
	}
	_, _, err = s.GetSessionUser(ctx, "hash-1", now.Add(31*time.Minute))
	wantErr(t, "GetSessionUser after idle expiry", err, storage.ErrNotFound)
	_, err = s.GetSession(ctx, "hash-1", now.Add(31*time.Minute))
	wantErr(t, "GetSession after idle expiry", err, storage.ErrNotFound)
	_, err = s.GetSession(ctx, "missing", now)
	wantErr(t, "GetSession missing", err, storage.ErrNotFound)
	got, err = s.TouchSession(ctx, "hash-1", "", now.Add(20*time.Minute), 30*time.Minute)
	noErr(t, "TouchSession", err)
	if got.Subject != u.Subject || !got.AuthTime.Equal(now) || got.AuthTime.Location() != time.UTC || !slices.Equal(got.AMR, []string{"pwd"}) {
		t.Errorf("TouchSession = %#v", got)
	}
	if !got.IdleExpiresAt.Equal(now.Add(50 * time.Minute)) {
		t.Errorf("idle expiry = %v, want %v", got.IdleExpiresAt, now.Add(50*time.Minute))
	}
	// A touch that would move the idle expiry by less than the granularity
	// (18 s of 30 min) leaves it, and still records the use.
	got, err = s.TouchSession(ctx, "hash-1", "", now.Add(20*time.Minute+10*time.Second), 30*time.Minute)
	noErr(t, "TouchSession within the granularity", err)
	if !got.IdleExpiresAt.Equal(now.Add(50*time.Minute)) || !got.LastSeenAt.Equal(now.Add(20*time.Minute+10*time.Second)) {
		t.Errorf("touch within the granularity: idle expiry %v, last seen %v; want %v, %v", got.IdleExpiresAt, got.LastSeenAt,
			now.Add(50*time.Minute), now.Add(20*time.Minute+10*time.Second))
	}
	got, err = s.TouchSession(ctx, "hash-1", "", now.Add(20*time.Minute+20*time.Second), 30*time.Minute)
	noErr(t, "TouchSession past the granularity", err)
	if !got.IdleExpiresAt.Equal(now.Add(50*time.Minute + 20*time.Second)) {
		t.Errorf("touch past the granularity: idle expiry %v, want %v", got.IdleExpiresAt, now.Add(50*time.Minute+20*time.Second))
	}
	// A shorter idle lifetime (the setting lowered since) applies at the
	// next use, however small the step.
	got, err = s.TouchSession(ctx, "hash-1", "", now.Add(20*time.Minute+30*time.Second), 5*time.Minute)
	noErr(t, "TouchSession with a shorter idle lifetime", err)
	if !got.IdleExpiresAt.Equal(now.Add(25*time.Minute + 30*time.Second)) {
		t.Errorf("touch with a shorter idle lifetime: idle expiry %v, want %v", got.IdleExpiresAt, now.Add(25*time.Minute+30*time.Second))
	}
	_, err = s.TouchSession(ctx, "hash-1", "", now.Add(25*time.Minute), 30*time.Minute)
	noErr(t, "TouchSession with the longer idle lifetime again", err)
	// The idle expiry never passes the absolute one.
	got, err = s.TouchSession(ctx, "hash-1", "", now.Add(45*time.Minute), 30*time.Minute)
	noErr(t, "TouchSession again", err)
	if !got.IdleExpiresAt.Equal(now.Add(time.Hour)) {
		t.Errorf("idle expiry = %v, want the absolute %v", got.IdleExpiresAt, now.Add(time.Hour))
	}
	_, err = s.TouchSession(ctx, "hash-1", "", now.Add(time.Hour), 30*time.Minute)
	wantErr(t, "TouchSession after absolute expiry", err, storage.ErrNotFound)
	_, err = s.TouchSession(ctx, "missing", "", now, time.Minute)
	wantErr(t, "TouchSession missing", err, storage.ErrNotFound)

	// Idle expiry.
	noErr(t, "CreateSession 2", s.CreateSession(ctx, &storage.Session{ID: "hash-2", Subject: u.Subject, AuthTime: now,
		IdleExpiresAt: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}))
	_, err = s.TouchSession(ctx, "hash-2", "", now.Add(2*time.Minute), time.Minute)
	wantErr(t, "TouchSession after idle expiry", err, storage.ErrNotFound)

	noErr(t, "CreateSession 3", s.CreateSession(ctx, &storage.Session{ID: "hash-3", Subject: u.Subject, AuthTime: now,
		IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(2 * time.Hour)}))
	list, err := s.ListSessions(ctx, u.Subject, now.Add(time.Second))
	noErr(t, "ListSessions", err)
	if len(list) != 3 {
		t.Errorf("ListSessions = %d sessions, want 3", len(list))
	}
	noErr(t, "DeleteSession", s.DeleteSession(ctx, "hash-3"))
	noErr(t, "DeleteSession again", s.DeleteSession(ctx, "hash-3"))
	_, err = s.TouchSession(ctx, "hash-3", "", now, time.Minute)
	wantErr(t, "TouchSession after DeleteSession", err, storage.ErrNotFound)

	n, err := s.DeleteExpiredSessions(ctx, now.Add(90*time.Minute), 10)
	noErr(t, "DeleteExpiredSessions", err)
	if n != 2 {
		t.Errorf("DeleteExpiredSessions = %d, want 2", n)
	}
	noErr(t, "CreateSession 4", s.CreateSession(ctx, &storage.Session{ID: "hash-4", Subject: u.Subject, AuthTime: now,
		IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(2 * time.Hour)}))
	n, err = s.EndSessions(ctx, u.Subject)
	noErr(t, "EndSessions", err)
	if n != 1 {
		t.Errorf("EndSessions = %d, want 1", n)
	}
	_, err = s.TouchSession(ctx, "hash-4", "", now, time.Minute)
	wantErr(t, "TouchSession after EndSessions", err, storage.ErrNotFound)
}

func testSessionDisabled(t *testing.T, s Store) {
	ctx := t.Context()
	u := mustUser(t, s, "alice")
	now := time.Now()
	noErr(t, "CreateSession", s.CreateSession(ctx, &storage.Session{ID: "h", Subject: u.Subject, AuthTime: now,
		IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)}))
	noErr(t, "SetUserDisabled", s.SetUserDisabled(ctx, u.Subject, true))
	_, err := s.TouchSession(ctx, "h", "", now, time.Minute)
	wantErr(t, "TouchSession of a disabled user", err, storage.ErrNotFound)
	_, err = s.GetSession(ctx, "h", now)
	wantErr(t, "GetSession of a disabled user", err, storage.ErrNotFound)
	_, _, err = s.GetSessionUser(ctx, "h", now)
	wantErr(t, "GetSessionUser of a disabled user", err, storage.ErrNotFound)
	wantErr(t, "CreateSession for a disabled user", s.CreateSession(ctx, &storage.Session{ID: "h2", Subject: u.Subject, AuthTime: now,
		IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)}), storage.ErrNotFound)
}

// issue stores a code, an access token and a refresh token for request id.
func issue(t *testing.T, s Store, client, id, sub string) {
	t.Helper()
	ctx := t.Context()
	r := subjectRequest(client, id, sub)
	noErr(t, "CreateAuthorizeCodeSession", s.CreateAuthorizeCodeSession(ctx, "code-"+id, r))
	noErr(t, "CreateAccessTokenSession", s.CreateAccessTokenSession(ctx, "at-"+id, r))
	noErr(t, "CreateRefreshTokenSession", s.CreateRefreshTokenSession(ctx, "rt-"+id, "at-"+id, r))
}

// issuedActive reports whether the code, access and refresh token of id are
// active, as a 3-character string of 'y'/'n'.
func issuedActive(t *testing.T, s Store, id string) string {
	t.Helper()
	ctx := t.Context()
	out := ""
	for _, err := range []error{
		func() error { _, err := s.GetAuthorizeCodeSession(ctx, "code-"+id, sess()); return err }(),
		func() error { _, err := s.GetAccessTokenSession(ctx, "at-"+id, sess()); return err }(),
		func() error { _, err := s.GetRefreshTokenSession(ctx, "rt-"+id, sess()); return err }(),
	} {
		switch {
		case err == nil:
			out += "y"
		case errors.Is(err, storage.ErrInvalidatedAuthorizeCode), errors.Is(err, storage.ErrInactiveToken):
			out += "n"
		default:
			t.Fatalf("get %s: %v", id, err)
		}
	}
	return out
}

func testRevokeSubject(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	a, b := mustUser(t, s, "alice"), mustUser(t, s, "bob")
	issue(t, s, "app", "ra", a.Subject)
	issue(t, s, "app", "rb", b.Subject)
	now := time.Now()
	for _, x := range []struct{ id, sub string }{{"sa", a.Subject}, {"sb", b.Subject}} {
		noErr(t, "CreateSession", s.CreateSession(ctx, &storage.Session{ID: x.id, Subject: x.sub, AuthTime: now,
			IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)}))
	}
	noErr(t, "RevokeSubject", s.RevokeSubject(ctx, a.Subject))
	if got := issuedActive(t, s, "ra"); got != "nnn" {
		t.Errorf("alice's code/access/refresh active = %s, want nnn", got)
	}
	if got := issuedActive(t, s, "rb"); got != "yyy" {
		t.Errorf("bob's code/access/refresh active = %s, want yyy", got)
	}
	if _, err := s.TouchSession(ctx, "sa", "", now, time.Minute); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("alice's session after RevokeSubject: %v", err)
	}
	if _, err := s.TouchSession(ctx, "sb", "", now, time.Minute); err != nil {
		t.Errorf("bob's session after RevokeSubject: %v", err)
	}
	if _, err := s.GetAccessTokenSession(ctx, "at-ra", &fosite.DefaultSession{}); !errors.Is(err, storage.ErrInactiveToken) {
		t.Errorf("access token after RevokeSubject: %v, want ErrInactiveToken", err)
	}
}

func testRevokeSubjectRollback(t *testing.T, s Store) {
	mustClient(t, s, "app")
	a := mustUser(t, s, "alice")
	issue(t, s, "app", "ra", a.Subject)
	tx, err := s.BeginTX(t.Context())
	noErr(t, "BeginTX", err)
	noErr(t, "SetUserPassword", s.SetUserPassword(tx, a.Subject, []byte("new")))
	noErr(t, "RevokeSubject", s.RevokeSubject(tx, a.Subject))
	noErr(t, "Rollback", s.Rollback(tx))
	if got := issuedActive(t, s, "ra"); got != "yyy" {
		t.Errorf("after rollback code/access/refresh active = %s, want yyy", got)
	}
	u, _ := s.GetUserBySubject(t.Context(), a.Subject)
	if string(u.PasswordHash) == "new" {
		t.Error("password changed despite rollback")
	}
}

// testRevokeSubjectDuringRotation: a refresh rotation that is under way
// when the subject is revoked must not leave its new pair active.
func testRevokeSubjectDuringRotation(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	a := mustUser(t, s, "alice")
	issue(t, s, "app", "ra", a.Subject)
	tx, err := s.BeginTX(ctx)
	noErr(t, "BeginTX", err)
	noErr(t, "RotateRefreshToken", s.RotateRefreshToken(tx, "ra", "rt-ra"))
	var wg sync.WaitGroup
	wg.Add(1)
	var revokeErr error
	go func() {
		defer wg.Done()
		revokeErr = s.RevokeSubject(ctx, a.Subject)
	}()
	time.Sleep(50 * time.Millisecond) // let the revocation reach the grant lock
	r := subjectRequest("app", "ra", a.Subject)
	noErr(t, "CreateAccessTokenSession new", s.CreateAccessTokenSession(tx, "at-ra2", r))
	noErr(t, "CreateRefreshTokenSession new", s.CreateRefreshTokenSession(tx, "rt-ra2", "at-ra2", r))
	noErr(t, "Commit", s.Commit(tx))
	wg.Wait()
	noErr(t, "RevokeSubject", revokeErr)
	if _, err := s.GetRefreshTokenSession(ctx, "rt-ra2", sess()); !errors.Is(err, storage.ErrInactiveToken) {
		t.Errorf("new refresh token after RevokeSubject: err = %v, want ErrInactiveToken", err)
	}
	if _, err := s.GetAccessTokenSession(ctx, "at-ra2", sess()); !errors.Is(err, storage.ErrInactiveToken) {
		t.Errorf("new access token after RevokeSubject: err = %v, want ErrInactiveToken", err)
	}
}

func testConsents(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	mustClient(t, s, "b-app")
	u := mustUser(t, s, "alice")
	_, err := s.GetConsent(ctx, u.Subject, "app")
	wantErr(t, "GetConsent missing", err, storage.ErrNotFound)
	noErr(t, "GrantConsent", s.GrantConsent(ctx, u.Subject, "app", []string{"openid", "offline_access"}))
	noErr(t, "GrantConsent wider", s.GrantConsent(ctx, u.Subject, "app", []string{"openid", "profile"}))
	c, err := s.GetConsent(ctx, u.Subject, "app")
	noErr(t, "GetConsent", err)
	if !slices.Equal(c.Scopes, []string{"offline_access", "openid", "profile"}) || c.GrantedAt.IsZero() {
		t.Errorf("GetConsent = %#v", c)
	}
	noErr(t, "GrantConsent b-app", s.GrantConsent(ctx, u.Subject, "b-app", nil))
	list, err := s.ListConsents(ctx, u.Subject)
	noErr(t, "ListConsents", err)
	if len(list) != 2 || list[0].ClientID != "app" || list[1].ClientID != "b-app" || len(list[1].Scopes) != 0 || list[1].Scopes == nil {
		t.Errorf("ListConsents = %#v", list)
	}
	wantErr(t, "GrantConsent unknown client", s.GrantConsent(ctx, u.Subject, "nope", []string{"openid"}), storage.ErrNotFound)
	wantErr(t, "GrantConsent unknown user", s.GrantConsent(ctx, "nobody", "app", []string{"openid"}), storage.ErrNotFound)
	// Deleting the client deletes its consents.
	noErr(t, "DeleteClient", s.DeleteClient(ctx, "b-app"))
	list, _ = s.ListConsents(ctx, u.Subject)
	if len(list) != 1 {
		t.Errorf("ListConsents after DeleteClient = %d, want 1", len(list))
	}
}

func testRevokeConsent(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	mustClient(t, s, "other")
	u := mustUser(t, s, "alice")
	issue(t, s, "app", "r1", u.Subject)
	issue(t, s, "other", "r2", u.Subject)
	noErr(t, "GrantConsent", s.GrantConsent(ctx, u.Subject, "app", []string{"openid"}))
	noErr(t, "RevokeConsent", s.RevokeConsent(ctx, u.Subject, "app"))
	if got := issuedActive(t, s, "r1"); got != "nnn" {
		t.Errorf("app's code/access/refresh active = %s, want nnn", got)
	}
	if got := issuedActive(t, s, "r2"); got != "yyy" {
		t.Errorf("other's code/access/refresh active = %s, want yyy", got)
	}
	_, err := s.GetConsent(ctx, u.Subject, "app")
	wantErr(t, "GetConsent after revoke", err, storage.ErrNotFound)
	wantErr(t, "RevokeConsent again", s.RevokeConsent(ctx, u.Subject, "app"), storage.ErrNotFound)
}

// testSessionUserConsent: GetSessionUserConsent is GetSessionUser with the
// user's consent for the client (GetConsent's answer), or nil without one.
func testSessionUserConsent(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "app")
	mustClient(t, s, "other")
	u := mustUser(t, s, "alice")
	now := time.Now().Truncate(time.Second)
	x := &storage.Session{ID: "hash-1", Subject: u.Subject, AuthTime: now, AMR: []string{"pwd"},
		IdleExpiresAt: now.Add(30 * time.Minute), ExpiresAt: now.Add(time.Hour)}
	noErr(t, "CreateSession", s.CreateSession(ctx, x))
	noErr(t, "GrantConsent", s.GrantConsent(ctx, u.Subject, "app", []string{"openid", "offline_access"}))
	wantS, wantU, err := s.GetSessionUser(ctx, "hash-1", now)
	noErr(t, "GetSessionUser", err)
	wantC, err := s.GetConsent(ctx, u.Subject, "app")
	noErr(t, "GetConsent", err)
	gs, gu, gc, _, err := s.GetSessionUserConsent(ctx, "hash-1", "app", now)
	noErr(t, "GetSessionUserConsent", err)
	if !reflect.DeepEqual(gs, wantS) || !reflect.DeepEqual(gu, wantU) || !reflect.DeepEqual(gc, wantC) {
		t.Errorf("GetSessionUserConsent = %#v, %#v, %#v; want %#v, %#v, %#v", gs, gu, gc, wantS, wantU, wantC)
	}
	gs, _, gc, _, err = s.GetSessionUserConsent(ctx, "hash-1", "other", now)
	noErr(t, "GetSessionUserConsent without consent", err)
	if gc != nil || !reflect.DeepEqual(gs, wantS) {
		t.Errorf("GetSessionUserConsent without consent = %#v, %#v; want the session and nil", gs, gc)
	}
	_, _, _, _, err = s.GetSessionUserConsent(ctx, "hash-1", "app", now.Add(31*time.Minute))
	wantErr(t, "GetSessionUserConsent after idle expiry", err, storage.ErrNotFound)
	_, _, _, _, err = s.GetSessionUserConsent(ctx, "missing", "app", now)
	wantErr(t, "GetSessionUserConsent missing", err, storage.ErrNotFound)
}
